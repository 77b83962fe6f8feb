/* test_cuda_kernels.cu — every CUDA kernel of the backend against its CPU twin (engine/cpu_ops.h) on
 * fresh random inputs at awkward sizes (B = 1, 3, 17; odd lengths; hidden sizes not multiples of 8 or
 * 64), in fp32 and fp16 storage: the chunked GEMM, the fused LSTM cell (masking, pad columns, NaN
 * propagation), the whole encoder of a batch (frame and time stacking, buckets, joint projection), the
 * fused joint+argmax (ties, non-finite outputs), the predictor step and its projection (batched rows
 * bitwise equal to one row at a time), the chunked multi-threaded host staging. Outputs are
 * poisoned with NaN before each launch, so an element the kernel fails to write shows up. Batch
 * invariance is checked bitwise where it is promised. Exits 77 without a GPU; RNNT_TEST_SEED replays;
 * RNNT_TEST_QUICK=1 runs a few cases of each (for compute-sanitizer); RNNT_TEST_ONLY=glob picks tests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "cpu_ops.h"
#include "cu_encoder.h"
#include "cu_gemm.h"
#include "cu_kernels.h"
#include "cu_layer_norm.h"
#include "cu_mma_step.h"
#include "cu_persist.h"
#include "cu_stage.h"
#include "cu_wave.h"
#include "cu_weights.h"
#include "gpu_models.h"
#include "multiblank.h"
extern "C" {
#include "test_util.h"
}

static uint64_t g_seed;
static int g_quick; /* RNNT_TEST_QUICK=1: a few cases of each (for the sanitizer runs) */

#include "cu_test_check.h"

static float rnd_dt(float x, cu_dtype dt) { return dt == CU_F16 ? __half2float(__float2half_rn(x)) : x; }

static float *host_rand(size_t n, float bound, uint64_t *seed)
{
    float *a = (float *)malloc((n + 1) * sizeof(float));
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = bound * tu_randu(seed);
    return a;
}

/* n values into device memory of type dt (rounded in place on the host so the reference sees them). */
static void *dev_put(float *h, size_t n, cu_dtype dt)
{
    void *d;
    size_t bytes = (n + 1) * cu_dtype_size(dt);
    CK(cudaMalloc(&d, bytes));
    if (dt == CU_F16) {
        __half *t = (__half *)malloc(bytes);
        for (size_t i = 0; i < n; i++) {
            t[i] = __float2half_rn(h[i]);
            h[i] = __half2float(t[i]);
        }
        CK(cudaMemcpy(d, t, n * 2, cudaMemcpyHostToDevice));
        free(t);
    } else {
        CK(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
    }
    return d;
}

static void dev_get(float *h, const void *d, size_t n, cu_dtype dt)
{
    if (dt == CU_F16) {
        __half *t = (__half *)malloc((n + 1) * 2);
        CK(cudaMemcpy(t, d, n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n; i++) h[i] = __half2float(t[i]);
        free(t);
    } else {
        CK(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost));
    }
}

static void *dev_poison(size_t bytes)
{
    void *d;
    CK(cudaMalloc(&d, bytes + 16));
    CK(cudaMemset(d, 0xff, bytes + 16)); /* NaN in fp32 and fp16 */
    return d;
}

static const char *dt_name(cu_dtype dt) { return dt == CU_F16 ? "fp16" : "fp32"; }

/* ------------------------------------------------------------------ GEMM */

static void test_gemm(void **state)
{
    (void)state;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    cublasHandle_t h;
    RK(cu_blas_create(s, ws, 32 << 20, &h, err, errlen));
    uint64_t seed = g_seed + 1;
    static const int Ms[] = {1, 3, 17, 1100}, Ns[] = {80, 252}, Ks[] = {24, 64, 200};
    for (int dti = 0; dti < 2; dti++) {
        cu_dtype dt = (cu_dtype)dti;
        double worst = 0;
        for (int mi = 0; mi < 4; mi++)
            for (int ni = 0; ni < 2; ni++)
                for (int ki = 0; ki < 3; ki++)
                    for (int chunk = 64; chunk <= 1024; chunk *= 16) {
                        if (g_quick && (mi % 2 == 0 || ki != 1 || ni != 1)) continue;
                        int M = Ms[mi], N = Ns[ni], K = Ks[ki], Mr = (int)cu_round_up(M, chunk);
                        float *A = host_rand((size_t)(Mr + 8) * K, 1.0f, &seed), *B = host_rand((size_t)N * K, 1.0f, &seed);
                        void *dA = dev_put(A, (size_t)(Mr + 8) * K, dt), *dB = dev_put(B, (size_t)N * K, dt);
                        float *C = (float *)dev_poison((size_t)Mr * N * 4);
                        RK(cu_gemm_rows(h, dt, M, N, K, dA, K, dB, K, C, 1, N, chunk, err, errlen));
                        float *got = (float *)malloc((size_t)Mr * N * 4), *want = (float *)malloc((size_t)M * N * 4);
                        CK(cudaMemcpy(got, C, (size_t)M * N * 4, cudaMemcpyDeviceToHost));
                        rnnt_cpu_gemm_nt(M, N, K, A, K, B, K, 0.0f, want, N);
                        double e = tu_rel_err(got, want, (size_t)M * N);
                        if (!(e <= 1e-5)) fail_msg("gemm %s M=%d N=%d K=%d chunk=%d: rel err %.3g", dt_name(dt), M, N, K, chunk, e);
                        if (e > worst) worst = e;
                        /* a row's result does not depend on where it sits or how many rows there are */
                        if (M >= 17) {
                            float *C2 = (float *)dev_poison((size_t)chunk * N * 4);
                            RK(cu_gemm_rows(h, dt, 3, N, K, (const char *)dA + (size_t)5 * K * cu_dtype_size(dt), K, dB, K,
                                            C2, 1, N, chunk, err, errlen));
                            float *g2 = (float *)malloc((size_t)3 * N * 4);
                            CK(cudaMemcpy(g2, C2, (size_t)3 * N * 4, cudaMemcpyDeviceToHost));
                            if (memcmp(g2, got + (size_t)5 * N, (size_t)3 * N * 4))
                                fail_msg("gemm %s M=%d chunk=%d: rows 5..7 differ when computed alone", dt_name(dt), M, chunk);
                            free(g2);
                            CK(cudaFree(C2));
                        }
                        /* output in the storage type */
                        void *Cd = dev_poison((size_t)Mr * N * cu_dtype_size(dt));
                        RK(cu_gemm_rows(h, dt, M, N, K, dA, K, dB, K, Cd, 0, N, chunk, err, errlen));
                        dev_get(got, Cd, (size_t)M * N, dt);
                        e = tu_rel_err(got, want, (size_t)M * N);
                        if (!(e <= (dt == CU_F16 ? 2e-3 : 1e-5)))
                            fail_msg("gemm %s->%s M=%d N=%d K=%d: rel err %.3g", dt_name(dt), dt_name(dt), M, N, K, e);
                        CK(cudaFree(Cd));
                        CK(cudaFree(C));
                        CK(cudaFree(dA));
                        CK(cudaFree(dB));
                        free(A);
                        free(B);
                        free(got);
                        free(want);
                    }
        printf("gemm %s: %s shapes within %.2g of the CPU, rows position-independent\n", dt_name(dt), g_quick ? "4" : "48", worst);
    }
    cublasDestroy(h);
    CK(cudaFree(ws));
    CK(cudaStreamDestroy(s));
}

/* ------------------------------------------------------------------ LSTM cell */

static void check_pointwise(cu_dtype dt, rnnt_lstm_act act, int B, int H, int first, int inject_nan, uint64_t *seed)
{
    int hp = (int)cu_round_up(H, CU_PAD), g4 = (int)cu_round_up(4 * H, CU_PAD), t = first ? 0 : 1;
    float *x = host_rand((size_t)B * g4, 4.0f, seed), *hpj = host_rand((size_t)B * g4, 2.0f, seed);
    float *bias = host_rand((size_t)4 * H, 1.0f, seed), *c = host_rand((size_t)B * hp, 2.0f, seed);
    int *len = (int *)malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) len[b] = (int)(tu_rand_next(seed) % 4); /* t = 1: rows with len <= 1 are masked */
    if (inject_nan) x[(size_t)(B - 1) * g4 + H + 1] = NAN; /* forget gate of unit 1, last row */
    void *dx = dev_put(x, (size_t)B * g4, dt);
    float *dh = (float *)dev_put(hpj, (size_t)B * g4, CU_F32), *db = (float *)dev_put(bias, (size_t)4 * H, CU_F32);
    float *dc = (float *)dev_put(c, (size_t)B * hp, CU_F32);
    int *dlen;
    CK(cudaMalloc(&dlen, (size_t)B * sizeof(int)));
    CK(cudaMemcpy(dlen, len, (size_t)B * sizeof(int), cudaMemcpyHostToDevice));
    void *dy = dev_poison((size_t)B * hp * cu_dtype_size(dt)), *dhs = dev_poison((size_t)B * hp * cu_dtype_size(dt));
    RK(cu_lstm_pointwise(0, dt, act, B, H, hp, dx, (size_t)g4, first ? NULL : dh, g4, db, dc, hp, dy, (size_t)hp, dhs, hp,
                         first ? NULL : dlen, t, err, errlen));
    CK(cudaDeviceSynchronize());
    float *y = (float *)malloc((size_t)B * hp * 4), *hs = (float *)malloc((size_t)B * hp * 4), *cg = (float *)malloc((size_t)B * hp * 4);
    dev_get(y, dy, (size_t)B * hp, dt);
    dev_get(hs, dhs, (size_t)B * hp, dt);
    CK(cudaMemcpy(cg, dc, (size_t)B * hp * 4, cudaMemcpyDeviceToHost));
    float *pre = (float *)malloc((size_t)4 * H * 4), *hr = (float *)malloc((size_t)H * 4), *cr = (float *)malloc((size_t)H * 4);
    for (int b = 0; b < B; b++) {
        int masked = !first && t >= len[b];
        for (int j = 0; j < hp; j++) {
            float yv = y[(size_t)b * hp + j];
            if ((masked || j >= H) && yv != 0.0f) fail_msg("pointwise: row %d col %d should be 0, is %g", b, j, yv);
        }
        if (masked) {
            for (int j = 0; j < H; j++)
                if (memcmp(&cg[(size_t)b * hp + j], &c[(size_t)b * hp + j], 4)) fail_msg("pointwise: masked row %d changed c", b);
            continue;
        }
        for (int j = H; j < hp; j++)
            if (hs[(size_t)b * hp + j] != 0.0f) fail_msg("pointwise: hs pad column %d of row %d not zero", j, b);
        for (int k = 0; k < 4 * H; k++) {
            float v = x[(size_t)b * g4 + k] + bias[k];
            pre[k] = first ? v : v + hpj[(size_t)b * g4 + k];
        }
        for (int j = 0; j < H; j++) cr[j] = first ? 0.0f : c[(size_t)b * hp + j];
        rnnt_cpu_lstm_pointwise(act, 1, H, pre, 4 * H, hr, H, cr, H);
        for (int j = 0; j < H; j++) {
            float want_h = rnd_dt(hr[j], dt), got_h = y[(size_t)b * hp + j], got_c = cg[(size_t)b * hp + j];
            int nan_ok = isnan(want_h) && isnan(got_h) && isnan(hs[(size_t)b * hp + j]) && isnan(cr[j]) == isnan(got_c);
            if (nan_ok) continue;
            float tol_h = dt == CU_F16 ? 1e-3f : 2e-6f;
            if (!(fabsf(got_h - want_h) <= tol_h) || !(fabsf(got_c - cr[j]) <= 2e-6f * (1 + fabsf(cr[j]))) ||
                memcmp(&hs[(size_t)b * hp + j], &y[(size_t)b * hp + j], 4))
                fail_msg("pointwise %s %s B=%d H=%d t=%d row %d unit %d: h %g (want %g), c %g (want %g)", dt_name(dt),
                         act == RNNT_ACT_HARD ? "hard" : "soft", B, H, t, b, j, got_h, want_h, got_c, cr[j]);
        }
        if (inject_nan && b == B - 1 && !isnan(y[(size_t)b * hp + 1])) fail_msg("pointwise: NaN did not propagate");
    }
    CK(cudaFree(dx));
    CK(cudaFree(dh));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    CK(cudaFree(dlen));
    CK(cudaFree(dy));
    CK(cudaFree(dhs));
    free(x);
    free(hpj);
    free(bias);
    free(c);
    free(len);
    free(y);
    free(hs);
    free(cg);
    free(pre);
    free(hr);
    free(cr);
}

