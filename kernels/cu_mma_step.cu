/* cu_mma_step.cu — the recurrent GEMM with the LSTM cell in its epilogue (see cu_mma_step.h). */
#include "cu_mma_step.h"

#include "cu_persist_dev.cuh" /* mma16816, lstm_cell (via cu_device.cuh) */

#include <stdint.h>
#include <stdlib.h>

namespace {

constexpr int THREADS = 256;
constexpr int BK = 64;        /* K per chunk: one 128-byte row of halves per tile row */
constexpr int MAX_KT = CU_MMA_MAX_HP / BK;
constexpr size_t SMEM_MAX = 227 * 1024;

struct mprm {
    int nb, H, hp, t;
    size_t ldx_b, ldy_b;
    const __half *w, *hin, *x;
    __half *hout, *y;
    const float *bias;
    float *c;
    const int *len;
};

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, zero-filled when !valid (src is then not read) */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* Programmatic dependent launch: the next step's grid may be scheduled (it still waits for this one to
 * finish before it reads h, c or writes anything); and the wait for the previous step's grid. */
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* Tile row r, 16-byte chunk ch (0..7) of a [rows][BK] chunk, XOR-swizzled so that ldmatrix's eight row
 * addresses of one chunk column fall in eight different bank groups. Offset in halves. */
__device__ __forceinline__ int swz(int r, int ch) { return r * BK + ((ch ^ (r & 7)) << 3); }

/* UNITS hidden units (BM = 4 UNITS gate rows: row r = gate r / UNITS of unit j0 + r % UNITS) x BN batch
 * rows. Warps 2 (M) x 4 (N): a warp computes (BM / 2) x (BN / 4) with MI m16 tiles and NI n8 tiles.
 * Shared memory: the block's W_hh rows for the whole K (KT chunks of [BM][BK], loaded first: they do not
 * depend on the previous step), then a ring of NS chunks of h_{t-1} ([BN][BK] each). */
template <bool HARD, int UNITS, int BN, int NS>
__global__ void __launch_bounds__(THREADS) k_mma_step(mprm P)
{
    constexpr int BM = 4 * UNITS, WM = BM / 2, WN = BN / 4, MI = WM / 16, NI = WN / 8;
    constexpr int CELLS = UNITS * BN / THREADS; /* cell items per thread */
    static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0 && CELLS * THREADS == UNITS * BN, "tile shape");
    constexpr int A_CH = BM * BK, B_CH = BN * BK; /* halves per chunk */
    constexpr int GS = BN + 4;                    /* floats per row of the gate tile (epilogue) */
    extern __shared__ __align__(128) __half sm[];

    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, wm = w >> 2, wn = w & 3;
    const int j0 = blockIdx.x * UNITS, b0 = blockIdx.y * BN;
    const int H = P.H, hp = P.hp, nb = P.nb, t = P.t;
    const int KT = (hp + BK - 1) / BK;
    __half *sa = sm, *sb = sm + (size_t)KT * A_CH;

    pdl_trigger(); /* the next step's blocks only start once these exit (shared memory), then wait for us */

    /* W_hh rows (units >= H and chunks >= hp zero-filled): all of K, one group */
    for (int i = tid; i < KT * BM * 8; i += THREADS) {
        const int kt = i / (BM * 8), r = (i >> 3) % BM, ch = i & 7, j = j0 + r % UNITS, k = kt * BK + ch * 8;
        const bool v = j < H && k < hp;
        const __half *src = v ? P.w + (size_t)((r / UNITS) * H + j) * hp + k : P.w;
        cp_async16(smem_u32(sa + kt * A_CH + swz(r, ch)), src, v);
    }
    cp_async_commit();

    /* the cells' operands that do not depend on the previous step, loaded now so their latency hides
     * under the GEMM: item i = unit (i % UNITS) of batch row b0 + i / UNITS */
    float xv[CELLS][4];
    int live[CELLS]; /* 0 skip, 1 masked row (y = 0 only), 2 pad column (zeros), 3 cell */
