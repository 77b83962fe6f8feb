/* lstm_wave.cu — kernel lab: a stack of fp16 LSTM layers (the encoder's recurrences with their input
 * projections, optional time stacking between layers), soft or hard activations, in these variants:
 *   1  layer by layer: cuBLAS input GEMM over all steps + the persistent recurrence (cu_persist.cu, AUTO
 *      sync) per layer: what the encoder runs for fp16 runners of max_batch <= 16 (<= 32 before layer streams)
 *   2  layer wavefront in groups of 2 layers (cu_wave.cu): the group's first layer's input GEMM by
 *      cuBLAS, the second layer's input projection inside the kernel in chunks of 16 steps
 *   3  as 2, chunks of 8 steps
 *   4  as 2, chunks of 32 steps
 *   5  every layer in ONE wave (where cu_wave_fits: small H only; 5 x 1024 does not fit)
 *   6  as 2, groups of 3 layers (where it fits)
 *   7  every layer in ONE wave with W_hh on chip (cu_lstm_wave_chip: layers 0-1 in registers, 2-4 in
 *      shared memory, one block per SM owning 8 units of every layer), chunks of 16, stagger 4
 *   8  as 7, chunks of 8, stagger 2
 *   9  as 7, chunks of 32, stagger 8
 *  10  as 7, chunks of 16, no stagger (every layer's chunk projection on the same wavefront step)
 *  11  as 7, every layer's h staged in shared memory by cp.async first where it fits (B = 1 at 5 x 1024);
 *      7-10 load h straight into fragments layer after layer (run 1: staging was slower)
 *  12-22: kernels/dev/chip_lab.cu, the lab copy of 7's kernel with session 6's options (22: none of them)
 *  12  as 7, the next step's schedule by an idle warp beside the cells (LAB_CHIP_EARLY_SCHED)
 *  13  as 7, each projection pass on its own step, right after its ring slots were read (LAB_CHIP_SPLIT_PROJ)
 *  14  as 7, every layer's h loads issued before the first product, into registers (LAB_CHIP_HOIST)
 *  15  as 7, each warp loads its K slice of every layer's h in one round into its own shared buffer, B = 1 only
 *      (LAB_CHIP_WSTAGE; elsewhere it runs as 7)
 *  16  12 + 13 + 14;  17  12 + 13 + 15;  18  as 17, chunks of 8
 *  19  as 17 with projection passes of 16 columns (LAB_CHIP_WIDE_PASS: each W_ih fragment serves two n-tiles,
 *      half the W_ih bytes from L2); 20  as 19, chunks of 8;  21  as 7 with 16-column passes alone
 *  22  the lab copy with no option (7's code + this session's restructuring: the same work)
 *  23  as 7 (the production kernel) with the lean projection (CU_WAVE_CHIP_LEAN: one m-tile a sweep, no W_hh
 *      fragment spilled; session 7);  24  as 23, chunks of 8, stagger 2
 *
 *   LAB_PROF=1 lab_lstm_wave V B [T]   (12 <= V <= 22) also runs V once with thread 0's clock at each phase of each
 *                                  wavefront step in every block, and prints where a step's time goes
 *
 *   lab_lstm_wave [variant]        check every variant (or one) against the CPU reference, then time
 *   lab_lstm_wave V B [T]          run variant V on the 5 x 1024 stack twice (for ncu), no check
 *   LAB_CHECK_ONLY=1 lab_lstm_wave  the checks alone (for compute-sanitizer)
 *
 * Check: fresh random inputs, awkward sizes (B = 1, 3, 17; odd T; H not a multiple of 64; a time stack
 * inside a wave group; rows shorter than T), max |gpu - cpu| over every output of the last layer and
 * every output poisoned first. Bench: 5 x 1024, input 240, T 300 (bench_encoder's shape), every row
 * full length, and the same with a time stack of 2 after layer 2 (MLPerf-like); median of 20. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cu_gemm.h"
#include "cu_kernels.h"
#include "cu_persist.h"
#include "cu_wave.h"

#include "chip_lab.h"
#include "lab_util.h"

static uint64_t rs = 7;
static float frand(void)
{
    return lab_frand(&rs);
}
static float h16(float x) { return __half2float(__float2half_rn(x)); }
static float sig_of(bool hard, float x) { return hard ? (x != x ? x : fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f)) : 1.0f / (1.0f + expf(-x)); }
static float tanh_of(bool hard, float x) { return hard ? (x != x ? x : fminf(fmaxf(x, -1.0f), 1.0f)) : tanhf(x); }

static const int R_IN = 1024; /* rows per input GEMM chunk (the encoder's r_in below max_batch 64) */