static void test_pointwise(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 2;
    static const int Bs[] = {1, 3, 17}, Hs[] = {20, 63, 100};
    int n = 0;
    for (int dti = 0; dti < 2; dti++)
        for (int a = 0; a < 2; a++)
            for (int bi = 0; bi < 3; bi++)
                for (int hi = 0; hi < 3; hi++)
                    for (int first = 0; first < 2; first++) {
                        if (g_quick && (bi != 2 || hi != 1)) continue;
                        check_pointwise((cu_dtype)dti, (rnnt_lstm_act)a, Bs[bi], Hs[hi], first, 0, &seed);
                        n++;
                    }
    check_pointwise(CU_F32, RNNT_ACT_HARD, 3, 20, 1, 1, &seed);
    check_pointwise(CU_F16, RNNT_ACT_HARD, 3, 20, 1, 1, &seed);
    printf("lstm pointwise: %d cases match the CPU twin (masking, pads, NaN propagation included)\n", n);
}

/* ------------------------------------------------------------------ LayerNorm */

static void check_layer_norm(cu_dtype dt, int B, int T, int R, int ld, uint64_t *seed)
{
    size_t n = (size_t)B * T * ld;
    float *y = host_rand(n, 3.0f, seed), *w = host_rand((size_t)R, 1.5f, seed), *bias = host_rand((size_t)R, 0.5f, seed);
    for (int j = 0; j < R; j++) y[j] += 5.0f; /* one row far from zero mean */
    int *len = (int *)malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) len[b] = b == 0 ? T : (int)(tu_rand_next(seed) % (T + 1));
    void *dy = dev_put(y, n, dt); /* rounds y to dt in place: the twin sees what the kernel sees */
    float *dw = (float *)dev_put(w, (size_t)R, CU_F32), *db = (float *)dev_put(bias, (size_t)R, CU_F32);
    int *dlen;
    CK(cudaMalloc(&dlen, (size_t)B * sizeof(int)));
    CK(cudaMemcpy(dlen, len, (size_t)B * sizeof(int), cudaMemcpyHostToDevice));
    RK(cu_layer_norm_rows(0, dt, B, T, R, ld, dy, (size_t)T * ld, dlen, dw, db, err, errlen));
    CK(cudaDeviceSynchronize());
    float *got = (float *)malloc(n * sizeof(float)), *want = (float *)malloc((size_t)R * sizeof(float));
    dev_get(got, dy, n, dt);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *in = y + ((size_t)b * T + t) * ld, *out = got + ((size_t)b * T + t) * ld;
            if (t >= len[b]) {
                for (int j = 0; j < ld; j++)
                    if (out[j] != 0.0f) fail_msg("layer_norm: row (%d, %d) past its length, column %d is %g, not 0", b, t, j, out[j]);
                continue;
            }
            rnnt_cpu_layer_norm(1, R, in, ld, w, bias, want, R);
            for (int j = 0; j < R; j++) {
                float wv = rnd_dt(want[j], dt), tol = (dt == CU_F16 ? 4e-3f : 2e-5f) * (1 + fabsf(wv));
                if (!(fabsf(out[j] - wv) <= tol))
                    fail_msg("layer_norm %s B=%d T=%d R=%d row (%d, %d) col %d: %g, want %g", dt_name(dt), B, T, R, b, t, j, out[j], wv);
                if (fabs(out[j] - wv) > worst) worst = fabs(out[j] - wv);
            }
            for (int j = R; j < ld; j++)
                if (memcmp(&out[j], &in[j], 4)) fail_msg("layer_norm: pad column %d of row (%d, %d) changed", j, b, t);
        }
    (void)worst;
    CK(cudaFree(dy));
    CK(cudaFree(dw));
    CK(cudaFree(db));
    CK(cudaFree(dlen));
    free(y);
    free(w);
    free(bias);
    free(len);
    free(got);
    free(want);
}

static void test_layer_norm(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 3;
    static const int Bs[] = {1, 3, 17}, Ts[] = {1, 7, 13}, Rs[] = {7, 32, 130};
    int n = 0;
    for (int dti = 0; dti < 2; dti++)
        for (int bi = 0; bi < 3; bi++)
            for (int ti = 0; ti < 3; ti++)
                for (int ri = 0; ri < 3; ri++) {
                    if (g_quick && (bi != 1 || ti != 1)) continue;
                    int R = Rs[ri], ld = (int)cu_round_up(R, CU_PAD) + (ri == 1 ? CU_PAD : 0);
                    check_layer_norm((cu_dtype)dti, Bs[bi], Ts[ti], R, ld, &seed);
                    n++;
                }
    printf("layer norm: %d cases match the CPU twin (rows past their length zeroed, pad columns kept)\n", n);
}

/* ------------------------------------------------------------------ decoding rule */

/* The rule of FORMAT.md stage 6 (and the CPU backend's counters) on the host, one step for every slot. */
struct host_slot {
    int t, labels, T, n_tok, e, status, steps, skipped, done;
    std::vector<int> tok, frm;
};