#pragma unroll
    for (int ci = 0; ci < CELLS; ci++) {
        const int i = tid + ci * THREADS, u = i % UNITS, n = i / UNITS, j = j0 + u, b = b0 + n;
        live[ci] = b >= nb || j >= hp ? 0 : (P.len && t >= P.len[b]) ? 1 : j >= H ? 2 : 3;
#pragma unroll
        for (int g = 0; g < 4; g++)
            xv[ci][g] = live[ci] == 3 ? __fadd_rn(__half2float(P.x[b * P.ldx_b + g * H + j]), P.bias[g * H + j]) : 0.0f;
    }

    pdl_wait(); /* the previous step is complete: h_{t-1} and c are final, and h_out is free */

    float cv[CELLS];
#pragma unroll
    for (int ci = 0; ci < CELLS; ci++) {
        const int i = tid + ci * THREADS, u = i % UNITS, n = i / UNITS;
        cv[ci] = live[ci] == 3 ? P.c[(size_t)(b0 + n) * hp + j0 + u] : 0.0f;
    }

    /* h_{t-1} rows (rows >= nb zero-filled), chunk kt into ring slot st */
    auto load_h = [&](int st, int kt) {
        const int k0 = kt * BK;
        for (int i = tid; i < BN * 8; i += THREADS) {
            const int r = i >> 3, ch = i & 7, b = b0 + r, k = k0 + ch * 8;
            const bool v = b < nb && k < hp;
            const __half *src = v ? P.hin + (size_t)b * hp + k : P.hin;
            cp_async16(smem_u32(sb + st * B_CH + swz(r, ch)), src, v);
        }
    };

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < NS - 1; s++) {
        if (s < KT) load_h(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<NS - 2>(); /* the W group and h chunks 0..kt have landed */
        __syncthreads();
        const __half *a = sa + kt * A_CH, *bt = sb + (kt % NS) * B_CH;
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint32_t af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                const int r = wm * WM + mi * 16 + (lane & 15), ch = kk * 2 + (lane >> 4);
                ldmatrix_x4(af[mi], smem_u32(a + swz(r, ch)));
            }
#pragma unroll
            for (int np = 0; np < NI / 2; np++) {
                const int r = wn * WN + np * 16 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
                uint32_t q[4];
                ldmatrix_x4(q, smem_u32(bt + swz(r, ch)));
                bf[2 * np][0] = q[0], bf[2 * np][1] = q[1], bf[2 * np + 1][0] = q[2], bf[2 * np + 1][1] = q[3];
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++) mma16816(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
        }
        const int nk = kt + NS - 1;
        if (nk < KT) load_h(nk % NS, nk);
        cp_async_commit();
    }
    cp_async_wait<0>();
    __syncthreads(); /* every warp is done with the chunks: reuse them for the gate tile */

    float *gt = (float *)sm; /* [BM][GS] */
    {
        const int g = lane >> 2, q = lane & 3;
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int r = wm * WM + mi * 16 + g, col = wn * WN + ni * 8 + 2 * q;
                gt[r * GS + col] = acc[mi][ni][0];
                gt[r * GS + col + 1] = acc[mi][ni][1];
                gt[(r + 8) * GS + col] = acc[mi][ni][2];
                gt[(r + 8) * GS + col + 1] = acc[mi][ni][3];
            }
    }
    __syncthreads();

    /* the cells: a = (x + bias) + W h, then lstm_cell, as cu_lstm_pointwise */
#pragma unroll
    for (int ci = 0; ci < CELLS; ci++) {
        if (!live[ci]) continue;
        const int i = tid + ci * THREADS, u = i % UNITS, n = i / UNITS, j = j0 + u, b = b0 + n;
        __half *yo = P.y + b * P.ldy_b + j, *ho = P.hout + (size_t)b * hp + j;
        if (live[ci] < 3) {
            *yo = __float2half_rn(0.0f);
            if (live[ci] == 2) *ho = __float2half_rn(0.0f);
            continue;
        }
        float av[4];
#pragma unroll
        for (int g = 0; g < 4; g++) av[g] = __fadd_rn(xv[ci][g], gt[(g * UNITS + u) * GS + n]);
        float cn, hn;
        lstm_cell<HARD>(av, cv[ci], &cn, &hn);
        P.c[(size_t)b * hp + j] = cn;
        const __half h16 = __float2half_rn(hn);
        *yo = h16;
        *ho = h16;
    }
}

