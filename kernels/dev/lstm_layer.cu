/* lstm_layer.cu — kernel lab: the recurrence of one fp16 LSTM layer (input projection given), hard
 * activations, in three variants:
 *   1  per step: cuBLAS GEMM h·W_hh^T (fixed row chunk) + the fused cell kernel, launched directly
 *   2  variant 1 captured once as a CUDA graph and replayed (what the encoder does)
 *   3  one persistent kernel (cu_persist.cu): W_hh as mma.sync fragments in registers, h from L2,
 *      the sync mode chosen by cu_lstm_persist for the batch (AUTO)
 *   4  per step ONE fused kernel (cu_lstm_step_fused: warp per unit, W_hh from L2), as a CUDA graph
 *   5  variant 3 with the arrival-counter barrier forced
 *   6  variant 3 with tagged h words (no barrier) forced (B <= 16)
 *   7  variant 3 with per-warp arrivals and per-warp spins (no block barrier around the sync)
 *   8  variant 3 with per-warp arrivals, warp 0 spins, one block barrier
 *   9  per step ONE tensor-core kernel, GEMM + cell in its epilogue (cu_lstm_mma_step, auto tile), graph
 *  10-12  variant 9 with the tile forced: 8 units x 64 rows, 16 x 64, 16 x 128
 *
 *   lab_lstm_layer [variant]      check every variant (or one) against the CPU reference, then time
 *   lab_lstm_layer V H B T        run variant V once on one shape (for ncu), no check
 *
 * Check: T = 24 steps, max |gpu - cpu| over every output (the CPU reference rounds h to fp16 each step,
 * as the GPU stores it). Bench: T = 300, H = 1024 and 512, B = 1, 8, 16, 32, 64, 256 (rows other than row 0 of random
 * length), then B = 8-64 with every row full length; median of 20 (CUDA events). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cu_gemm.h"
#include "cu_kernels.h"
#include "cu_mma_step.h"
#include "cu_persist.h"

#include "lab_util.h"

static uint64_t rs = 42;
static float frand(void)
{
    return lab_frand(&rs);
}
static float h16(float x) { return __half2float(__float2half_rn(x)); }
static float hsig(float x)
{
    if (x != x) return x;
    float y = x / 6.0f + 0.5f;
    return y <= 0 ? 0 : (y >= 1 ? 1 : y);
}
static float htanh(float x) { return x != x ? x : (x <= -1 ? -1 : (x >= 1 ? 1 : x)); }

struct layer {
    int B, T, H, hp, g4;
    std::vector<float> x, w, bias; /* x [B][T][g4] (fp16 values), w [4H][hp] (fp16 values) */
    std::vector<int> len;
    __half *dx, *dw, *dy, *dhs, *dhs2;
    void *dhb;
    size_t hb_bytes;
    float *dbias, *dhproj, *dc;
    int *dlen;
};

static void up16(__half **d, const std::vector<float> &h)
{
    std::vector<__half> t(h.size());
    for (size_t i = 0; i < h.size(); i++) t[i] = __float2half_rn(h[i]);
    CK(cudaMalloc(d, t.size() * 2 + 16));
    CK(cudaMemcpy(*d, t.data(), t.size() * 2, cudaMemcpyHostToDevice));
}

/* lens: 0 row 0 full length, the others random; 1 every row full length; 2 row 0 five steps short, the
 * others random (the kernel stops at the longest row and zero-fills the rest) */
static void make(layer *L, int B, int T, int H, int lens = 0)
{
    L->B = B, L->T = T, L->H = H, L->hp = (H + 7) / 8 * 8, L->g4 = (4 * H + 7) / 8 * 8;
    L->x.resize((size_t)B * T * L->g4);
    L->w.assign((size_t)4 * H * L->hp, 0.0f);
    L->bias.resize((size_t)4 * H);
    for (auto &v : L->x) v = h16(3.0f * frand());
    for (int r = 0; r < 4 * H; r++)
        for (int k = 0; k < H; k++) L->w[(size_t)r * L->hp + k] = h16(frand() * 2.0f / sqrtf((float)H));
    for (auto &v : L->bias) v = 0.3f * frand();
    L->len.resize(B);
    for (int b = 0; b < B; b++) {
        frand();
        L->len[b] = lens == 1 ? T : b == 0 ? (lens == 2 ? T - 5 : T) : (int)((rs >> 33) % (uint64_t)(T + 1 - (lens == 2 ? 5 : 0)));
    }
    up16(&L->dx, L->x);
    up16(&L->dw, L->w);
    size_t yb = (size_t)B * T * L->hp * 2;
    CK(cudaMalloc(&L->dy, yb));
    int rows = (B + 15) / 16 * 16 + 256;
    CK(cudaMalloc(&L->dhs, (size_t)rows * L->hp * 2));
    CK(cudaMemset(L->dhs, 0, (size_t)rows * L->hp * 2));
    CK(cudaMalloc(&L->dhs2, (size_t)rows * L->hp * 2));
    CK(cudaMemset(L->dhs2, 0, (size_t)rows * L->hp * 2));
    L->hb_bytes = cu_persist_scratch_bytes(CU_PERSIST_MAX_B, L->hp);
    CK(cudaMalloc(&L->dhb, L->hb_bytes));
    CK(cudaMemset(L->dhb, 0, L->hb_bytes));
    CK(cudaMalloc(&L->dbias, L->bias.size() * 4));
    CK(cudaMemcpy(L->dbias, L->bias.data(), L->bias.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&L->dhproj, (size_t)rows * L->g4 * 4));
    CK(cudaMalloc(&L->dc, (size_t)rows * L->hp * 4));
    CK(cudaMalloc(&L->dlen, (size_t)B * 4));
    CK(cudaMemcpy(L->dlen, L->len.data(), (size_t)B * 4, cudaMemcpyHostToDevice));
}