struct stack {
    int nl, B, in0, in0p, H, hp, g4, hard;
    std::vector<int> T, s, in_w;        /* per layer: steps, time stack after it, input width */
    std::vector<std::vector<int>> len;  /* per layer [B] */
    std::vector<float> x0;              /* [B][T0][in0p] */
    std::vector<std::vector<float>> wih, whh, bias;
    /* device */
    __half *dx0;
    std::vector<__half *> dwih, dwhh, dy;
    std::vector<float *> dbias;
    std::vector<int *> dlen;
    __half *dxproj;
    void *pscratch, *wscratch, *cscratch;
    size_t pscratch_bytes, wscratch_bytes, cscratch_bytes;
};

static __half *up16(const std::vector<float> &h, size_t extra_bytes = 16)
{
    std::vector<__half> t(h.size());
    for (size_t i = 0; i < h.size(); i++) t[i] = __float2half_rn(h[i]);
    __half *d;
    CK(cudaMalloc(&d, t.size() * 2 + extra_bytes));
    CK(cudaMemset(d, 0, t.size() * 2 + extra_bytes));
    CK(cudaMemcpy(d, t.data(), t.size() * 2, cudaMemcpyHostToDevice));
    return d;
}

/* stack_after[l]: time stack between layer l and l + 1; lens: 0 row 0 full, others random; 1 all full;
 * 2 all rows shorter than T */
static void make(stack *S, int nl, int in0, int H, int B, int T0, const int *stack_after, int lens, bool hard)
{
    S->nl = nl, S->B = B, S->in0 = in0, S->in0p = (in0 + 7) / 8 * 8, S->H = H, S->hp = (H + 7) / 8 * 8;
    S->g4 = (4 * H + 7) / 8 * 8, S->hard = hard;
    S->T.resize(nl), S->s.resize(nl), S->in_w.resize(nl), S->len.assign(nl, std::vector<int>(B));
    int T = T0;
    for (int l = 0; l < nl; l++) {
        S->T[l] = T;
        S->s[l] = stack_after ? stack_after[l] : 1;
        S->in_w[l] = l == 0 ? S->in0p : S->s[l - 1] * S->hp;
        T /= S->s[l];
    }
    for (int b = 0; b < B; b++) {
        frand();
        int L0 = lens == 1 ? T0 : lens == 2 ? 1 + (int)((rs >> 33) % (uint64_t)(T0 - 3)) : b == 0 ? T0 : (int)((rs >> 33) % (uint64_t)(T0 + 1));
        for (int l = 0; l < nl; l++) {
            S->len[l][b] = L0 < S->T[l] ? L0 : S->T[l];
            L0 = (L0 + S->s[l] - 1) / S->s[l];
        }
    }
    S->x0.assign((size_t)B * T0 * S->in0p, 0.0f);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T0; t++)
            for (int k = 0; k < in0; k++) S->x0[((size_t)b * T0 + t) * S->in0p + k] = h16(2.0f * frand());
    S->wih.resize(nl), S->whh.resize(nl), S->bias.resize(nl);
    for (int l = 0; l < nl; l++) {
        int kin = l == 0 ? in0 : S->s[l - 1] * H, in_w = S->in_w[l];
        float sc = 1.5f / sqrtf((float)kin), sh = 2.0f / sqrtf((float)H);
        S->wih[l].assign((size_t)4 * H * in_w, 0.0f);
        S->whh[l].assign((size_t)4 * H * S->hp, 0.0f);
        S->bias[l].resize(4 * H);
        for (int r = 0; r < 4 * H; r++) {
            for (int k = 0; k < in_w; k++) {
                bool pad = l > 0 && (k % S->hp) >= H;
                if (l == 0 && k >= in0) pad = true;
                if (!pad) S->wih[l][(size_t)r * in_w + k] = h16(sc * frand());
            }
            for (int k = 0; k < H; k++) S->whh[l][(size_t)r * S->hp + k] = h16(sh * frand());
            S->bias[l][r] = 0.3f * frand();
        }
    }
    size_t pad_rows = (size_t)R_IN;
    S->dx0 = up16(S->x0, pad_rows * S->in0p * 2);
    S->dwih.resize(nl), S->dwhh.resize(nl), S->dy.resize(nl), S->dbias.resize(nl), S->dlen.resize(nl);
    for (int l = 0; l < nl; l++) {
        S->dwih[l] = up16(S->wih[l]);
        S->dwhh[l] = up16(S->whh[l]);
        size_t yb = (size_t)B * S->T[l] * S->hp * 2 + pad_rows * 2 * S->hp * 2 * 2;
        CK(cudaMalloc(&S->dy[l], yb));
        CK(cudaMemset(S->dy[l], 0, yb));
        CK(cudaMalloc(&S->dbias[l], 4 * H * 4));
        CK(cudaMemcpy(S->dbias[l], S->bias[l].data(), 4 * H * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&S->dlen[l], B * 4));
        CK(cudaMemcpy(S->dlen[l], S->len[l].data(), B * 4, cudaMemcpyHostToDevice));
    }
    size_t xb = ((size_t)B * T0 + pad_rows) * S->g4 * 2;
    CK(cudaMalloc(&S->dxproj, xb));
    S->pscratch_bytes = cu_persist_scratch_bytes(CU_PERSIST_MAX_B, S->hp);
    CK(cudaMalloc(&S->pscratch, S->pscratch_bytes));
    CK(cudaMemset(S->pscratch, 0, S->pscratch_bytes));
    S->wscratch_bytes = cu_wave_scratch_bytes(CU_WAVE_MAX_LAYERS, 32, S->hp);
    CK(cudaMalloc(&S->wscratch, S->wscratch_bytes));
    CK(cudaMemset(S->wscratch, 0, S->wscratch_bytes));
    S->cscratch_bytes = cu_wave_chip_scratch_bytes(CU_WAVE_MAX_LAYERS, B < 8 ? B : 8, H, S->hp, 32);
    CK(cudaMalloc(&S->cscratch, S->cscratch_bytes));
    CK(cudaMemset(S->cscratch, 0, S->cscratch_bytes));
}