static void test_dec_rule(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 6;
    const int nb = 37, V = 5, n_big = 2, blank = V + n_big, max_sym = 3, cap = 40 * max_sym;
    cu_dec_rule rule;
    memset(&rule, 0, sizeof rule);
    rule.V = V;
    rule.blank = blank;
    rule.n_big = n_big;
    rule.max_symbols = max_sym;
    rule.max_iters = 100000;
    rule.durations[0] = 2;
    rule.durations[1] = 3;
    int *ip;
    CK(cudaMalloc(&ip, (11 * nb + 8 + 2 * (size_t)nb * cap) * sizeof(int)));
    cu_dec_state st;
    int **f[] = {&st.t, &st.labels, &st.t_enc, &st.n_tok, &st.e, &st.status, &st.steps, &st.skipped, &st.done, &st.k, &st.emit};
    for (int i = 0; i < 11; i++) *f[i] = ip + (size_t)i * nb;
    st.counts = ip + 11 * nb;
    st.p = st.probs = NULL; /* the rule alone: no probabilities */
    st.tokens = st.counts + 8;
    st.frames = st.tokens + (size_t)nb * cap;
    st.cap = cap;
    std::vector<int> T(nb), hk(nb);
    std::vector<host_slot> hs(nb);
    for (int b = 0; b < nb; b++) {
        T[b] = b == 0 ? 0 : (int)(tu_rand_next(&seed) % 40);
        hs[b] = host_slot{0, 0, T[b], 0, 1, 0, 0, 0, T[b] <= 0, {}, {}};
    }
    int *dT;
    CK(cudaMalloc(&dT, nb * sizeof(int)));
    CK(cudaMemcpy(dT, T.data(), nb * sizeof(int), cudaMemcpyHostToDevice));
    RK(cu_dec_init(0, nb, dT, V, st, err, errlen));
    int iters = 0, active = 1;
    std::vector<int> got(11 * nb + 8);
    while (active && iters < 2000) {
        for (int b = 0; b < nb; b++) {
            uint64_t r = tu_rand_next(&seed) % 1000;
            hk[b] = r < 5 ? -1 : (int)(r % (uint64_t)(blank + 1)); /* labels, big blanks, blank; rarely non-finite */
        }
        CK(cudaMemcpy(st.k, hk.data(), nb * sizeof(int), cudaMemcpyHostToDevice));
        RK(cu_dec_update(0, nb, rule, st, 0, 0, NULL, err, errlen));
        iters++;
        std::vector<int> emit;
        active = 0;
        for (int b = 0; b < nb; b++) {
            host_slot &h = hs[b];
            if (h.done) continue;
            h.steps++;
            int k = hk[b], emits = 0;
            if (k < 0) {
                h.status = 1;
                h.t = h.T;
            } else if (k < V) {
                h.tok.push_back(k);
                h.frm.push_back(h.t);
                h.n_tok++;
                h.e++;
                emits = 1;
                if (++h.labels == max_sym) {
                    h.t++;
                    h.labels = 0;
                }
            } else {
                int d = rnnt_mb_advance(k, V, blank, rule.durations);
                h.skipped += d - 1 - rnnt_mb_past_end(h.t + d, h.T);
                h.t += d;
                h.labels = 0;
            }
            if (h.t >= h.T) h.done = 1;
            if (!h.done) {
                active++;
                if (emits) emit.push_back(b);
            }
        }
        CK(cudaMemcpy(got.data(), ip, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
        for (int b = 0; b < nb; b++) {
            const host_slot &h = hs[b];
            int want[9] = {h.t, h.labels, h.T, h.n_tok, h.e, h.status, h.steps, h.skipped, h.done};
            for (int q = 0; q < 9; q++)
                if (got[(size_t)q * nb + b] != want[q])
                    fail_msg("decode rule, step %d slot %d: field %d is %d, want %d", iters, b, q, got[(size_t)q * nb + b], want[q]);
        }
        const int *counts = got.data() + 11 * nb;
        if (counts[0] != (int)emit.size() || counts[1] != active || counts[2] != iters)
            fail_msg("decode rule, step %d: counts %d %d %d, want %d %d %d", iters, counts[0], counts[1], counts[2], (int)emit.size(),
                     active, iters);
        for (size_t i = 0; i < emit.size(); i++)
            if (got[(size_t)10 * nb + i] != emit[i]) fail_msg("decode rule, step %d: emitter %zu is %d, want %d", iters, i, got[(size_t)10 * nb + i], emit[i]);
    }
    assert_int_equal(active, 0);
    int *dout;
    size_t out_ints = (size_t)nb * CU_DEC_OUT_INTS(cap);
    CK(cudaMalloc(&dout, out_ints * sizeof(int)));
    RK(cu_dec_pack(0, nb, st, dout, err, errlen));
    std::vector<int> out(out_ints);
    CK(cudaMemcpy(out.data(), dout, out_ints * sizeof(int), cudaMemcpyDeviceToHost));
    int labels = 0;
    for (int b = 0; b < nb; b++) {
        const int *o = out.data() + (size_t)b * CU_DEC_OUT_INTS(cap);
        const host_slot &h = hs[b];
        if (o[0] != h.n_tok || o[1] != h.steps || o[2] != h.skipped || o[3] != h.status)
            fail_msg("pack slot %d: %d %d %d %d, want %d %d %d %d", b, o[0], o[1], o[2], o[3], h.n_tok, h.steps, h.skipped, h.status);
        for (int i = 0; i < h.n_tok; i++)
            if (o[8 + i] != h.tok[i] || o[8 + h.n_tok + i] != h.frm[i]) fail_msg("pack slot %d token %d differs", b, i);
        labels += h.n_tok;
    }
    printf("decode rule: %d slots over %d steps (%d labels) match the host rule step by step; pack matches\n", nb, iters, labels);
    CK(cudaFree(ip));
    CK(cudaFree(dT));
    CK(cudaFree(dout));
}

/* ------------------------------------------------------------------ fused recurrent step */

/* One recurrent step's inputs at random, on the host and (rounded to dt) on the device: W_hh [4H][hp] and
 * h [B][hp] with zero pad columns, x [B][g4], bias, c [B][hp]; len[b] = first_len for row 0 when
 * first_len > 0, else random in [0, len_mod). Shared by the fused-step and the mma-step checks. */
typedef struct {
    int B, H, hp, g4;
    float *w, *x, *h, *bias, *c;
    int *len;
    void *dw, *dx, *dh;
    float *db, *dc;
    int *dlen;
} step_case;

static void step_case_make(step_case *sc, cu_dtype dt, int B, int H, int len_mod, int first_len, uint64_t *seed)
{
    int hp = (int)cu_round_up(H, CU_PAD), g4 = (int)cu_round_up(4 * H, CU_PAD);
    sc->B = B, sc->H = H, sc->hp = hp, sc->g4 = g4;
    sc->w = host_rand((size_t)4 * H * hp, 1.0f / sqrtf((float)H), seed);
    sc->x = host_rand((size_t)B * g4, 3.0f, seed);
    sc->h = host_rand((size_t)B * hp, 1.0f, seed);
    sc->bias = host_rand((size_t)4 * H, 0.5f, seed);
    sc->c = host_rand((size_t)B * hp, 2.0f, seed);
    for (int r = 0; r < 4 * H; r++)
        for (int k = H; k < hp; k++) sc->w[(size_t)r * hp + k] = 0.0f;
    for (int b = 0; b < B; b++)
        for (int k = H; k < hp; k++) sc->h[(size_t)b * hp + k] = 0.0f;
    sc->len = (int *)malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) sc->len[b] = b == 0 && first_len > 0 ? first_len : (int)(tu_rand_next(seed) % len_mod);
    sc->dw = dev_put(sc->w, (size_t)4 * H * hp, dt);
    sc->dx = dev_put(sc->x, (size_t)B * g4, dt);
    sc->dh = dev_put(sc->h, (size_t)B * hp, dt);
    sc->db = (float *)dev_put(sc->bias, (size_t)4 * H, CU_F32);
    sc->dc = (float *)dev_put(sc->c, (size_t)B * hp, CU_F32);
    CK(cudaMalloc(&sc->dlen, (size_t)B * sizeof(int)));
    CK(cudaMemcpy(sc->dlen, sc->len, (size_t)B * sizeof(int), cudaMemcpyHostToDevice));
}

static void step_case_free(step_case *sc)
{
    CK(cudaFree(sc->dw));
    CK(cudaFree(sc->dx));
    CK(cudaFree(sc->dh));
    CK(cudaFree(sc->db));
    CK(cudaFree(sc->dc));
    CK(cudaFree(sc->dlen));
    free(sc->w);
    free(sc->x);
    free(sc->h);
    free(sc->bias);
    free(sc->c);
    free(sc->len);
}

/* The CPU twin of step t for row b: pre = (x + bias) + W h (a double sum of the same rounded values; no
 * W h at t = 0), then rnnt_cpu_lstm_pointwise from c (0 at t = 0): hr, cr [H]; pre [4H] scratch. */
static void step_case_ref(const step_case *sc, rnnt_lstm_act act, int t, int b, float *pre, float *hr, float *cr)
{
    int H = sc->H, hp = sc->hp;
    for (int r = 0; r < 4 * H; r++) {
        double sum = 0;
        if (t > 0)
            for (int k = 0; k < H; k++) sum += (double)sc->w[(size_t)r * hp + k] * sc->h[(size_t)b * hp + k];
        pre[r] = (sc->x[(size_t)b * sc->g4 + r] + sc->bias[r]) + (float)sum;
    }
    for (int j = 0; j < H; j++) cr[j] = t > 0 ? sc->c[(size_t)b * hp + j] : 0.0f;
    rnnt_cpu_lstm_pointwise(act, 1, H, pre, 4 * H, hr, H, cr, H);
}

static void check_fused(cu_dtype dt, rnnt_lstm_act act, int B, int H, int t, uint64_t *seed)
{
    step_case sc;
    step_case_make(&sc, dt, B, H, 4, 0, seed);
    int hp = sc.hp, bt = cu_step_fused_rows(B);
    size_t hb = (size_t)B * hp * cu_dtype_size(dt);
    void *dy = dev_poison(hb), *dho = dev_poison(hb);
    RK(cu_lstm_step_fused(0, dt, act, bt, B, H, hp, sc.dw, sc.dh, dho, sc.dx, (size_t)sc.g4, sc.db, sc.dc, dy, (size_t)hp,
                          sc.dlen, t, err, errlen));
    CK(cudaDeviceSynchronize());
    float *y = (float *)malloc(hb * 4), *ho = (float *)malloc(hb * 4), *cg = (float *)malloc((size_t)B * hp * 4);
    dev_get(y, dy, (size_t)B * hp, dt);
    dev_get(ho, dho, (size_t)B * hp, dt);
    CK(cudaMemcpy(cg, sc.dc, (size_t)B * hp * 4, cudaMemcpyDeviceToHost));
    float *pre = (float *)malloc((size_t)4 * H * 4), *hr = (float *)malloc((size_t)H * 4), *cr = (float *)malloc((size_t)H * 4);
    for (int b = 0; b < B; b++) {
        for (int j = H; j < hp; j++)
            if (y[(size_t)b * hp + j] != 0.0f || (t < sc.len[b] && ho[(size_t)b * hp + j] != 0.0f))
                fail_msg("fused: pad column %d of row %d not zero", j, b);
        if (t >= sc.len[b]) {
            for (int j = 0; j < H; j++)
                if (y[(size_t)b * hp + j] != 0.0f || memcmp(&cg[(size_t)b * hp + j], &sc.c[(size_t)b * hp + j], 4))
                    fail_msg("fused: masked row %d written", b);
            continue;
        }
        step_case_ref(&sc, act, t, b, pre, hr, cr);
        for (int j = 0; j < H; j++) {
            float gh = y[(size_t)b * hp + j], gc = cg[(size_t)b * hp + j];
            if (!(fabsf(gh - rnd_dt(hr[j], dt)) <= (dt == CU_F16 ? 2e-3f : 2e-5f)) ||
                !(fabsf(gc - cr[j]) <= 2e-5f * (1 + fabsf(cr[j]))) || memcmp(&ho[(size_t)b * hp + j], &y[(size_t)b * hp + j], 4))
                fail_msg("fused %s %s B=%d H=%d t=%d row %d unit %d: h %g (want %g), c %g (want %g)", dt_name(dt),
                         act == RNNT_ACT_HARD ? "hard" : "soft", B, H, t, b, j, gh, hr[j], gc, cr[j]);
        }
    }
    step_case_free(&sc);
    CK(cudaFree(dy));
    CK(cudaFree(dho));
    free(y);
    free(ho);
    free(cg);
    free(pre);
    free(hr);
    free(cr);
}

static void test_fused(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 5;
    static const int Bs[] = {1, 3, 16, 17, 32}, Hs[] = {20, 63, 100, 1024};
    int n = 0;
    for (int dti = 0; dti < 2; dti++)
        for (int a = 0; a < 2; a++)
            for (int bi = 0; bi < 5; bi++)
                for (int hi = 0; hi < 4; hi++)
                    for (int t = 0; t < 2; t++) {
                        if (g_quick && (bi != 2 || hi != 1)) continue;
                        check_fused((cu_dtype)dti, (rnnt_lstm_act)a, Bs[bi], Hs[hi], t, &seed);
                        n++;
                    }
    printf("fused recurrent step: %d cases match the GEMM + CPU twin (masking, pads included)\n", n);
}

/* ------------------------------------------------------------------ recurrent GEMM + cell in one kernel */

/* cu_lstm_mma_step against the CPU twin (step_case_ref), for every tile shape; the three tiles must agree
 * bitwise, and row r run alone (nb = 1, pointers at row r) must give bitwise the row of the whole batch
 * (batch invariance). */
static int check_mma_step(rnnt_lstm_act act, int B, int H, int t, uint64_t *seed)
{
    step_case sc;
    step_case_make(&sc, CU_F16, B, H, t + 3, t + 1, seed);
    int hp = sc.hp, g4 = sc.g4;
    size_t hb = (size_t)B * hp * 2, cb = (size_t)B * hp * 4;
    void *dy = dev_poison(hb), *dho = dev_poison(hb);
    float *y = (float *)malloc(hb * 2), *ho = (float *)malloc(hb * 2), *cg = (float *)malloc(cb);
    float *y1 = (float *)malloc(hb * 2), *c1 = (float *)malloc(cb), *h1 = (float *)malloc(hb * 2);
    float *pre = (float *)malloc((size_t)4 * H * 4), *hr = (float *)malloc((size_t)H * 4), *cr = (float *)malloc((size_t)H * 4);
    const char *an = act == RNNT_ACT_HARD ? "hard" : "soft";
    int cases = 0;
    for (int tile = CU_MMA_TILE_8x64; tile <= CU_MMA_TILE_16x128; tile++) {
        CK(cudaMemcpy(sc.dc, sc.c, cb, cudaMemcpyHostToDevice));
        CK(cudaMemset(dy, 0xff, hb));
        CK(cudaMemset(dho, 0xff, hb));
        RK(cu_lstm_mma_step(0, act, (cu_mma_tile)tile, B, H, hp, (const __half *)sc.dw, (const __half *)sc.dh, (__half *)dho,
                            (const __half *)sc.dx, (size_t)g4, sc.db, sc.dc, (__half *)dy, (size_t)hp, sc.dlen, t, err, errlen));
        CK(cudaDeviceSynchronize());
        dev_get(y, dy, (size_t)B * hp, CU_F16);
        dev_get(ho, dho, (size_t)B * hp, CU_F16);
        CK(cudaMemcpy(cg, sc.dc, cb, cudaMemcpyDeviceToHost));
        cases++;
        if (tile != CU_MMA_TILE_8x64) { /* the others: bitwise the first tile's results */
            if (memcmp(y1, y, cb) || memcmp(c1, cg, cb) || memcmp(h1, ho, cb))
                fail_msg("mma step %s B=%d H=%d t=%d: tile %d differs from tile 1", an, B, H, t, tile);
            continue;
        }
        memcpy(y1, y, cb);
        memcpy(c1, cg, cb);
        memcpy(h1, ho, cb);
        for (int b = 0; b < B; b++) {
            for (int j = H; j < hp; j++)
                if (y[(size_t)b * hp + j] != 0.0f || (t < sc.len[b] && ho[(size_t)b * hp + j] != 0.0f))
                    fail_msg("mma step: pad column %d of row %d not zero", j, b);
            if (t >= sc.len[b]) {
                for (int j = 0; j < H; j++)
                    if (y[(size_t)b * hp + j] != 0.0f || memcmp(&cg[(size_t)b * hp + j], &sc.c[(size_t)b * hp + j], 4) ||
                        !isnan(ho[(size_t)b * hp + j]))
                        fail_msg("mma step: masked row %d written", b);
                continue;
            }
            step_case_ref(&sc, act, t, b, pre, hr, cr);
            for (int j = 0; j < H; j++) {
                float gh = y[(size_t)b * hp + j], gc = cg[(size_t)b * hp + j];
                if (!(fabsf(gh - rnd_dt(hr[j], CU_F16)) <= 2e-3f) || !(fabsf(gc - cr[j]) <= 2e-5f * (1 + fabsf(cr[j]))) ||
                    memcmp(&ho[(size_t)b * hp + j], &y[(size_t)b * hp + j], 4))
                    fail_msg("mma step %s tile %d B=%d H=%d t=%d row %d unit %d: h %g (want %g), c %g (want %g)", an, tile, B,
                             H, t, b, j, gh, hr[j], gc, cr[j]);
            }
        }
    }
    /* batch invariance: each of a few rows alone (nb = 1, every pointer at that row) */
    int rows[3] = {0, B / 2, B - 1};
    for (int i = 0; i < 3; i++) {
        int b = rows[i];
        CK(cudaMemcpy(sc.dc, sc.c, cb, cudaMemcpyHostToDevice));
        RK(cu_lstm_mma_step(0, act, CU_MMA_TILE_AUTO, 1, H, hp, (const __half *)sc.dw, (const __half *)sc.dh + (size_t)b * hp,
                            (__half *)dho + (size_t)b * hp, (const __half *)sc.dx + (size_t)b * g4, (size_t)g4, sc.db,
                            sc.dc + (size_t)b * hp, (__half *)dy + (size_t)b * hp, (size_t)hp, sc.dlen + b, t, err, errlen));
        CK(cudaDeviceSynchronize());
        dev_get(y, dy, (size_t)B * hp, CU_F16);
        CK(cudaMemcpy(cg, sc.dc, cb, cudaMemcpyDeviceToHost));
        if (memcmp(&y[(size_t)b * hp], &y1[(size_t)b * hp], (size_t)hp * 4) ||
            memcmp(&cg[(size_t)b * hp], &c1[(size_t)b * hp], (size_t)hp * 4))
            fail_msg("mma step %s B=%d H=%d t=%d: row %d alone differs from the batch", an, B, H, t, b);
    }
    step_case_free(&sc);
    CK(cudaFree(dy));
    CK(cudaFree(dho));
    free(y);
    free(ho);
    free(cg);
    free(y1);
    free(c1);
    free(h1);
    free(pre);
    free(hr);
    free(cr);
    return cases;
}

static void test_mma_step(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 6;
    static const int Bs[] = {1, 3, 17, 64, 130}, Hs[] = {20, 63, 100, 1024};
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int bi = 0; bi < 5; bi++)
            for (int hi = 0; hi < 4; hi++)
                for (int t = 1; t <= 2; t++) {
                    if (g_quick && (bi != 2 || hi != 2 || t != 1)) continue;
                    n += check_mma_step((rnnt_lstm_act)a, Bs[bi], Hs[hi], t, &seed);
                }
    printf("mma step (GEMM + cell): %d cases match the CPU twin; the three tiles bitwise equal; rows alone bitwise "
           "equal to the batch\n", n);
}

