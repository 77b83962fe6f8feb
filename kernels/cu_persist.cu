/* cu_persist.cu — persistent tensor-core LSTM recurrence (see cu_persist.h). */
#include "cu_persist.h"

#include <string.h>

#include <cooperative_groups.h>
#include <mma.h>

namespace cg = cooperative_groups;
using namespace nvcuda;

namespace {

constexpr int U = CU_PERSIST_U;
constexpr int ROWS = 4 * U;      /* gate rows per block: i f g o of U units */
constexpr int MT = ROWS / 16;    /* m-tiles */
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int KQ = WARPS / MT;   /* the K range is split over this many warps per m-tile */
constexpr int NT_MAX = CU_PERSIST_MAX_B / 16;
static_assert(ROWS % 16 == 0 && WARPS % MT == 0, "tile split");

struct layout_t {
    size_t ws, hs, part, total;
};

__host__ __device__ inline size_t al128(size_t x) { return (x + 127) / 128 * 128; }

__host__ __device__ inline layout_t layout(int kp, int bp)
{
    layout_t L;
    L.ws = 0;
    L.hs = al128(L.ws + (size_t)ROWS * kp * 2);
    L.part = al128(L.hs + (size_t)bp * kp * 2);
    L.total = al128(L.part + (size_t)KQ * ROWS * bp * 4);
    return L;
}

template <bool HARD>
__device__ __forceinline__ float sig(float x)
{
    return HARD ? cu_hardsigmoid(x) : cu_sigmoid(x);
}
template <bool HARD>
__device__ __forceinline__ float phi(float x)
{
    return HARD ? cu_hardtanh(x) : tanhf(x);
}

template <bool HARD>
__global__ void __launch_bounds__(THREADS, 1)
    k_lstm_persist(int nb, int bp, int T, int H, int hp, int kp, int g4, const __half *__restrict__ w_hh,
                   const float *__restrict__ bias, const __half *__restrict__ x, size_t ldx_b,
                   const int *__restrict__ len, __half *__restrict__ y, size_t ldy_b, __half *hbuf)
{
    extern __shared__ __align__(128) unsigned char sm[];
    const layout_t L = layout(kp, bp);
    __half *ws = (__half *)(sm + L.ws), *hs = (__half *)(sm + L.hs);
    float *part = (float *)(sm + L.part);
    cg::grid_group grid = cg::this_grid();
    const int j0 = blockIdx.x * U, tid = threadIdx.x, warp = tid >> 5;

    /* This block's gate rows (row g*U + u is global row g*H + j0 + u), zero-padded to kp columns. */
    for (int i = tid; i < ROWS * kp; i += THREADS) {
        int r = i / kp, k = i % kp, g = r / U, j = j0 + r % U;
        ws[i] = (j < H && k < hp) ? w_hh[(size_t)(g * H + j) * hp + k] : __float2half_rn(0.0f);
    }
    for (int i = tid; i < bp * kp; i += THREADS) hs[i] = __float2half_rn(0.0f); /* pad rows/columns stay 0 */
    __syncthreads();

    const int mt = warp % MT, kq = warp / MT, ktiles = kp / 16, kper = (ktiles + KQ - 1) / KQ;
    const int k0 = kq * kper, k1 = min(ktiles, k0 + kper), nt = bp / 16, vec = hp / 8;
    const size_t hb = (size_t)bp * hp;

    /* Each thread keeps the same (unit, row) items for the whole sequence (U * nb <= 2 * THREADS), with
     * their bias, length and cell state in registers, and loads the next step's input projection
     * before the grid barrier so that its memory latency hides behind the barrier's. */
    constexpr int ITEMS = (U * CU_PERSIST_MAX_B + THREADS - 1) / THREADS;
    int iu[ITEMS], ib[ITEMS], il[ITEMS];
    bool live[ITEMS];
    float ibias[ITEMS][4], ic[ITEMS], ix[ITEMS][4];
#pragma unroll
    for (int q = 0; q < ITEMS; q++) {
        int i = tid + q * THREADS;
        iu[q] = i % U;
        ib[q] = i / U;
        live[q] = i < U * nb && j0 + iu[q] < H;
        il[q] = live[q] && len ? len[ib[q]] : T;
        ic[q] = 0.0f;
#pragma unroll
        for (int g = 0; g < 4; g++) {
            ibias[q][g] = live[q] ? bias[g * H + j0 + iu[q]] : 0.0f;
            ix[q][g] = live[q] ? __half2float(x[ib[q] * ldx_b + g * H + j0 + iu[q]]) : 0.0f;
        }
    }

    for (int t = 0; t < T; t++) {
        if (t > 0) {
            /* h_{t-1} of every unit; L2 reads (written by other SMs: bypass L1) */
            const __half *src = hbuf + (size_t)((t - 1) & 1) * hb;
            for (int i = tid; i < nb * vec; i += THREADS) {
                int b = i / vec, v = i % vec;
                uint4 q = __ldcg((const uint4 *)(src + (size_t)b * hp) + v);
                *((uint4 *)(hs + (size_t)b * kp) + v) = q;
            }
            __syncthreads();
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NT_MAX];
#pragma unroll
            for (int n = 0; n < NT_MAX; n++) wmma::fill_fragment(acc[n], 0.0f);
            for (int kt = k0; kt < k1; kt++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
                wmma::load_matrix_sync(a, ws + (size_t)(mt * 16) * kp + kt * 16, kp);
#pragma unroll
                for (int n = 0; n < NT_MAX; n++)
                    if (n < nt) {
                        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bf;
                        wmma::load_matrix_sync(bf, hs + (size_t)(n * 16) * kp + kt * 16, kp);
                        wmma::mma_sync(acc[n], a, bf, acc[n]);
                    }
            }
#pragma unroll
            for (int n = 0; n < NT_MAX; n++)
                if (n < nt)
                    wmma::store_matrix_sync(part + ((size_t)kq * ROWS + mt * 16) * bp + n * 16, acc[n], bp,
                                            wmma::mem_row_major);
            __syncthreads();
        }
        /* cell update of this thread's items */
#pragma unroll
        for (int q = 0; q < ITEMS; q++) {
            if (!live[q]) continue;
            int u = iu[q], b = ib[q], j = j0 + u;
            float a[4];
#pragma unroll
            for (int g = 0; g < 4; g++) {
                float v = __fadd_rn(ix[q][g], ibias[q][g]);
                if (t > 0) {
                    const float *p = part + (size_t)(g * U + u) * bp + b;
                    float hsum = p[0];
#pragma unroll
                    for (int k = 1; k < KQ; k++) hsum = __fadd_rn(hsum, p[(size_t)k * ROWS * bp]);
                    v = __fadd_rn(v, hsum);
                }
                a[g] = v;
            }
            float ig = sig<HARD>(a[0]), fg = sig<HARD>(a[1]), gg = phi<HARD>(a[2]), og = sig<HARD>(a[3]);
            float c = __fadd_rn(__fmul_rn(fg, ic[q]), __fmul_rn(ig, gg));
            float h = __fmul_rn(og, phi<HARD>(c));
            ic[q] = c;
            __half hh = __float2half_rn(h);
            hbuf[(size_t)(t & 1) * hb + (size_t)b * hp + j] = hh;
            y[b * ldy_b + (size_t)t * hp + j] = t >= il[q] ? __float2half_rn(0.0f) : hh;
            if (t + 1 < T)
#pragma unroll
                for (int g = 0; g < 4; g++) ix[q][g] = __half2float(x[b * ldx_b + (size_t)(t + 1) * g4 + g * H + j]);
        }
        if (blockIdx.x == 0 && hp > H)
            for (int i = tid; i < nb * (hp - H); i += THREADS) {
                int b = i / (hp - H), q = H + i % (hp - H);
                y[b * ldy_b + (size_t)t * hp + q] = __float2half_rn(0.0f);
                hbuf[(size_t)(t & 1) * hb + (size_t)b * hp + q] = __float2half_rn(0.0f);
            }
        grid.sync();
    }
}

} // namespace