static void destroy(stack *S)
{
    cudaFree(S->dx0), cudaFree(S->dxproj), cudaFree(S->pscratch), cudaFree(S->wscratch), cudaFree(S->cscratch);
    for (int l = 0; l < S->nl; l++)
        cudaFree(S->dwih[l]), cudaFree(S->dwhh[l]), cudaFree(S->dy[l]), cudaFree(S->dbias[l]), cudaFree(S->dlen[l]);
}

/* CPU reference of the last layer's y [B][T_last][H]: the layer-by-layer path's roundings (input
 * projection rounded to fp16, h rounded to fp16 every step), sums in double. */
static std::vector<float> reference(const stack *S)
{
    int B = S->B, H = S->H;
    std::vector<float> in = S->x0, y;
    int in_w = S->in0p, Tin = S->T[0], sstep = 1, hin = S->in0p;
    for (int l = 0; l < S->nl; l++) {
        int T = S->T[l];
        y.assign((size_t)B * T * S->hp, 0.0f);
        std::vector<float> xp((size_t)4 * H), h(H), c(H), a(4 * H);
        for (int b = 0; b < B; b++) {
            std::fill(h.begin(), h.end(), 0.0f);
            std::fill(c.begin(), c.end(), 0.0f);
            for (int t = 0; t < T && t < S->len[l][b]; t++) {
                const float *row = &in[((size_t)b * Tin + (size_t)t * sstep) * hin]; /* the stacked row of step t */
                for (int r = 0; r < 4 * H; r++) {
                    double s = 0, sh = 0;
                    const float *wr = &S->wih[l][(size_t)r * in_w];
                    for (int k = 0; k < in_w; k++) s += (double)wr[k] * row[k];
                    const float *wh = &S->whh[l][(size_t)r * S->hp];
                    for (int k = 0; k < H; k++) sh += (double)wh[k] * h[k];
                    a[r] = (h16((float)s) + S->bias[l][r]) + (float)sh;
                }
                for (int j = 0; j < H; j++) {
                    float i = sig_of(S->hard, a[j]), f = sig_of(S->hard, a[H + j]), g = tanh_of(S->hard, a[2 * H + j]),
                          o = sig_of(S->hard, a[3 * H + j]);
                    c[j] = f * c[j] + i * g;
                    h[j] = h16(o * tanh_of(S->hard, c[j]));
                    y[((size_t)b * T + t) * S->hp + j] = h[j];
                }
            }
        }
        in = y;
        in_w = S->s[l] * S->hp, Tin = T, sstep = S->s[l], hin = S->hp;
    }
    return y;
}