/* ------------------------------------------------------------------ encoder of a batch */

/* Encoder test models (C++ has no designated initializers before C++20: built field by field). */
static gm_cfg enc_model(int which)
{
    gm_cfg c;
    memset(&c, 0, sizeof c);
    c.E = 8;
    c.n_pred = 1;
    c.pred_h[0] = 9;
    c.V = 5;
    c.max_symbols = 3;
    if (which == 0) {
        c.name = "k-enc-hard";
        c.F = 7;
        c.k = 3;
        c.n_enc = 3;
        c.enc_h[0] = 33, c.enc_h[1] = 63, c.enc_h[2] = 17;
        c.enc_s[0] = 2, c.enc_s[1] = 3, c.enc_s[2] = 1;
        c.J = 29;
        c.n_big = 1;
        c.dur[0] = 2;
    } else if (which == 2) {
        /* equal sizes, so layers 0 + 1 run as one layer wavefront when asked (cu_wave.h), with a time
         * stack of 2 inside the pair; H = 100 is not a multiple of 64 */
        c.name = "k-enc-wave";
        c.F = 5;
        c.k = 2;
        c.n_enc = 3;
        c.enc_h[0] = 100, c.enc_h[1] = 100, c.enc_h[2] = 100;
        c.enc_s[0] = 2, c.enc_s[1] = 1, c.enc_s[2] = 1;
        c.J = 21;
        c.n_big = 1;
        c.dur[0] = 2;
    } else {
        c.name = "k-enc-soft";
        c.F = 6;
        c.k = 2;
        c.n_enc = 2;
        c.enc_h[0] = 100, c.enc_h[1] = 20;
        c.enc_s[0] = 2, c.enc_s[1] = 1;
        c.J = 18;
        c.soft = 1;
    }
    return c;
}

static void run_encoder(cu_encoder *e, const cu_weights *w, int n, float *const *feats, const int *frames, float **out_f,
                        float **out_fp)
{
    RK(cu_encoder_stage(e, n, (const float *const *)feats, frames, err, errlen));
    RK(cu_encoder_run(e, err, errlen));
    RK(cu_encoder_joint_proj(e, err, errlen));
    CK(cudaDeviceSynchronize());
    const cu_encoder_batch *bt = cu_encoder_get_batch(e);
    size_t nf = (size_t)bt->nb * bt->t_enc * w->hep, np = (size_t)bt->nb * bt->t_enc * w->jp;
    *out_f = (float *)malloc((nf + 1) * 4);
    *out_fp = (float *)malloc((np + 1) * 4);
    if (nf) dev_get(*out_f, bt->out, nf, w->dt);
    if (np) CK(cudaMemcpy(*out_fp, bt->fproj, np * 4, cudaMemcpyDeviceToHost));
}