template <int UNITS, int BN, int NS>
constexpr size_t smem_bytes(int KT)
{
    return (size_t)(KT * 4 * UNITS + NS * BN) * BK * sizeof(__half) > (size_t)4 * UNITS * (BN + 4) * sizeof(float)
               ? (size_t)(KT * 4 * UNITS + NS * BN) * BK * sizeof(__half)
               : (size_t)4 * UNITS * (BN + 4) * sizeof(float);
}

template <bool HARD, int UNITS, int BN, int NS>
cudaError_t launch(cudaStream_t s, const mprm &P)
{
    static_assert(smem_bytes<UNITS, BN, NS>(MAX_KT) <= SMEM_MAX, "shared memory");
    const size_t sb = smem_bytes<UNITS, BN, NS>((P.hp + BK - 1) / BK);
    cudaError_t e = cudaFuncSetAttribute(k_mma_step<HARD, UNITS, BN, NS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)smem_bytes<UNITS, BN, NS>(MAX_KT));
    if (e != cudaSuccess) return e;
    /* programmatic dependent launch between steps (not on the legacy stream); RNNT_CUDA_MMA_PDL=0: off (lab
     * knob, read at each launch, i.e. when a graph is captured) */
    const char *env = getenv("RNNT_CUDA_MMA_PDL");
    const bool pdl = s != 0 && !(env && atoi(env) == 0);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)((P.hp + UNITS - 1) / UNITS), (unsigned)((P.nb + BN - 1) / BN));
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = sb;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k_mma_step<HARD, UNITS, BN, NS>, P);
}

} // namespace

cu_mma_tile cu_mma_step_tile(int nb, cu_mma_tile want)
{
    if (want == CU_MMA_TILE_AUTO) {
        const char *env = getenv("RNNT_CUDA_MMA_TILE");
        int v = env ? atoi(env) : 0;
        if (v >= 1 && v <= 3) want = (cu_mma_tile)v;
    }
    if (want != CU_MMA_TILE_AUTO) return want;
    /* about one block per SM or more, with the fewest L2 bytes per step (kernels/dev/NOTES.md) */
    return nb <= 64 ? CU_MMA_TILE_8x64 : nb <= 128 ? CU_MMA_TILE_16x64 : CU_MMA_TILE_16x128;
}

rnnt_status cu_lstm_mma_step(cudaStream_t stream, rnnt_lstm_act act, cu_mma_tile tile, int nb, int H, int hp,
                             const __half *w_hh, const __half *h_in, __half *h_out, const __half *x, size_t ldx_b,
                             const float *bias, float *c, __half *y, size_t ldy_b, const int *len, int t, char *err,
                             size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    if (t < 1 || hp % 8 != 0 || hp > CU_MMA_MAX_HP || h_in == h_out)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID,
                          "cuda: mma step: t %d, hp %d (needs t >= 1, hp %% 8 == 0, hp <= %d, h_in != h_out)", t, hp,
                          CU_MMA_MAX_HP);
    mprm P;
    P.nb = nb, P.H = H, P.hp = hp, P.t = t, P.ldx_b = ldx_b, P.ldy_b = ldy_b;
    P.w = w_hh, P.hin = h_in, P.x = x, P.hout = h_out, P.y = y, P.bias = bias, P.c = c, P.len = len;
    tile = cu_mma_step_tile(nb, tile);
    const bool hard = act == RNNT_ACT_HARD;
    cudaError_t e;
    switch (tile) {
    case CU_MMA_TILE_8x64: e = hard ? launch<true, 8, 64, 8>(stream, P) : launch<false, 8, 64, 8>(stream, P); break;
    case CU_MMA_TILE_16x64: e = hard ? launch<true, 16, 64, 8>(stream, P) : launch<false, 16, 64, 8>(stream, P); break;
    default: e = hard ? launch<true, 16, 128, 6>(stream, P) : launch<false, 16, 128, 6>(stream, P); break;
    }
    if (e != cudaSuccess)
        return cu_set_err(err, errlen, cu_status_of(e), "cuda: mma step launch: %s", cudaGetErrorString(e));
    return RNNT_OK;
}