static void input_gemm(cublasHandle_t blas, stack *S, int l)
{
    const __half *in = l == 0 ? S->dx0 : S->dy[l - 1];
    RK(cu_gemm_rows(blas, CU_F16, S->B * S->T[l], 4 * S->H, S->in_w[l], in, S->in_w[l], S->dwih[l], S->in_w[l],
                    S->dxproj, 0, S->g4, R_IN, err, errlen));
}

static void layer_persist(cudaStream_t s, stack *S, int l)
{
    RK(cu_lstm_persist(s, S->hard ? RNNT_ACT_HARD : RNNT_ACT_SOFT, S->B, S->T[l], S->H, S->hp, S->g4, S->dwhh[l],
                       S->dbias[l], S->dxproj, (size_t)S->T[l] * S->g4, S->dlen[l], S->dy[l], (size_t)S->T[l] * S->hp,
                       S->pscratch, S->pscratch_bytes, CU_PERSIST_SYNC_AUTO, err, errlen));
}

static void group_wave(cudaStream_t s, stack *S, int l0, int n, int chunk)
{
    cu_wave_layer L[CU_WAVE_MAX_LAYERS];
    for (int i = 0; i < n; i++) {
        int l = l0 + i;
        L[i].w_hh = S->dwhh[l], L[i].w_ih = i > 0 ? S->dwih[l] : NULL, L[i].bias = S->dbias[l];
        L[i].x = i == 0 ? S->dxproj : NULL, L[i].ldx_b = (size_t)S->T[l] * S->g4;
        L[i].len = S->dlen[l], L[i].y = S->dy[l], L[i].ldy_b = (size_t)S->T[l] * S->hp;
        L[i].T = S->T[l], L[i].H = S->H, L[i].hp = S->hp, L[i].g4 = S->g4, L[i].in_w = S->in_w[l];
        L[i].stack_in = l > 0 ? S->s[l - 1] : 1;
    }
    RK(cu_lstm_wave(s, S->hard ? RNNT_ACT_HARD : RNNT_ACT_SOFT, S->B, n, L, chunk, S->wscratch, S->wscratch_bytes, err,
                    errlen));
}

static unsigned *g_prof; /* LAB_PROF: the profile buffer of the next chip run */
static int g_prof_steps;
static void chip_wave(cudaStream_t s, stack *S, int chunk, int stagger, int stage, int opt, bool lab)
{
    cu_wave_layer L[CU_WAVE_MAX_LAYERS];
    for (int l = 0; l < S->nl; l++) {
        L[l].w_hh = S->dwhh[l], L[l].w_ih = l > 0 ? S->dwih[l] : NULL, L[l].bias = S->dbias[l];
        L[l].x = l == 0 ? S->dxproj : NULL, L[l].ldx_b = (size_t)S->T[l] * S->g4;
        L[l].len = S->dlen[l], L[l].y = S->dy[l], L[l].ldy_b = (size_t)S->T[l] * S->hp;
        L[l].T = S->T[l], L[l].H = S->H, L[l].hp = S->hp, L[l].g4 = S->g4, L[l].in_w = S->in_w[l];
        L[l].stack_in = l > 0 ? S->s[l - 1] : 1;
    }
    if (!lab) { /* the production kernel (cu_wave.cu) */
        RK(cu_lstm_wave_chip(s, S->hard ? RNNT_ACT_HARD : RNNT_ACT_SOFT, S->B, S->nl, L, chunk, stagger, stage, S->cscratch,
                             S->cscratch_bytes, err, errlen));
        return;
    }
    lab_chip_opts o;
    memset(&o, 0, sizeof o);
    o.chunk = chunk, o.stagger = stagger, o.stage = stage, o.opt = opt, o.prof = g_prof, o.prof_steps = g_prof_steps;
    RK(lab_wave_chip_ex(s, S->hard ? RNNT_ACT_HARD : RNNT_ACT_SOFT, S->B, S->nl, L, &o, S->cscratch, S->cscratch_bytes, err,
                        errlen));
}
static bool is_chip(int v) { return v >= 7; }
static int chip_chunk(int v) { return v == 8 || v == 18 || v == 20 || v == 24 ? 8 : v == 9 ? 32 : 16; }
static int chip_stagger(int v) { return v == 10 ? 0 : -1; }
static int chip_opt(int v)
{
    const int es = LAB_CHIP_EARLY_SCHED | LAB_CHIP_SPLIT_PROJ;
    return v == 12 ? LAB_CHIP_EARLY_SCHED : v == 13 ? LAB_CHIP_SPLIT_PROJ : v == 14 ? LAB_CHIP_HOIST
         : v == 15 ? LAB_CHIP_WSTAGE : v == 16 ? es | LAB_CHIP_HOIST : v == 17 || v == 18 ? es | LAB_CHIP_WSTAGE
         : v == 19 || v == 20 ? es | LAB_CHIP_WSTAGE | LAB_CHIP_WIDE_PASS : v == 21 ? LAB_CHIP_WIDE_PASS : 0;
}