static void test_encoder(void **state)
{
    (void)state;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    cublasHandle_t h;
    RK(cu_blas_create(s, ws, 32 << 20, &h, err, errlen));
    for (int mi = 0; mi < 3; mi++) {
        if (g_quick && mi == 1) continue;
        char *dir = tu_tmpdir();
        gm_cfg mc = enc_model(mi);
        gm_write_model(dir, &mc, g_seed + 10 + mi);
        rnnt_model *m;
        char err[512];
        if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
        uint64_t seed = g_seed + 20 + mi;
        const int B = 17, maxT = 97;
        float *feats[B];
        int frames[B];
        for (int b = 0; b < B; b++) {
            frames[b] = b == 0 ? 0 : b == 1 ? 1 : b == 2 ? maxT : (int)(tu_rand_next(&seed) % (maxT + 1));
            feats[b] = gm_features(frames[b], m->feature_dim, m->fe_mean, m->fe_std, &seed);
        }
        for (int dti = 0; dti < 2; dti++) {
            cu_dtype dt = (cu_dtype)dti;
            cu_weights w;
            RK(cu_weights_upload(m, dt, &w, err, errlen));
            /* (graphs, persistent recurrence, fused steps): per-step GEMMs launched directly and as graphs,
             * the persistent kernel asked for (fp16), the fused step kernel, the default choice (persistent
             * for fp16 runners of <= CU_PERSIST_AUTO_MAX_B, per-step GEMMs otherwise). The batch of 3 below
             * runs the persistent kernel with one n-tile, the batch of 17 with four: bitwise equal outputs
             * check that the n-tile count (and the rows past their length, skipped) do not touch the numerics. */
            /* the last: the default with layer pairs as one wavefront (cu_wave.h; fp16, equal sizes) */
            /* then the per-step layers on the GEMM + cell kernel (cu_mma_step.h; fp16), as graphs and directly */
            /* then the layers as a wavefront over streams (lstreams; fp16 and fp32): the rin mode (chunks of one r_in
             * call: 64 / 24 slots = 2 steps of the last layer, cuBLAS's own kernels) as graphs and directly, bitwise
             * equal to the per-step graph path (ci 1), whose kernels and GEMM shapes it runs; then 1-step chunks in a
             * ring of 1 and 5-step chunks in a ring of 3, the recurrent GEMMs chosen for 8 SMs, and the default
             * (16-step chunks, GEMMs for 66 SMs) */
            static const int cfgs[][7] = {{0, -1, 0, -1, -1, -1, 0}, {1, -1, 0, -1, -1, -1, 0}, {1, 1, 0, -1, 0, -1, 0},
                                          {1, 0, 1, -1, 0, -1, 0},   {1, 0, 0, -1, 0, 0, 0},    {1, 1, 0, 1, 0, -1, 0},
                                          {1, -1, 0, -1, 1, -1, 0},  {0, -1, 0, -1, 1, -1, 0},  {1, -1, 0, -1, -1, 1, -2},
                                          {0, -1, 0, -1, -1, 1, -2}, {1, -1, 0, -1, -1, 1, 1},  {1, -1, 0, -1, -1, 1, 5},
                                          {1, -1, 0, -1, -1, 1, -1}, {1, -1, 0, -1, -1, 1, 0}};
            float *f_step = NULL; /* the per-step graph path's output (ci 1) */
            for (int ci = 0; ci < 14; ci++) {
                int graphs = cfgs[ci][0], persist = cfgs[ci][1], fused = cfgs[ci][2], wave = cfgs[ci][3], mma = cfgs[ci][4];
                int lstreams = cfgs[ci][5], lchunk = cfgs[ci][6];
                if ((persist > 0 || wave > 0 || mma > 0) && dt != CU_F16) continue;
                if (g_quick && ci == 7) continue;
                if (g_quick && (ci == 0 || ci == 9)) continue;
                char env_chunk[8], env_ring[8];
                snprintf(env_chunk, sizeof env_chunk, "%d", lchunk);
                snprintf(env_ring, sizeof env_ring, "%d", lchunk == 1 ? 1 : 3);
                if (lchunk > 0) setenv("RNNT_CUDA_LSTREAM_CHUNK", env_chunk, 1), setenv("RNNT_CUDA_LSTREAM_RING", env_ring, 1);
                if (lchunk == -1) setenv("RNNT_CUDA_LSTREAM_SMS", "8", 1); /* recurrent GEMMs chosen for 8 SMs */
                if (lchunk == -2) setenv("RNNT_CUDA_LSTREAM_CHUNK", "rin", 1);
                cu_encoder_params p;
                memset(&p, 0, sizeof p);
                p.max_batch = B;
                p.max_frames = maxT;
                p.graphs = graphs;
                p.persist = persist;
                p.fused = fused;
                p.wave = wave;
                p.mma_step = mma;
                p.lstreams = lstreams;
                p.r_in = 64; /* several chunks even at these sizes */
                cu_encoder *e;
                RK(cu_encoder_create(&w, s, h, &p, &e, err, errlen));
                unsetenv("RNNT_CUDA_LSTREAM_CHUNK");
                unsetenv("RNNT_CUDA_LSTREAM_RING");
                unsetenv("RNNT_CUDA_LSTREAM_SMS");
                int want_ls = lstreams > 0 || (lstreams == 0 && !fused && persist <= 0 && mma <= 0 &&
                                               (persist < 0 || dt != CU_F16 || cu_round_up_i(B, 8) > CU_PERSIST_AUTO_MAX_B) &&
                                               cu_round_up_i(B, 8) >= CU_LSTREAMS_AUTO_MIN_B);
                if (want_ls != (cu_encoder_lstream_chunk(e) > 0))
                    fail_msg("encoder %s %s: layer streams %d, asked %d", mc.name, dt_name(dt), cu_encoder_lstream_chunk(e), lstreams);
                if (want_ls && cu_encoder_lstream_chunk(e) != (lchunk > 0 ? lchunk : lchunk == -2 || dt != CU_F16 ? 64 / 24 : CU_LSTREAM_CHUNK_DEFAULT))
                    fail_msg("encoder: layer-stream chunk %d", cu_encoder_lstream_chunk(e));
                float *f, *fp;
                run_encoder(e, &w, B, feats, frames, &f, &fp);
                const cu_encoder_batch *bt = cu_encoder_get_batch(e);
                if (lchunk == -2 && !cu_encoder_lstream_same_bits(e)) fail_msg("encoder: the rin mode runs other GEMMs");
                if (want_ls && dt != CU_F16 && !cu_encoder_lstream_same_bits(e) && lchunk == 0)
                    fail_msg("encoder: fp32 layer streams by default must run the per-step path's GEMMs");
                if (want_ls && f_step && cu_encoder_lstream_same_bits(e)) /* the H columns of every row of the bucket (pad columns are not outputs) */
                    for (size_t r = 0; r < (size_t)bt->nb * bt->t_enc; r++)
                        if (memcmp(f + r * w.hep, f_step + r * w.hep, (size_t)w.he * 4))
                            fail_msg("encoder %s %s: layer streams (chunk %d) not bitwise equal to the per-step path at row %zu",
                                     mc.name, dt_name(dt), cu_encoder_lstream_chunk(e), r);
                int t_enc_b = bt->t_enc, He = w.he, J = w.J;
                double worst = 0, worst_fp = 0;
                for (int b = 0; b < B; b++) {
                    int Te = rnnt_model_encoder_frames(m, frames[b]);
                    float *sc = (float *)malloc((rnnt_cpu_encoder_scratch(m, frames[b]) + 1) * 4);
                    float *ref = (float *)malloc(((size_t)Te * He + 1) * 4), *rfp = (float *)malloc(((size_t)Te * J + 1) * 4);
                    assert_int_equal(rnnt_cpu_encode(m, feats[b], frames[b], ref, sc, NULL), Te);
                    rnnt_cpu_joint_enc_proj(m, Te, ref, rfp);
                    float *got = (float *)malloc(((size_t)Te * He + 1) * 4), *gfp = (float *)malloc(((size_t)Te * J + 1) * 4);
                    for (int t = 0; t < Te; t++) {
                        for (int j = 0; j < He; j++) got[(size_t)t * He + j] = f[((size_t)b * t_enc_b + t) * w.hep + j];
                        for (int j = 0; j < J; j++)
                            gfp[(size_t)t * J + j] = fp[((size_t)b * t_enc_b + t) * w.jp + j] + m->joint_enc_b[j];
                    }
                    double e1 = tu_rel_err(got, ref, (size_t)Te * He), e2 = tu_rel_err(gfp, rfp, (size_t)Te * J);
                    double tol = dt == CU_F16 ? 3e-2 : 1e-4;
                    if (!(e1 <= tol) || !(e2 <= tol))
                        fail_msg("encoder %s %s graphs=%d persist=%d utt %d (%d frames): rel err %.3g, joint proj %.3g",
                                 mc.name, dt_name(dt), graphs, persist, b, frames[b], e1, e2);
                    if (e1 > worst) worst = e1;
                    if (e2 > worst_fp) worst_fp = e2;
                    free(sc);
                    free(ref);
                    free(rfp);
                    free(got);
                    free(gfp);
                }
                /* batch invariance at the encoder level: 3 utterances alone (another bucket) give bitwise
                 * the same outputs as inside the batch of 17 */
                float *f3, *fp3;
                float *sub[3] = {feats[4], feats[2], feats[9]};
                int sub_frames[3] = {frames[4], frames[2], frames[9]}, sub_idx[3] = {4, 2, 9};
                run_encoder(e, &w, 3, sub, sub_frames, &f3, &fp3);
                const cu_encoder_batch *b3 = cu_encoder_get_batch(e);
                for (int i = 0; i < 3; i++) {
                    int Te = rnnt_model_encoder_frames(m, sub_frames[i]);
                    for (int t = 0; t < Te; t++)
                        if (memcmp(&f3[((size_t)i * b3->t_enc + t) * w.hep], &f[((size_t)sub_idx[i] * t_enc_b + t) * w.hep],
                                   (size_t)He * 4) ||
                            memcmp(&fp3[((size_t)i * b3->t_enc + t) * w.jp], &fp[((size_t)sub_idx[i] * t_enc_b + t) * w.jp],
                                   (size_t)J * 4))
                            fail_msg("encoder %s %s persist=%d: utterance %d frame %d differs between a batch of 17 and of 3",
                                     mc.name, dt_name(dt), persist, sub_idx[i], t);
                }
                if (persist > 0 && cu_encoder_persistent_layers(e) == 0) fail_msg("encoder: no layer took the persistent path");
                if (persist == 0 && !fused &&
                    (dt == CU_F16 && cu_round_up_i(B, 8) <= CU_PERSIST_AUTO_MAX_B) != (cu_encoder_persistent_layers(e) > 0))
                    fail_msg("encoder: default path %s: %d persistent layers", dt_name(dt), cu_encoder_persistent_layers(e));
                if (persist < 0 && cu_encoder_persistent_layers(e) != 0) fail_msg("encoder: persistent path taken when off");
                if (fused != cu_encoder_fused_steps(e)) fail_msg("encoder: fused steps %d, asked %d", cu_encoder_fused_steps(e), fused);
                if (wave > 0 && mi == 2 && cu_encoder_wave_pairs(e) != 1)
                    fail_msg("encoder: %d wavefront pairs, want 1", cu_encoder_wave_pairs(e));
                if (wave < 0 && cu_encoder_wave_pairs(e) != 0) fail_msg("encoder: wavefront taken when off");
                if (mma > 0 && !cu_encoder_mma_steps(e)) fail_msg("encoder: mma steps asked for, not taken");
                if (mma < 0 && cu_encoder_mma_steps(e)) fail_msg("encoder: mma steps taken when off");
                printf("encoder %s %s graphs=%d persist=%d fused=%d mma=%d wave pairs=%d persistent layers=%d lstream chunk=%d: 17 utterances within %.2g (joint proj %.2g) of the "
                       "CPU; bitwise batch-invariant%s; %.1f MiB of buffers\n",
                       mc.name, dt_name(dt), graphs, persist, fused, cu_encoder_mma_steps(e), cu_encoder_wave_pairs(e), cu_encoder_persistent_layers(e),
                       cu_encoder_lstream_chunk(e), worst, worst_fp, want_ls && f_step && cu_encoder_lstream_same_bits(e) ? "; bitwise equal to the per-step path" : "",
                       cu_encoder_device_bytes(e) / 1048576.0);
                if (ci == 1) f_step = f, f = NULL;
                free(f);
                free(fp);
                free(f3);
                free(fp3);
                cu_encoder_free(e);
            }
            free(f_step);
            cu_weights_free(&w);
        }
        for (int b = 0; b < B; b++) free(feats[b]);
        rnnt_model_free(m);
        tu_rmdir(dir);
    }
    cublasDestroy(h);
    CK(cudaFree(ws));
    CK(cudaStreamDestroy(s));
}