static void destroy(layer *L)
{
    cudaFree(L->dx), cudaFree(L->dw), cudaFree(L->dy), cudaFree(L->dhs), cudaFree(L->dhs2), cudaFree(L->dhb), cudaFree(L->dbias);
    cudaFree(L->dhproj), cudaFree(L->dc), cudaFree(L->dlen);
}

/* CPU reference: y [B][T][H]. */
static std::vector<float> reference(const layer *L)
{
    int B = L->B, T = L->T, H = L->H;
    std::vector<float> y((size_t)B * T * H), h(H), c(H), a(4 * H);
    for (int b = 0; b < B; b++) {
        std::fill(h.begin(), h.end(), 0.0f);
        std::fill(c.begin(), c.end(), 0.0f);
        for (int t = 0; t < T; t++) {
            for (int r = 0; r < 4 * H; r++) {
                double s = 0;
                for (int k = 0; k < H; k++) s += (double)L->w[(size_t)r * L->hp + k] * h[k];
                a[r] = L->x[((size_t)b * T + t) * L->g4 + r] + L->bias[r] + (float)s;
            }
            for (int j = 0; j < H; j++) {
                float i = hsig(a[j]), f = hsig(a[H + j]), g = htanh(a[2 * H + j]), o = hsig(a[3 * H + j]);
                c[j] = f * c[j] + i * g;
                h[j] = h16(o * htanh(c[j]));
                y[((size_t)b * T + t) * H + j] = t < L->len[b] ? h[j] : 0.0f;
            }
        }
    }
    return y;
}

static void run_steps(cublasHandle_t blas, cudaStream_t s, layer *L)
{
    int rows = (L->B + 15) / 16 * 16;
    for (int t = 0; t < L->T; t++) {
        if (t > 0)
            RK(cu_gemm_rows(blas, CU_F16, L->B, 4 * L->H, L->hp, L->dhs, L->hp, L->dw, L->hp, L->dhproj, 1, L->g4, rows,
                            err, errlen));
        RK(cu_lstm_pointwise(s, CU_F16, RNNT_ACT_HARD, L->B, L->H, L->hp, L->dx + (size_t)t * L->g4, (size_t)L->T * L->g4,
                             t > 0 ? L->dhproj : NULL, L->g4, L->dbias, L->dc, L->hp, L->dy + (size_t)t * L->hp,
                             (size_t)L->T * L->hp, L->dhs, L->hp, L->dlen, t, err, errlen));
    }
}

static void run_fused(cudaStream_t s, layer *L)
{
    __half *hb[2] = {L->dhs, L->dhs2};
    for (int t = 0; t < L->T; t++)
        RK(cu_lstm_step_fused(s, CU_F16, RNNT_ACT_HARD, cu_step_fused_rows(L->B), L->B, L->H, L->hp, L->dw, hb[(t + 1) & 1],
                              hb[t & 1], L->dx + (size_t)t * L->g4, (size_t)L->T * L->g4, L->dbias, L->dc,
                              L->dy + (size_t)t * L->hp, (size_t)L->T * L->hp, L->dlen, t, err, errlen));
}

static void run_mma(cudaStream_t s, layer *L, cu_mma_tile tile)
{
    __half *hb[2] = {L->dhs, L->dhs2};
    RK(cu_lstm_pointwise(s, CU_F16, RNNT_ACT_HARD, L->B, L->H, L->hp, L->dx, (size_t)L->T * L->g4, NULL, L->g4, L->dbias,
                         L->dc, L->hp, L->dy, (size_t)L->T * L->hp, hb[0], L->hp, L->dlen, 0, err, errlen));
    for (int t = 1; t < L->T; t++)
        RK(cu_lstm_mma_step(s, RNNT_ACT_HARD, tile, L->B, L->H, L->hp, L->dw, hb[(t - 1) & 1], hb[t & 1],
                            L->dx + (size_t)t * L->g4, (size_t)L->T * L->g4, L->dbias, L->dc, L->dy + (size_t)t * L->hp,
                            (size_t)L->T * L->hp, L->dlen, t, err, errlen));
}