static int group_of(int v) { return v == 5 ? 99 : v == 6 ? 3 : 2; }
static int chunk_of(int v) { return v == 3 ? 8 : v == 4 ? 32 : 16; }

static int applies(int v, const stack *S)
{
    if (v == 1) return cu_persist_fits(S->H, S->B, NULL);
    if (is_chip(v)) return cu_wave_chip_fits(S->nl, S->H, S->B);
    int g = group_of(v) < S->nl ? group_of(v) : S->nl;
    return S->B <= 32 && cu_wave_fits(g, S->H, S->B);
}

static void run(int v, cublasHandle_t blas, cudaStream_t s, stack *S)
{
    if (v == 1) {
        for (int l = 0; l < S->nl; l++) input_gemm(blas, S, l), layer_persist(s, S, l);
        return;
    }
    if (is_chip(v)) {
        input_gemm(blas, S, 0);
        chip_wave(s, S, chip_chunk(v), chip_stagger(v), v == 11 ? 1 : v >= 23 ? CU_WAVE_CHIP_LEAN : 0, chip_opt(v),
                  v >= 12 && v <= 22);
        return;
    }
    int g = group_of(v) < S->nl ? group_of(v) : S->nl;
    for (int l = 0; l < S->nl; l += g) {
        int n = S->nl - l < g ? S->nl - l : g;
        input_gemm(blas, S, l);
        if (n == 1) layer_persist(s, S, l);
        else group_wave(s, S, l, n, chunk_of(v));
    }
}

static float time_variant(int v, cublasHandle_t blas, cudaStream_t s, stack *S)
{
    cudaEvent_t a, e;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&e));
    for (int i = 0; i < 3; i++) run(v, blas, s, S);
    std::vector<float> ts;
    for (int i = 0; i < 20; i++) {
        CK(cudaEventRecord(a, s));
        run(v, blas, s, S);
        CK(cudaEventRecord(e, s));
        CK(cudaEventSynchronize(e));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, e));
        ts.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    cudaEventDestroy(a);
    cudaEventDestroy(e);
    return ts[10];
}

static const char *names[] = {"",
                              "layer by layer (GEMM + persistent)",
                              "wave pairs, chunk 16",
                              "wave pairs, chunk 8",
                              "wave pairs, chunk 32",
                              "one wave of every layer",
                              "wave triples, chunk 16",
                              "all layers, W_hh on chip, chunk 16",
                              "all layers, W_hh on chip, chunk 8",
                              "all layers, W_hh on chip, chunk 32",
                              "all layers, W_hh on chip, chunk 16, no stagger",
                              "all layers, W_hh on chip, chunk 16, h staged",
                              "chip C 16, early schedule",
                              "chip C 16, split projection passes",
                              "chip C 16, h loads hoisted (registers)",
                              "chip C 16, h per warp in one round (shared)",
                              "chip C 16, early + split + hoisted",
                              "chip C 16, early + split + per-warp h",
                              "chip C 8, early + split + per-warp h",
                              "chip C 16, early + split + per-warp h + 16-column passes",
                              "chip C 8, early + split + per-warp h + 16-column passes",
                              "chip C 16, 16-column passes",
                              "chip lab copy, no option",
                              "chip C 16, lean projection (production)",
                              "chip C 8, lean projection (production)"};