/* Every layer as one wavefront with W_hh on chip (cu_lstm_wave_chip, encoder param wave = 2) on the k-enc-wave
 * model (3 x 100, a time stack of 2 after layer 0): a runner of 3 rows, as a graph and launched directly; within
 * the fp16 tolerance of the CPU engine, and each utterance alone bitwise equal to its row in the batch of 3. */
static void test_encoder_chip(void **state)
{
    (void)state;
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    cublasHandle_t h;
    RK(cu_blas_create(s, ws, 32 << 20, &h, err, errlen));
    char *dir = tu_tmpdir();
    gm_cfg mc = enc_model(2);
    gm_write_model(dir, &mc, g_seed + 40);
    rnnt_model *m;
    char merr[512];
    if (rnnt_model_load(dir, &m, merr, sizeof merr)) fail_msg("%s", merr);
    uint64_t seed = g_seed + 41;
    const int B = 3, maxT = 97;
    float *feats[B];
    int frames[B] = {maxT, 0, 1 + (int)(tu_rand_next(&seed) % maxT)};
    for (int b = 0; b < B; b++) feats[b] = gm_features(frames[b], m->feature_dim, m->fe_mean, m->fe_std, &seed);
    if (!cu_wave_chip_fits(mc.n_enc, 100, B)) { /* a device without the room for it */
        printf("encoder on chip: does not fit this device, not run\n");
        for (int b = 0; b < B; b++) free(feats[b]);
        rnnt_model_free(m);
        tu_rmdir(dir);
        cublasDestroy(h);
        CK(cudaFree(ws));
        CK(cudaStreamDestroy(s));
        return;
    }
    cu_weights w;
    RK(cu_weights_upload(m, CU_F16, &w, err, errlen));
    for (int graphs = 1; graphs >= 0; graphs--) {
        cu_encoder_params p;
        memset(&p, 0, sizeof p);
        p.max_batch = B;
        p.max_frames = maxT;
        p.graphs = graphs;
        p.wave = 2;
        p.r_in = 64;
        cu_encoder *e;
        RK(cu_encoder_create(&w, s, h, &p, &e, err, errlen));
        if (!cu_encoder_wave_chip(e)) fail_msg("encoder: the on-chip wavefront was asked for and not taken");
        float *f, *fp;
        run_encoder(e, &w, B, feats, frames, &f, &fp);
        const cu_encoder_batch *bt = cu_encoder_get_batch(e);
        int t_enc_b = bt->t_enc, He = w.he, J = w.J;
        double worst = 0;
        for (int b = 0; b < B; b++) {
            int Te = rnnt_model_encoder_frames(m, frames[b]);
            float *sc = (float *)malloc((rnnt_cpu_encoder_scratch(m, frames[b]) + 1) * 4);
            float *ref = (float *)malloc(((size_t)Te * He + 1) * 4), *rfp = (float *)malloc(((size_t)Te * J + 1) * 4);
            assert_int_equal(rnnt_cpu_encode(m, feats[b], frames[b], ref, sc, NULL), Te);
            rnnt_cpu_joint_enc_proj(m, Te, ref, rfp);
            float *got = (float *)malloc(((size_t)Te * He + 1) * 4), *gfp = (float *)malloc(((size_t)Te * J + 1) * 4);
            for (int t = 0; t < Te; t++) {
                for (int j = 0; j < He; j++) got[(size_t)t * He + j] = f[((size_t)b * t_enc_b + t) * w.hep + j];
                for (int j = 0; j < J; j++) gfp[(size_t)t * J + j] = fp[((size_t)b * t_enc_b + t) * w.jp + j] + m->joint_enc_b[j];
            }
            double e1 = tu_rel_err(got, ref, (size_t)Te * He), e2 = tu_rel_err(gfp, rfp, (size_t)Te * J);
            if (!(e1 <= 3e-2) || !(e2 <= 3e-2))
                fail_msg("encoder on chip graphs=%d utt %d (%d frames): rel err %.3g, joint proj %.3g", graphs, b, frames[b], e1, e2);
            if (e1 > worst) worst = e1;
            free(sc), free(ref), free(rfp), free(got), free(gfp);
            if (Te == 0) continue; /* nothing to compare alone */
            /* alone: bitwise its row of the batch */
            float *f1, *fp1;
            run_encoder(e, &w, 1, &feats[b], &frames[b], &f1, &fp1);
            const cu_encoder_batch *b1 = cu_encoder_get_batch(e);
            for (int t = 0; t < Te; t++)
                if (memcmp(&f1[(size_t)t * w.hep], &f[((size_t)b * t_enc_b + t) * w.hep], (size_t)He * 4))
                    fail_msg("encoder on chip graphs=%d: utterance %d frame %d differs alone and in the batch of 3", graphs, b, t);
            (void)b1;
            free(f1), free(fp1);
        }
        printf("encoder %s on chip (wave = 2) graphs=%d: 3 utterances within %.2g of the CPU; each alone bitwise equal to "
               "its row in the batch\n", mc.name, graphs, worst);
        free(f), free(fp);
        cu_encoder_free(e);
    }
    cu_weights_free(&w);
    for (int b = 0; b < B; b++) free(feats[b]);
    rnnt_model_free(m);
    tu_rmdir(dir);
    cublasDestroy(h);
    CK(cudaFree(ws));
    CK(cudaStreamDestroy(s));
}

/* ------------------------------------------------------------------ joint + argmax */