static void run_persist(cudaStream_t s, layer *L, int sync)
{
    RK(cu_lstm_persist(s, RNNT_ACT_HARD, L->B, L->T, L->H, L->hp, L->g4, L->dw, L->dbias, L->dx, (size_t)L->T * L->g4,
                       L->dlen, L->dy, (size_t)L->T * L->hp, L->dhb, L->hb_bytes, sync, err, errlen));
}
static int sync_of(int v)
{
    return v == 5 ? CU_PERSIST_SYNC_COUNTER
         : v == 6 ? CU_PERSIST_SYNC_TAGGED
         : v == 7 ? CU_PERSIST_SYNC_WARP
         : v == 8 ? CU_PERSIST_SYNC_WARP_BLOCK
                  : CU_PERSIST_SYNC_AUTO;
}
static int applies(int v, int H, int B)
{
    if (v == 4) return cu_step_fused_rows(B) != 0;
    if (v == 3 || v == 5 || v == 7 || v == 8) return cu_persist_fits(H, B, NULL);
    if (v == 6) return B <= 16 && cu_persist_fits(H, B, NULL);
    return 1;
}

struct runner {
    int variant;
    cudaGraphExec_t exec;
};

static void run(runner *r, cublasHandle_t blas, cudaStream_t s, layer *L)
{
    if (r->variant == 1) run_steps(blas, s, L);
    else if (r->variant == 2 || r->variant == 4 || r->variant >= 9) {
        if (!r->exec) {
            cudaGraph_t g;
            CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            if (r->variant == 2) run_steps(blas, s, L);
            else if (r->variant == 4) run_fused(s, L);
            else run_mma(s, L, (cu_mma_tile)(r->variant == 9 ? CU_MMA_TILE_AUTO : r->variant - 9));
            CK(cudaStreamEndCapture(s, &g));
            CK(cudaGraphInstantiate(&r->exec, g, 0));
            CK(cudaGraphDestroy(g));
        }
        CK(cudaGraphLaunch(r->exec, s));
    } else
        run_persist(s, L, sync_of(r->variant));
}