static const int NV = 24;
/* LAB_VARIANTS=1,7,8 runs only those (the checks and the bench) */
static bool wanted(int v)
{
    const char *e = getenv("LAB_VARIANTS");
    if (!e || !*e) return true;
    for (const char *p = e; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) break;
        if (x == v) return true;
        p = *end ? end + 1 : end;
    }
    return false;
}

/* LAB_PROF: run variant v once with the phase clocks on and print where a wavefront step's time goes: thread 0 of
 * each block stamps its SM clock at the step's top, after its own products (warp 0), after the block barrier that
 * follows every warp's products, at its arrival (after the cells and the next block barrier), after the projections
 * in the barrier's shadow, after its spin; and the global timer at arrival and after the spin. Means over blocks,
 * then over steps with and without projection passes. */
static void profile(int v, cublasHandle_t blas, cudaStream_t s, stack *S)
{
    const int nblk = (S->H + 7) / 8, steps = 1024, WD = LAB_CHIP_PROF_WORDS;
    size_t words = (size_t)nblk * steps * WD;
    CK(cudaMalloc(&g_prof, words * 4));
    CK(cudaMemset(g_prof, 0xff, words * 4));
    g_prof_steps = steps;
    cudaEvent_t a, e;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&e));
    CK(cudaEventRecord(a, s));
    run(v, blas, s, S);
    CK(cudaEventRecord(e, s));
    CK(cudaEventSynchronize(e));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, e));
    std::vector<unsigned> h(words);
    CK(cudaMemcpy(h.data(), g_prof, words * 4, cudaMemcpyDeviceToHost));
    cudaFree(g_prof);
    g_prof = NULL, g_prof_steps = 0;
    auto R = [&](int b, int st, int i) { return h[((size_t)b * steps + st) * WD + i]; };
    int W = 0;
    while (W < steps && R(0, W, 0) != 0xffffffffu) W++;
    if (W < 3) {
        printf("profile: only %d steps recorded\n", W);
        return;
    }
    /* clock rate from block 0: cycles and ns between the first and the last arrival */
    double ghz = (double)(unsigned)(R(0, W - 2, 9) - R(0, 0, 9)) / (double)(unsigned)(R(0, W - 2, 6) - R(0, 0, 6));
    enum { PROD, WAITP, CELL, FENCE, PROJ, SPIN, TAIL, TOT, SKEW, REL, RELMEAN, SPINMIN, NF };
    const char *fn[NF] = {"warp 0 products", "wait for the other warps' products", "cells + schedule + block barrier",
                          "arrival (red.release: its fence waits for the block's stores)", "projections (shadow)", "spin",
                          "after the spin to the next top", "step (top to top)",
                          "arrival skew (last - first, ns)", "release (first exit - last arrival, ns)",
                          "mean exit - last arrival (ns)", "min spin over blocks (cycles)"};
    double sum[2][NF] = {{0}}, cnt[2] = {0, 0};
    std::vector<double> tot;
    for (int st = 0; st + 1 < W - 1; st++) {
        double f[NF] = {0};
        long long amin = 1LL << 62, amax = -(1LL << 62), emin = 1LL << 62; /* ns after block 0's first arrival */
        double emean = 0, smin = 1e30;
        for (int b = 0; b < nblk; b++) {
            unsigned c0 = R(b, st, 0), c1 = R(b, st, 1), c2 = R(b, st, 2), c3 = R(b, st, 3), c4 = R(b, st, 4), c5 = R(b, st, 5);
            unsigned n0 = R(b, st + 1, 0), c9 = R(b, st, 9);
            f[PROD] += c1 - c0, f[WAITP] += c2 - c1, f[CELL] += c3 - c2, f[FENCE] += c9 - c3, f[PROJ] += c4 - c9;
            f[SPIN] += c5 - c4;
            f[TAIL] += n0 - c5, f[TOT] += n0 - c0;
            smin = fmin(smin, (double)(c5 - c4));
            long long ga = (int)(R(b, st, 6) - R(0, 0, 6)), ge = (int)(R(b, st, 7) - R(0, 0, 6));
            amin = std::min(amin, ga), amax = std::max(amax, ga), emin = std::min(emin, ge);
            emean += ge;
        }
        for (int i = 0; i <= TOT; i++) f[i] /= nblk;
        f[SKEW] = (double)(amax - amin), f[REL] = (double)(emin - amax), f[RELMEAN] = emean / nblk - (double)amax, f[SPINMIN] = smin;
        int k = R(0, st, 8) > 0;
        for (int i = 0; i < NF; i++) sum[k][i] += f[i];
        cnt[k]++;
        tot.push_back(f[TOT]);
    }
    std::sort(tot.begin(), tot.end());
    printf("\nprofile of variant %d (%s), B = %d: %d wavefront steps, %.3f ms with the clocks on, SM clock %.2f GHz; "
           "step top to top (cycles) p10 %.0f, p50 %.0f, p90 %.0f, max %.0f\n",
           v, names[v], S->B, W, ms, ghz, tot[tot.size() / 10], tot[tot.size() / 2], tot[tot.size() * 9 / 10], tot.back());
    printf("| phase (thread 0, mean over blocks) | steps without projection: cycles | us | steps with projection passes: cycles | us |\n|---|---|---|---|---|\n");
    for (int i = 0; i < NF; i++) {
        bool ns = i >= SKEW && i <= RELMEAN;
        double a0 = cnt[0] ? sum[0][i] / cnt[0] : 0, a1 = cnt[1] ? sum[1][i] / cnt[1] : 0;
        if (ns) printf("| %s | - | %.2f | - | %.2f |\n", fn[i], a0 / 1000, a1 / 1000);
        else printf("| %s | %.0f | %.2f | %.0f | %.2f |\n", fn[i], a0, a0 / ghz / 1000, a1, a1 / ghz / 1000);
    }
    printf("(%.0f steps without, %.0f with projection passes)\n", cnt[0], cnt[1]);
    cudaEventDestroy(a);
    cudaEventDestroy(e);
}