static void check_joint(cu_dtype dt, rnnt_joint_act act, int M, int J, int n_out, int tie, uint64_t *seed)
{
    int jp = (int)cu_round_up(J, CU_PAD);
    float *W = host_rand((size_t)n_out * jp, 1.0f / sqrtf((float)J), seed), *bo = host_rand((size_t)n_out, 0.5f, seed);
    for (int o = 0; o < n_out; o++)
        for (int j = J; j < jp; j++) W[(size_t)o * jp + j] = 0;
    /* tie: outputs 3 and 5 identical and far ahead of the rest in every row: the lower index must win */
    float *fpv = host_rand((size_t)M * jp, 2.0f, seed), *gpv = host_rand((size_t)M * jp, 2.0f, seed);
    if (tie) {
        memcpy(&W[(size_t)5 * jp], &W[(size_t)3 * jp], (size_t)jp * 4);
        bo[3] = bo[5] = 40.0f;
    }
    if (M >= 3) fpv[(size_t)(M - 1) * jp + 1] = NAN; /* last row: not finite -> -1 */
    void *dW = dev_put(W, (size_t)n_out * jp, dt);
    float *dbo = (float *)dev_put(bo, (size_t)n_out, CU_F32), *dfp = (float *)dev_put(fpv, (size_t)M * jp, CU_F32);
    float *dgp = (float *)dev_put(gpv, (size_t)M * jp, CU_F32);
    int *tix = (int *)malloc((size_t)M * sizeof(int)), *dt_ix, *dk;
    for (int b = 0; b < M; b++) tix[b] = b;
    CK(cudaMalloc(&dt_ix, (size_t)M * sizeof(int)));
    CK(cudaMalloc(&dk, (size_t)M * sizeof(int)));
    CK(cudaMemset(dk, 0x7f, (size_t)M * sizeof(int)));
    float *dp;
    CK(cudaMalloc(&dp, (size_t)M * sizeof(float)));
    CK(cudaMemset(dp, 0xff, (size_t)M * sizeof(float))); /* NaN: every row must be written */
    CK(cudaMemcpy(dt_ix, tix, (size_t)M * sizeof(int), cudaMemcpyHostToDevice));
    RK(cu_joint_argmax(0, dt, act, M, J, n_out, dfp, jp, 0, NULL, dgp, jp, dW, jp, dbo, dt_ix, NULL, dk, dp, err, errlen));
    int *k = (int *)malloc((size_t)M * sizeof(int)), *want = (int *)malloc((size_t)M * sizeof(int));
    float *p = (float *)malloc((size_t)M * sizeof(float)), *wantp = (float *)malloc((size_t)M * sizeof(float));
    CK(cudaMemcpy(k, dk, (size_t)M * sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(p, dp, (size_t)M * sizeof(float), cudaMemcpyDeviceToHost));
    /* the CPU twin on compact rows (it reads J-wide rows of W) */
    float *Wc = (float *)malloc((size_t)n_out * J * 4);
    for (int o = 0; o < n_out; o++) memcpy(&Wc[(size_t)o * J], &W[(size_t)o * jp], (size_t)J * 4);
    struct rnnt_model jm;
    memset(&jm, 0, sizeof jm);
    jm.joint_dim = J;
    jm.joint_act = act;
    jm.joint_out_w = Wc;
    jm.joint_out_b = bo;
    jm.n_out = n_out;
    const float **fr = (const float **)malloc((size_t)M * sizeof(float *)), **gr = (const float **)malloc((size_t)M * sizeof(float *));
    for (int b = 0; b < M; b++) {
        fr[b] = fpv + (size_t)b * jp;
        gr[b] = gpv + (size_t)b * jp;
    }
    float *sc = (float *)malloc(((size_t)J + n_out) * 4);
    rnnt_cpu_joint_argmax_prob(&jm, M, fr, gr, want, wantp, sc);
    /* The label's probability (the confidence's input) against the CPU's: fp32 within 1e-4 (the logits
     * differ only by summation order, ~1e-6 relative); fp16 weights move the logits by ~1e-3, so fp16
     * is held to 2e-2. */
    double pworst = 0, plimit = dt == CU_F32 ? 1e-4 : 2e-2;
    for (int b = 0; b < M; b++) {
        if (k[b] < 0 || k[b] != want[b]) continue;
        double d = fabs((double)p[b] - (double)wantp[b]);
        if (!(d <= plimit)) fail_msg("joint %s M=%d J=%d n_out=%d row %d: probability %.7g, CPU %.7g", dt_name(dt), M, J, n_out, b,
                                     p[b], wantp[b]);
        if (d > pworst) pworst = d;
    }
    if (M == 256 && n_out == 1030) printf("joint %s J=%d: label probability within %.3g of the CPU's\n", dt_name(dt), J, pworst);
    int near = 0;
    for (int b = 0; b < M; b++) {
        if (k[b] == want[b]) continue;
        /* fp32 sums in another order: accept a different index only at a near-tie (checked in double) */
        double best = -INFINITY, second = -INFINITY;
        for (int o = 0; o < n_out; o++) {
            double z = bo[o];
            for (int j = 0; j < J; j++) {
                double v = (double)fpv[(size_t)b * jp + j] + gpv[(size_t)b * jp + j];
                v = act == RNNT_JOINT_RELU ? (v > 0 ? v : 0) : tanh(v);
                z += (double)Wc[(size_t)o * J + j] * v;
            }
            if (z > best) {
                second = best;
                best = z;
            } else if (z > second)
                second = z;
        }
        if (want[b] >= 0 && k[b] >= 0 && best - second < 1e-4 * (1 + fabs(best))) {
            near++;
            continue;
        }
        fail_msg("joint %s M=%d J=%d n_out=%d row %d: argmax %d, CPU %d (gap %.3g)", dt_name(dt), M, J, n_out, b, k[b], want[b],
                 best - second);
    }
    if (tie)
        for (int b = 0; b < M - (M >= 3); b++)
            if (k[b] != 3 || want[b] != 3) fail_msg("joint: tie row %d gave %d (CPU %d), want 3", b, k[b], want[b]);
    if (M >= 3 && k[M - 1] != -1) fail_msg("joint: non-finite row gave %d", k[M - 1]);
    if (near > M / 10 + 1) fail_msg("joint: %d near-tie disagreements in %d rows", near, M);
    CK(cudaFree(dW));
    CK(cudaFree(dbo));
    CK(cudaFree(dfp));
    CK(cudaFree(dgp));
    CK(cudaFree(dt_ix));
    CK(cudaFree(dk));
    CK(cudaFree(dp));
    free(p);
    free(wantp);
    free(W);
    free(bo);
    free(fpv);
    free(gpv);
    free(tix);
    free(k);
    free(want);
    free(Wc);
    free(fr);
    free(gr);
    free(sc);
}

static void test_joint(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 3;
    static const int Ms[] = {1, 3, 17, 256}, Js[] = {18, 64, 200}, Os[] = {7, 33, 1030};
    for (int dti = 0; dti < 2; dti++)
        for (int a = 0; a < 2; a++)
            for (int mi = 0; mi < 4; mi++)
                for (int ji = 0; ji < 3; ji++)
                    for (int oi = 0; oi < 3; oi++) {
                        if (g_quick && (mi != 2 || ji != 1)) continue;
                        check_joint((cu_dtype)dti, (rnnt_joint_act)a, Ms[mi], Js[ji], Os[oi], 0, &seed);
                        if (ji == 1) check_joint((cu_dtype)dti, (rnnt_joint_act)a, Ms[mi], Js[ji], Os[oi], 1, &seed);
                    }
    printf("joint argmax: %s cases match the CPU twin (ties to the lowest index, non-finite -> -1)\n", g_quick ? "12" : "144");
}

/* ------------------------------------------------------------------ predictor step */

static void check_pred(cu_dtype dt, rnnt_lstm_act act, int S, int I, int H, int from_emb, uint64_t *seed)
{
    int hp = (int)cu_round_up(H, CU_PAD), ip = (int)cu_round_up(I, CU_PAD), V = 11;
    float bound = 1.0f / sqrtf((float)H);
    float *wih = host_rand((size_t)4 * H * ip, bound, seed), *whh = host_rand((size_t)4 * H * hp, bound, seed);
    float *bias = host_rand((size_t)4 * H, bound, seed);
    size_t xrows = from_emb ? (size_t)(V + 1) : (size_t)2 * S;
    float *xs = host_rand(xrows * ip, 1.5f, seed);
    float *h = host_rand((size_t)2 * S * hp, 1.0f, seed), *c = host_rand((size_t)S * hp, 2.0f, seed);
    int *e = (int *)malloc((size_t)S * 4), *k = (int *)malloc((size_t)S * 4), *emit = (int *)malloc((size_t)S * 4), n = 0;
    for (int b = 0; b < S; b++) {
        e[b] = 1 + (int)(tu_rand_next(seed) % 5);
        k[b] = (int)(tu_rand_next(seed) % (V + 1));
        if (tu_rand_next(seed) % 3) emit[n++] = b;
    }
    void *dwih = dev_put(wih, (size_t)4 * H * ip, dt), *dwhh = dev_put(whh, (size_t)4 * H * hp, dt);
    float *dbias = (float *)dev_put(bias, (size_t)4 * H, CU_F32);
    void *dx = dev_put(xs, xrows * ip, dt), *dh = dev_put(h, (size_t)2 * S * hp, dt);
    float *dc = (float *)dev_put(c, (size_t)S * hp, CU_F32);
    int *de, *dk, *demit, *dcount;
    CK(cudaMalloc(&de, (size_t)S * 4));
    CK(cudaMalloc(&dk, (size_t)S * 4));
    CK(cudaMalloc(&demit, (size_t)S * 4));
    CK(cudaMalloc(&dcount, 4));
    CK(cudaMemcpy(de, e, (size_t)S * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dk, k, (size_t)S * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(demit, emit, (size_t)S * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dcount, &n, 4, cudaMemcpyHostToDevice));
    RK(cu_pred_layer(0, dt, act, S, demit, dcount, de, dk, from_emb ? dx : NULL, from_emb ? NULL : dx, (size_t)S * ip, ip, I,
                     dwih, ip, dwhh, hp, dbias, H, dh, (size_t)S * hp, hp, dc, hp, err, errlen));
    /* and the joint projection of the new h */
    int J = 13, jp = 16;
    float *wp = host_rand((size_t)J * hp, bound, seed), *jb = host_rand((size_t)J, 0.5f, seed);
    void *dwp = dev_put(wp, (size_t)J * hp, dt);
    float *djb = (float *)dev_put(jb, (size_t)J, CU_F32), *dgp = (float *)dev_poison((size_t)S * jp * 4);
    RK(cu_pred_proj(0, dt, S, demit, dcount, de, dh, (size_t)S * hp, hp, H, dwp, hp, djb, J, dgp, jp, err, errlen));
    CK(cudaDeviceSynchronize());
    float *hg = (float *)malloc((size_t)2 * S * hp * 4), *cg = (float *)malloc((size_t)S * hp * 4), *gp = (float *)malloc((size_t)S * jp * 4);
    dev_get(hg, dh, (size_t)2 * S * hp, dt);
    CK(cudaMemcpy(cg, dc, (size_t)S * hp * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gp, dgp, (size_t)S * jp * 4, cudaMemcpyDeviceToHost));
    {
        /* bitwise: every emitter alone (one launch per row, the kernels' one-row code) gives the bits of
         * the batched launch, which takes 2, 4 or 8 rows at a time */
        void *dh1 = dev_put(h, (size_t)2 * S * hp, dt);
        float *dc1 = (float *)dev_put(c, (size_t)S * hp, CU_F32), *dgp1 = (float *)dev_poison((size_t)S * jp * 4);
        int one = 1, *done1;
        CK(cudaMalloc(&done1, 4));
        CK(cudaMemcpy(done1, &one, 4, cudaMemcpyHostToDevice));
        for (int r = 0; r < n; r++) {
            RK(cu_pred_layer(0, dt, act, 1, demit + r, done1, de, dk, from_emb ? dx : NULL, from_emb ? NULL : dx, (size_t)S * ip,
                             ip, I, dwih, ip, dwhh, hp, dbias, H, dh1, (size_t)S * hp, hp, dc1, hp, err, errlen));
            RK(cu_pred_proj(0, dt, 1, demit + r, done1, de, dh1, (size_t)S * hp, hp, H, dwp, hp, djb, J, dgp1, jp, err, errlen));
        }
        size_t hb = (size_t)2 * S * hp * cu_dtype_size(dt);
        std::vector<char> a(hb), b1(hb);
        CK(cudaMemcpy(a.data(), dh, hb, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b1.data(), dh1, hb, cudaMemcpyDeviceToHost));
        if (memcmp(a.data(), b1.data(), hb)) fail_msg("pred %s S=%d H=%d: h of a batched launch differs from one row at a time", dt_name(dt), S, H);
        std::vector<float> c1((size_t)S * hp), g1((size_t)S * jp);
        CK(cudaMemcpy(c1.data(), dc1, (size_t)S * hp * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(g1.data(), dgp1, (size_t)S * jp * 4, cudaMemcpyDeviceToHost));
        if (memcmp(c1.data(), cg, (size_t)S * hp * 4)) fail_msg("pred S=%d: c of a batched launch differs from one row at a time", S);
        if (memcmp(g1.data(), gp, (size_t)S * jp * 4)) fail_msg("pred proj S=%d: batched launch differs from one row at a time", S);
        CK(cudaFree(dh1));
        CK(cudaFree(dc1));
        CK(cudaFree(dgp1));
        CK(cudaFree(done1));
    }
    /* CPU twin: rnnt_cpu_lstm_step on compact weights */
    float *Wi = (float *)malloc((size_t)4 * H * I * 4), *Wh = (float *)malloc((size_t)4 * H * H * 4);
    for (int r = 0; r < 4 * H; r++) {
        memcpy(&Wi[(size_t)r * I], &wih[(size_t)r * ip], (size_t)I * 4);
        memcpy(&Wh[(size_t)r * H], &whh[(size_t)r * hp], (size_t)H * 4);
    }
    rnnt_lstm_layer L;
    memset(&L, 0, sizeof L);
    L.input = I;
    L.hidden = H;
    L.time_stack = 1;
    L.w_ih = Wi;
    L.w_hh = Wh;
    L.bias = bias;
    float *sc = (float *)malloc(rnnt_cpu_lstm_step_scratch(&L, 1) * 4), *hr = (float *)malloc((size_t)H * 4),
          *cr = (float *)malloc((size_t)H * 4);
    char *is_emit = (char *)calloc((size_t)S, 1);
    for (int r = 0; r < n; r++) is_emit[emit[r]] = 1;
    for (int b = 0; b < S; b++) {
        int pin = (e[b] - 1) & 1, pout = e[b] & 1;
        if (!is_emit[b]) {
            if (memcmp(&cg[(size_t)b * hp], &c[(size_t)b * hp], (size_t)H * 4)) fail_msg("pred: c of a non-emitter changed");
            for (int q = 0; q < 2; q++)
                for (int j = 0; j < H; j++)
                    if (hg[((size_t)q * S + b) * hp + j] != h[((size_t)q * S + b) * hp + j]) fail_msg("pred: h of a non-emitter changed");
            for (int o = 0; o < J; o++)
                if (!isnan(gp[(size_t)b * jp + o])) fail_msg("pred proj wrote a non-emitter's row");
            continue;
        }
        const float *x = from_emb ? &xs[(size_t)k[b] * ip] : &xs[((size_t)pout * S + b) * ip];
        memcpy(hr, &h[((size_t)pin * S + b) * hp], (size_t)H * 4);
        memcpy(cr, &c[(size_t)b * hp], (size_t)H * 4);
        rnnt_cpu_lstm_step(&L, act, 1, x, I, hr, cr, sc);
        for (int j = 0; j < H; j++) {
            float gh = hg[((size_t)pout * S + b) * hp + j], gc = cg[(size_t)b * hp + j];
            if (!(fabsf(gh - rnd_dt(hr[j], dt)) <= (dt == CU_F16 ? 2e-3f : 1e-5f)) || !(fabsf(gc - cr[j]) <= 1e-5f * (1 + fabsf(cr[j]))))
                fail_msg("pred %s %s S=%d I=%d H=%d emb=%d slot %d unit %d: h %g (want %g) c %g (want %g)", dt_name(dt),
                         act == RNNT_ACT_HARD ? "hard" : "soft", S, I, H, from_emb, b, j, gh, hr[j], gc, cr[j]);
            if (hg[((size_t)pin * S + b) * hp + j] != h[((size_t)pin * S + b) * hp + j]) fail_msg("pred: old parity overwritten");
        }
        for (int o = 0; o < J; o++) {
            double z = jb[o];
            for (int j = 0; j < H; j++) z += (double)wp[(size_t)o * hp + j] * rnd_dt(hr[j], dt);
            if (!(fabs(gp[(size_t)b * jp + o] - z) <= (dt == CU_F16 ? 5e-3 : 1e-4) * (1 + fabs(z))))
                fail_msg("pred proj %s slot %d out %d: %g, want %g", dt_name(dt), b, o, gp[(size_t)b * jp + o], z);
        }
    }
    CK(cudaFree(dwih));
    CK(cudaFree(dwhh));
    CK(cudaFree(dbias));
    CK(cudaFree(dx));
    CK(cudaFree(dh));
    CK(cudaFree(dc));
    CK(cudaFree(de));
    CK(cudaFree(dk));
    CK(cudaFree(demit));
    CK(cudaFree(dcount));
    CK(cudaFree(dwp));
    CK(cudaFree(djb));
    CK(cudaFree(dgp));
    free(wih);
    free(whh);
    free(bias);
    free(xs);
    free(h);
    free(c);
    free(e);
    free(k);
    free(emit);
    free(hg);
    free(cg);
    free(gp);
    free(Wi);
    free(Wh);
    free(sc);
    free(hr);
    free(cr);
    free(is_emit);
    free(wp);
    free(jb);
}

static void test_pred(void **state)
{
    (void)state;
    uint64_t seed = g_seed + 4;
    static const int Ss[] = {1, 3, 17, 70}, shapes[][2] = {{19, 23}, {32, 320}, {320, 65}};
    int n = 0;
    for (int dti = 0; dti < 2; dti++)
        for (int a = 0; a < 2; a++)
            for (int si = 0; si < 4; si++)
                for (int sh = 0; sh < 3; sh++)
                    for (int emb = 0; emb < 2; emb++) {
                        if (g_quick && (si != 2 || sh != 0)) continue;
                        check_pred((cu_dtype)dti, (rnnt_lstm_act)a, Ss[si], shapes[sh][0], shapes[sh][1], emb, &seed);
                        n++;
                    }
    printf("predictor step + projection: %d cases match the CPU twin; non-emitters untouched\n", n);
}

/* Host staging (cu_stage.h): segments of awkward sizes (0 bytes, odd bytes, larger than a chunk, a
 * chunk boundary inside a segment) copied by 0, 1 and 3 helper threads in chunks of 1000 bytes to
 * 64 KiB, sent chunk by chunk; the pinned buffer and the device copy must equal the concatenation
 * byte for byte (the device is poisoned first). Each stager serves several calls in a row, so a
 * stale completion mark from an earlier call would show up. */
static void test_stage(void **state)
{
    (void)state;
    uint64_t seed = g_seed ^ 0x5741u;
    static const int helpers[] = {0, 1, 3};
    static const size_t chunks[] = {1000, 4096, 65536};
    static const int ns[] = {1, 3, 17};
    const size_t cap = 3u << 20;
    char *pinned, *dev;
    CK(cudaHostAlloc((void **)&pinned, cap, cudaHostAllocDefault));
    CK(cudaMalloc((void **)&dev, cap));
    std::vector<char> back(cap), want(cap);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int cases = 0;
    for (int hi = 0; hi < 3; hi++)
        for (int ci = 0; ci < 3; ci++) {
            if (g_quick && ci != 0) continue;
            cu_stager *sg;
            RK(cu_stager_create(helpers[hi], chunks[ci], &sg, err, errlen));
            assert_int_equal(cu_stager_helpers(sg), helpers[hi]);
            for (int ni = 0; ni < 3; ni++)
                for (int rep = 0; rep < 2; rep++) {
                    int n = ns[ni];
                    std::vector<std::vector<char>> segs((size_t)n);
                    std::vector<const void *> src((size_t)n);
                    std::vector<size_t> bytes((size_t)n);
                    size_t total = 0;
                    for (int i = 0; i < n; i++) {
                        uint64_t r = tu_rand_next(&seed);
                        /* 0 bytes, a few, or up to ~150 KiB (odd counts too) */
                        size_t b = r % 5 == 0 ? 0 : r % 5 == 1 ? r % 7 : (size_t)(r >> 8) % 150001;
                        if (n == 1) b = (size_t)(r >> 8) % 2000001 + 1; /* one large segment */
                        if (total + b > cap) b = cap - total;
                        segs[i].resize(b ? b : 1);
                        for (size_t k = 0; k < b; k++) segs[i][k] = (char)(tu_rand_next(&seed) >> 24);
                        src[i] = b ? segs[i].data() : NULL;
                        bytes[i] = b;
                        memcpy(want.data() + total, segs[i].data(), b);
                        total += b;
                    }
                    memset(pinned, 0x5a, cap);
                    CK(cudaMemsetAsync(dev, 0xa5, cap, st));
                    RK(cu_stager_copy(sg, n, src.data(), bytes.data(), pinned, dev, st, err, errlen));
                    CK(cudaMemcpyAsync(back.data(), dev, cap, cudaMemcpyDeviceToHost, st));
                    CK(cudaStreamSynchronize(st));
                    if (memcmp(pinned, want.data(), total) != 0)
                        fail_msg("stage: pinned copy differs (helpers %d, chunk %zu, %d segments, %zu bytes)", helpers[hi],
                                 chunks[ci], n, total);
                    if (memcmp(back.data(), want.data(), total) != 0)
                        fail_msg("stage: device copy differs (helpers %d, chunk %zu, %d segments, %zu bytes)", helpers[hi],
                                 chunks[ci], n, total);
                    for (size_t k = total; k < cap; k += 4099)
                        if (back[k] != (char)0xa5 || pinned[k] != 0x5a)
                            fail_msg("stage: byte %zu past the %zu staged ones was written", k, total);
                    cases++;
                }
            cu_stager_free(sg);
        }
    CK(cudaStreamDestroy(st));
    CK(cudaFree(dev));
    CK(cudaFreeHost(pinned));
    printf("stage: %d cases (0/1/3 helpers, chunks of 1000 B to 64 KiB, 1-17 segments) byte-exact on host and device\n",
           cases);
}

int main(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    const char *q = getenv("RNNT_TEST_QUICK");
    g_quick = q && *q && strcmp(q, "0");
    const char *s = getenv("RNNT_TEST_SEED");
    g_seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm), cmocka_unit_test(test_pointwise), cmocka_unit_test(test_layer_norm), cmocka_unit_test(test_joint),
        cmocka_unit_test(test_pred), cmocka_unit_test(test_dec_rule), cmocka_unit_test(test_fused), cmocka_unit_test(test_mma_step),
        cmocka_unit_test(test_encoder), cmocka_unit_test(test_encoder_chip),
        cmocka_unit_test(test_stage),
    };
    /* RNNT_TEST_ONLY=pattern: only the tests whose names match (cmocka's globs), as test_cuda_engine */
    const char *only = getenv("RNNT_TEST_ONLY");
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