/* median ms of 20 runs after 3 warm-ups */
static float time_variant(int v, cublasHandle_t blas, cudaStream_t s, layer *L)
{
    runner r = {v, NULL};
    cudaEvent_t a, e;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&e));
    for (int i = 0; i < 3; i++) run(&r, blas, s, L);
    std::vector<float> ts;
    for (int i = 0; i < 20; i++) {
        CK(cudaEventRecord(a, s));
        run(&r, blas, s, L);
        CK(cudaEventRecord(e, s));
        CK(cudaEventSynchronize(e));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, e));
        ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    if (r.exec) cudaGraphExecDestroy(r.exec);
    cudaEventDestroy(a);
    cudaEventDestroy(e);
    return ts[10];
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
    static const char *names[] = {"", "steps: cuBLAS + cell kernel", "steps as a CUDA graph", "persistent kernel (auto sync)",
                                  "fused step kernel, graph", "persistent, counter barrier", "persistent, tagged h",
                                  "persistent, per-warp sync", "persistent, per-warp arrivals, warp 0 spins",
                                  "mma step (GEMM + cell), graph", "mma step, tile 8x64", "mma step, tile 16x64",
                                  "mma step, tile 16x128"};
    if (argc == 5) {
        layer L;
        make(&L, atoi(argv[3]), atoi(argv[4]), atoi(argv[2]));
        runner r = {only, NULL};
        for (int i = 0; i < 2; i++) run(&r, blas, s, &L);
        CK(cudaStreamSynchronize(s));
        printf("ran variant %d (%s) H=%d B=%d T=%d twice\n", only, names[only], L.H, L.B, L.T);
        return 0;
    }

    static const int checks[][3] = {{1024, 1, 0}, {1024, 17, 0}, {512, 64, 0}, {100, 3, 0}, {320, 8, 0},
                                    {1023, 9, 0}, {17, 5, 0}, {63, 16, 0}, {1024, 33, 2}, {256, 1, 2}, {100, 130, 0}};
    int fails = 0;
    for (auto &ck : checks) {
        layer L;
        make(&L, ck[1], 24, ck[0], ck[2]);
        std::vector<float> ref = reference(&L);
        std::vector<__half> first; /* the first persistent variant's output: every other one must equal it bitwise */
        for (int v = 1; v <= 12; v++) {
            if (only && v != only) continue;
            if (!applies(v, L.H, L.B)) {
                printf("check H=%d B=%d variant %d: does not apply\n", L.H, L.B, v);
                continue;
            }
            runner r = {v, NULL};
            CK(cudaMemset(L.dy, 0xff, (size_t)L.B * L.T * L.hp * 2));
            run(&r, blas, s, &L);
            CK(cudaStreamSynchronize(s));
            std::vector<__half> y((size_t)L.B * L.T * L.hp);
            CK(cudaMemcpy(y.data(), L.dy, y.size() * 2, cudaMemcpyDeviceToHost));
            double worst = 0;
            for (int b = 0; b < L.B; b++)
                for (int t = 0; t < L.T; t++)
                    for (int j = 0; j < L.hp; j++) {
                        float g = __half2float(y[((size_t)b * L.T + t) * L.hp + j]);
                        float w = j < L.H ? ref[((size_t)b * L.T + t) * L.H + j] : 0.0f;
                        double d = fabs((double)g - w);
                        if (!(d <= worst)) worst = d; /* NaN (unwritten) makes worst NaN */
                    }
            const char *same = "";
            if (v == 3 || v >= 5) {
                if (first.empty()) first = y;
                else same = memcmp(first.data(), y.data(), y.size() * 2) ? ", NOT bitwise equal to the first persistent run FAIL"
                                                                          : ", bitwise equal to the first persistent run";
                /* again on the same scratch: deterministic, and the control words were left reusable */
                CK(cudaMemset(L.dy, 0xff, (size_t)L.B * L.T * L.hp * 2));
                run(&r, blas, s, &L);
                CK(cudaStreamSynchronize(s));
                std::vector<__half> y2(y.size());
                CK(cudaMemcpy(y2.data(), L.dy, y2.size() * 2, cudaMemcpyDeviceToHost));
                if (memcmp(y2.data(), y.data(), y.size() * 2)) {
                    printf("check H=%d B=%d variant %d: second run differs FAIL\n", L.H, L.B, v);
                    fails++;
                }
                if (*same == ',' && same[2] == 'N') fails++;
            }
            if (!(worst <= 2e-2)) fails++;
            printf("check H=%d B=%d%s variant %d (%s): max |gpu - cpu| = %.3g %s%s\n", L.H, L.B, ck[2] == 2 ? " (all rows short)" : "",
                   v, names[v], worst, worst <= 2e-2 ? "ok" : "FAIL", same);
            if (r.exec) cudaGraphExecDestroy(r.exec);
        }
        destroy(&L);
    }

    printf("\n| H | B | variant | ms per layer (T=300) | us per step |\n|---|---|---|---|---|\n");
    printf("checks: %d failures\n", fails);
    static const int Hs[] = {1024, 512}, Bs[] = {1, 8, 16, 32, 64, 256};
    for (int H : Hs)
        for (int B : Bs) {
            layer L;
            make(&L, B, 300, H);
            for (int v = 1; v <= 9; v++) {
                if (only && v != only) continue;
                if (v == 3) continue; /* AUTO: the same kernel as one of 5, 7, 8 */
                if (v == 6 && B > 8) continue; /* tagged: slower everywhere (NOTES.md) */
                if (v == 1 && B > 1) continue; /* direct launches: shown at B = 1 only */
                if (v == 4 && B > 8) continue;  /* slower than the graph path from B = 8 on (NOTES.md) */
                if (!applies(v, H, B)) continue;
                float ms = time_variant(v, blas, s, &L);
                printf("| %d | %d | %d %s | %.3f | %.2f |\n", H, B, v, names[v], ms, ms * 1e3 / 300);
                fflush(stdout);
            }
            destroy(&L);
        }
    if (!only) {
        /* every row full length (as in bench_encoder): the cost of live rows, without the random lengths */
        printf("\n| H | B (all rows T) | variant | us per step |\n|---|---|---|---|\n");
        static const int HB[][2] = {{1024, 8}, {1024, 16}, {1024, 32}, {1024, 64}, {512, 64}, {1024, 128}, {1024, 256}, {1024, 512}};
        for (auto &hb : HB) {
            layer L;
            make(&L, hb[1], 300, hb[0], 1);
            for (int v : {2, 5, 7, 8, 9, 10, 11, 12}) {
                if (v >= 10 && hb[1] < 32) continue;
                if (!applies(v, hb[0], hb[1])) continue;
                float ms = time_variant(v, blas, s, &L);
                printf("| %d | %d | %d %s | %.2f |\n", hb[0], hb[1], v, names[v], ms * 1e3 / 300);
                fflush(stdout);
            }
            destroy(&L);
        }
    }
    return fails ? 1 : 0;
}