int cu_persist_fits(int H, int nb_max, int *blocks)
{
    int dev, sms = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    int nblk = cu_div_up(H, U);
    int kp = cu_round_up_i(cu_round_up_i(H, CU_PAD), 16), bp = cu_round_up_i(nb_max, 16);
    if (nb_max > CU_PERSIST_MAX_B || nblk > sms) return 0;
    if (layout(kp, bp).total > (size_t)optin) return 0;
    if (blocks) *blocks = nblk;
    return 1;
}

rnnt_status cu_lstm_persist(cudaStream_t stream, rnnt_lstm_act act, int nb, int T, int H, int hp, int g4,
                            const __half *w_hh, const float *bias, const __half *x, size_t ldx_b, const int *len,
                            __half *y, size_t ldy_b, __half *hbuf, char *err, size_t errlen)
{
    if (nb <= 0 || T <= 0) return RNNT_OK;
    int blocks;
    if (!cu_persist_fits(H, nb, &blocks))
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: persistent LSTM does not fit H=%d, %d rows", H, nb);
    int kp = cu_round_up_i(hp, 16), bp = cu_round_up_i(nb, 16);
    size_t smem = layout(kp, bp).total;
    void (*kern)(int, int, int, int, int, int, int, const __half *, const float *, const __half *, size_t, const int *,
                 __half *, size_t, __half *) = act == RNNT_ACT_HARD ? k_lstm_persist<true> : k_lstm_persist<false>;
    CU_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0, dev, sms = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, THREADS, smem));
    CU_TRY(cudaGetDevice(&dev));
    CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (per_sm * sms < blocks)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: persistent LSTM needs %d co-resident blocks, %d fit",
                          blocks, per_sm * sms);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)blocks);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, nb, bp, T, H, hp, kp, g4, w_hh, bias, x, ldx_b, len, y, ldy_b, hbuf));
    return RNNT_OK;
}