int main(int argc, char **argv)
{
    int only = argc > 1 ? atoi(argv[1]) : 0, count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || !count) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    cublasHandle_t blas;
    RK(cu_blas_create(s, ws, 32 << 20, &blas, err, errlen));
    if (argc >= 3) {
        stack S;
        make(&S, 5, 240, 1024, atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 300, NULL, 1, false);
        for (int i = 0; i < 2; i++) run(only, blas, s, &S);
        CK(cudaStreamSynchronize(s));
        CK(cudaGetLastError());
        printf("ran variant %d (%s) B=%d twice\n", only, names[only], S.B);
        if (getenv("LAB_PROF") && only >= 12 && only <= 22) profile(only, blas, s, &S);
        return 0;
    }

    struct ck {
        int nl, in0, H, B, T, lens, hard;
        int st[5];
    };
    static const ck checks[] = {
        {5, 240, 1024, 1, 24, 0, 0, {1, 1, 1, 1, 1}},  /* bench shape, short */
        {4, 80, 1024, 3, 24, 0, 1, {2, 1, 1, 1, 1}},   /* a time stack inside the first pair, hard */
        {3, 64, 100, 17, 25, 0, 0, {1, 1, 1, 1, 1}},   /* odd T, H not a multiple of 64, B = 17 */
        {2, 40, 1023, 5, 23, 2, 1, {1, 1, 1, 1, 1}},   /* odd H, every row short */
        {5, 48, 320, 9, 20, 0, 0, {1, 2, 1, 1, 1}},    /* MLPerf-like stack after layer 1 */
        {3, 24, 63, 32, 18, 1, 1, {2, 1, 1, 1, 1}},    /* B = 32 (four n-tiles), stack */
        {2, 16, 17, 1, 9, 0, 0, {1, 1, 1, 1, 1}},      /* tiny */
        {5, 240, 1000, 3, 31, 0, 0, {1, 2, 1, 1, 1}},  /* MLPerf-like stack, H not a multiple of 64, odd T, B = 3 */
        {3, 40, 100, 2, 25, 2, 1, {1, 1, 1, 1, 1}},    /* every row short, hard */
        {5, 24, 63, 1, 33, 0, 1, {2, 1, 2, 1, 1}},     /* two stacks, H = 63, odd T */
        {4, 64, 1024, 4, 20, 0, 0, {1, 1, 1, 1, 1}},   /* B = 4, 4 layers (2 in shared memory): 16 cells */
    };
    int fails = 0;
    for (const ck &k : checks) {
        stack S;
        make(&S, k.nl, k.in0, k.H, k.B, k.T, k.st, k.lens, k.hard);
        std::vector<float> ref = reference(&S);
        int last = S.nl - 1, Tl = S.T[last];
        std::vector<__half> first;
        for (int v = 1; v <= NV; v++) {
            if ((only && v != only) || !wanted(v)) continue;
            if (!applies(v, &S)) {
                printf("check L=%d H=%d B=%d T=%d variant %d: does not apply\n", S.nl, S.H, S.B, k.T, v);
                continue;
            }
            for (int l = 0; l < S.nl; l++) CK(cudaMemset(S.dy[l], 0xff, (size_t)S.B * S.T[l] * S.hp * 2));
            run(v, blas, s, &S);
            CK(cudaStreamSynchronize(s));
            CK(cudaGetLastError());
            std::vector<__half> y((size_t)S.B * Tl * S.hp);
            CK(cudaMemcpy(y.data(), S.dy[last], y.size() * 2, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (size_t i = 0; i < y.size(); i++) {
                double d = fabs((double)__half2float(y[i]) - ref[i]);
                if (!(d <= worst)) worst = d;
            }
            /* again on the same scratch: deterministic, control words reusable */
            for (int l = 0; l < S.nl; l++) CK(cudaMemset(S.dy[l], 0xff, (size_t)S.B * S.T[l] * S.hp * 2));
            run(v, blas, s, &S);
            CK(cudaStreamSynchronize(s));
            std::vector<__half> y2(y.size());
            CK(cudaMemcpy(y2.data(), S.dy[last], y2.size() * 2, cudaMemcpyDeviceToHost));
            bool again = !memcmp(y.data(), y2.data(), y.size() * 2);
            double vs1 = -1;
            if (first.empty() && v == 1) first = y;
            else if (!first.empty()) {
                vs1 = 0;
                for (size_t i = 0; i < y.size(); i++) vs1 = fmax(vs1, fabs((double)__half2float(y[i]) - __half2float(first[i])));
            }
            bool ok = worst <= 2e-2 && again;
            fails += !ok;
            printf("check L=%d in=%d H=%d B=%d T=%d stack=%d%d%d%d %s%s variant %d (%s): max |gpu - cpu| = %.3g, "
                   "vs variant 1 %.3g, second run %s: %s\n",
                   S.nl, S.in0, S.H, S.B, k.T, k.st[0], k.st[1], k.st[2], k.st[3], k.hard ? "hard" : "soft",
                   k.lens == 2 ? " all rows short" : k.lens == 1 ? " all rows full" : "", v, names[v], worst, vs1,
                   again ? "bitwise equal" : "DIFFERS", ok ? "ok" : "FAIL");
            fflush(stdout);
        }
        destroy(&S);
    }
    printf("checks: %d failures\n", fails);
    if (getenv("LAB_CHECK_ONLY")) return fails ? 1 : 0; /* under compute-sanitizer */

    printf("\n| stack | B | variant | ms (median of 20) | vs variant 1 |\n|---|---|---|---|---|\n");
    static const int Bs[] = {1, 2, 3, 8, 16, 32};
    static const int mlp[5] = {1, 2, 1, 1, 1};
    for (int shape = 0; shape < 2; shape++)
        for (int B : Bs) {
            stack S;
            make(&S, 5, 240, 1024, B, 300, shape ? mlp : NULL, 1, false);
            float base = 0;
            for (int v = 1; v <= NV; v++) {
                if ((only && v != only && v != 1) || (v != 1 && !wanted(v))) continue;
                if (!applies(v, &S)) continue;
                float ms = time_variant(v, blas, s, &S);
                if (v == 1) base = ms;
                printf("| 5 x 1024, in 240, T 300%s | %d | %d %s | %.3f | %.2f |\n", shape ? ", stack 2 after layer 1" : "", B,
                       v, names[v], ms, base > 0 ? ms / base : 0.0);
                fflush(stdout);
            }
            destroy(&S);
        }
    return fails ? 1 : 0;
}
