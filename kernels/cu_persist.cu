/* cu_persist.cu — persistent tensor-core LSTM recurrence with register-resident W_hh (see cu_persist.h). */
#include "cu_persist.h"

#include "cu_persist_dev.cuh"

#include <stdint.h>
#include <string.h>

namespace {

constexpr int U = CU_PERSIST_U;
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int RS = 36; /* floats per (warp, column) row of the partial sums: 32 gate rows + pad (no bank conflicts) */
constexpr size_t CTL_BYTES = 2048; /* [0] counter, [1] done, [2] generation; warp w's counter at word 32 (w + 1) */
constexpr int CTR_W = 32;          /* words between the per-warp arrival counters (one 128-byte line each) */
constexpr int TAGGED_ROWS = 16; /* the tagged mode runs up to two n-tiles */
static_assert(4 * U == 32, "a block's gate rows are one warp's lanes");

struct prm {
    int nb, T, H, hp, g4;
    size_t ldx_b, ldy_b;
    const __half *w;
    const float *bias;
    const __half *x;
    const int *len;
    __half *y;
    unsigned *ctl;        /* [0] arrival counter, [1] blocks done, [2] tag generation, [CTR_W (w + 1)] warp w's arrivals */
    __half *hb;           /* counter mode: h double buffer [2][nb][hp] */
    unsigned long long *ll; /* tagged mode: [2][nb][hp / 2] words {tag << 32 | h[k+1] << 16 | h[k]} */
    int backoff;          /* ns to sleep between polls (0: spin) */
};

int g_backoff_ns = 0;

__device__ __forceinline__ void ld_relaxed_v2(const unsigned long long *p, unsigned long long &a, unsigned long long &b)
{
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0,%1}, [%2];\n" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}
__device__ __forceinline__ void st_relaxed(unsigned long long *p, unsigned long long v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}


/* KS: k16 steps per warp (K slice = 16 * KS); NT: n-tiles of 8 rows (nb <= 8 * NT); MODE: sync. */
template <bool HARD, int KS, int NT, int MODE>
__global__ void __launch_bounds__(THREADS, 1) k_persist(prm P)
{
    static_assert(KS % 2 == 0, "16-byte h loads cover two k-steps");
    constexpr int NC = NT * 8;                 /* columns (rows of the batch) per launch */
    /* n-tiles per load group (registers: KS * 2 per n-tile) */
    constexpr int NG = MODE == CU_PERSIST_SYNC_TAGGED ? (NT < 2 ? NT : 2) : NT < 4 ? NT : (KS == 8 && NT == 8 ? 2 : 4);
    extern __shared__ __align__(16) float part[]; /* [2][WARPS][NC][RS] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int nb = P.nb, T = P.T, H = P.H, hp = P.hp, j0 = blockIdx.x * U;
    const unsigned nblk = gridDim.x;
    /* This thread's K values: KS / 2 chunks of 8 (16 bytes), chunk v at kch(v) = 8 (w * 2KS + 4v + q): the
     * four lanes of a row read 64 contiguous bytes per load (two full 32-byte sectors; v2 read 16-byte
     * pieces 64 bytes apart, so every sector crossed the L2 twice). */
    auto kch = [&](int v) { return 8 * (w * (2 * KS) + 4 * v + q); };

    uint32_t A[2][KS][4]; /* W_hh fragments */
    load_whh_fragments<KS>(A, P.w, H, hp, j0, w, g, q);

    /* Cell items: lane = gate row R (gate R / 8, unit R % 8) of columns b = w + 8i. */
    const int gr = lane >> 3, ul = lane & 7, j = j0 + ul;
    const bool jv = j < H;
    const float bias_r = jv ? P.bias[gr * H + j] : 0.0f;
    float xb[NT], c[NT];
    int lenb[NT];
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const int b = w + 8 * i;
        const bool v = b < nb && jv;
        xb[i] = v ? __fadd_rn(__half2float(P.x[b * P.ldx_b + gr * H + j]), bias_r) : 0.0f;
        c[i] = 0.0f;
        lenb[i] = b < nb ? (P.len ? P.len[b] : T) : 0;
    }
    /* rows of this thread's B fragments: h_{t-1} of row b is loaded only while t < len[b] (rows past their
     * length, padding slots included, contribute zeros; their outputs are 0 anyway) */
    int lenf[NT];
#pragma unroll
    for (int n = 0; n < NT; n++) {
        const int b = n * 8 + g;
        lenf[n] = b < nb ? (P.len ? P.len[b] : T) : 0;
    }
    /* Steps past the longest row (an encoder bucket is longer than its utterances) only produce zeros:
     * the loop stops at Trun and the tail is zero-filled. mlw: longest row of this warp's cell rows (it
     * arrives at step t while t + 1 < mlw: someone loads its h_t); mll: the same for warp index lane & 7
     * (lanes 0-7 wait for that warp's arrivals in the per-warp modes). */
    int mlw = 0, mll = 0;
#pragma unroll
    for (int i = 0; i < NT; i++) {
        mlw = lenb[i] > mlw ? lenb[i] : mlw;
        const int b = (lane & 7) + 8 * i, lb = b < nb ? (P.len ? P.len[b] : T) : 0;
        mll = lb > mll ? lb : mll;
    }
    const int lmax = (int)__reduce_max_sync(0xffffffffu, (unsigned)mll), Trun = lmax < T ? lmax : T;
    const unsigned gen = *(volatile unsigned *)&P.ctl[2];
    const size_t hbs = (size_t)nb * hp, lls = (size_t)nb * (hp / 2);
    unsigned *const ctr_w = P.ctl + CTR_W * (w + 1), *const ctr_l = P.ctl + CTR_W * ((lane & 7) + 1);

    for (int t = 0; t < Trun; t++) {
        float *pt = part + (size_t)(t & 1) * WARPS * NC * RS;
        if (MODE >= CU_PERSIST_SYNC_WARP && t > 0) {
            /* every h_{t-1} row this block loads: warp index l arrived at steps s < t with s + 1 < mll(l) */
            const int m1 = mll - 1, steps = t < m1 ? t : m1;
            const bool poller = MODE == CU_PERSIST_SYNC_WARP ? lane < 8 : (w == 0 && lane < 8);
            if (poller && steps > 0) spin_until(ctr_l, nblk * (unsigned)steps, P.backoff, 1u << 26);
            if (MODE == CU_PERSIST_SYNC_WARP) __syncwarp();
            else __syncthreads();
        }
        if (t > 0) {
#pragma unroll
            for (int n0 = 0; n0 < NT; n0 += NG) {
                uint32_t Bf[NG][KS][2];
                if (MODE != CU_PERSIST_SYNC_TAGGED) {
                    const __half *src = P.hb + (size_t)((t - 1) & 1) * hbs;
#pragma unroll
                    for (int n = 0; n < NG; n++) {
                        const int b = (n0 + n) * 8 + g;
#pragma unroll
                        for (int v = 0; v < KS / 2; v++) {
                            const int k = kch(v);
                            uint4 d = make_uint4(0, 0, 0, 0);
                            if (t < lenf[n0 + n] && k < H) d = __ldcg((const uint4 *)(src + (size_t)b * hp + k));
                            if (k + 8 > H) {
                                d.x = mask2(d.x, k, H), d.y = mask2(d.y, k + 2, H);
                                d.z = mask2(d.z, k + 4, H), d.w = mask2(d.w, k + 6, H);
                            }
                            Bf[n][2 * v][0] = d.x, Bf[n][2 * v][1] = d.y;
                            Bf[n][2 * v + 1][0] = d.z, Bf[n][2 * v + 1][1] = d.w;
                        }
                    }
                } else {
                    /* tagged words: h_{t-1} was written with tag gen + t; retry the stale ones */
                    const unsigned want = gen + (unsigned)t;
                    const unsigned long long *src = P.ll + (size_t)((t - 1) & 1) * lls;
                    unsigned long long wd[NG][KS][2];
                    bool ok[NG][KS];
#pragma unroll
                    for (int n = 0; n < NG; n++) {
#pragma unroll
                        for (int s = 0; s < KS; s++) {
                            const int k = kch(s >> 1) + 4 * (s & 1);
                            ok[n][s] = !(t < lenf[n0 + n] && k < H);
                            wd[n][s][0] = wd[n][s][1] = (unsigned long long)want << 32;
                        }
                    }
                    /* first every word once; then, while some are stale, probe only the first stale
                     * word (one load per poll keeps the L2 lines that every block reads from being
                     * hammered), and once it is fresh reload the remaining stale ones */
                    bool probe = false;
                    for (unsigned spins = 0;; spins++) {
                        if (spins > (1u << 26)) __trap(); /* a lost block: fail loudly instead of hanging */
                        bool all = true, first = true, fresh = false;
#pragma unroll
                        for (int n = 0; n < NG; n++) {
                            const int b = (n0 + n) * 8 + g;
#pragma unroll
                            for (int s = 0; s < KS; s++)
                                if (!ok[n][s]) {
                                    if (!probe || first) {
                                        const int k = kch(s >> 1) + 4 * (s & 1);
                                        ld_relaxed_v2(src + (size_t)b * (hp / 2) + k / 2, wd[n][s][0], wd[n][s][1]);
                                        ok[n][s] = (unsigned)(wd[n][s][0] >> 32) == want &&
                                                   (k + 2 >= H || (unsigned)(wd[n][s][1] >> 32) == want);
                                        if (first) fresh = ok[n][s];
                                    }
                                    first = false;
                                    all = all && ok[n][s];
                                }
                        }
                        if (all) break;
                        probe = !(probe && fresh);
                        if (probe && P.backoff) __nanosleep(P.backoff);
                    }
#pragma unroll
                    for (int n = 0; n < NG; n++)
#pragma unroll
                        for (int s = 0; s < KS; s++) {
                            const int k = kch(s >> 1) + 4 * (s & 1);
                            uint32_t lo = (uint32_t)wd[n][s][0], hi = (uint32_t)wd[n][s][1];
                            if (k + 4 > H) lo = mask2(lo, k, H), hi = mask2(hi, k + 2, H);
                            Bf[n][s][0] = lo, Bf[n][s][1] = hi;
                        }
                    __syncwarp();
                }
                /* products; partials to shared memory as [warp][column][gate row] */
#pragma unroll
                for (int n = 0; n < NG; n++) {
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                        for (int s = 0; s < KS; s++) mma16816(acc, A[mt][s], Bf[n][s][0], Bf[n][s][1]);
                        const int col = (n0 + n) * 8 + 2 * q, row = mt * 16 + g;
                        float *p = pt + ((size_t)w * NC + col) * RS + row;
                        p[0] = acc[0];
                        p[RS] = acc[1];
                        p[8] = acc[2];
                        p[RS + 8] = acc[3];
                    }
                }
            }
            __syncthreads();
        }
        /* cell update: sum the 8 warp partials in order, gather the unit's 4 gates, update c, h */
        const unsigned tag = gen + (unsigned)t + 1u;
        __half hy[NT];
#pragma unroll
        for (int i = 0; i < NT; i++) {
            const int b = w + 8 * i; /* warp-uniform */
            if (b >= nb) break;
            if (t >= lenb[i]) { /* warp-uniform: a row past its length (a bucket's padding slot) outputs 0 */
                hy[i] = __float2half_rn(0.0f);
                continue;
            }
            float v = xb[i];
            if (t > 0) {
                const float *p = pt + (size_t)b * RS + lane;
                float sum = p[0];
#pragma unroll
                for (int k = 1; k < WARPS; k++) sum = __fadd_rn(sum, p[(size_t)k * NC * RS]);
                v = __fadd_rn(v, sum);
            }
            const float ai = __shfl_sync(0xffffffffu, v, ul), af = __shfl_sync(0xffffffffu, v, 8 + ul);
            const float ag = __shfl_sync(0xffffffffu, v, 16 + ul), ao = __shfl_sync(0xffffffffu, v, 24 + ul);
            const float ig = gate_sig<HARD>(ai), fg = gate_sig<HARD>(af), gg = gate_tanh<HARD>(ag);
            const float og = gate_sig<HARD>(ao);
            const float cn = __fadd_rn(__fmul_rn(fg, c[i]), __fmul_rn(ig, gg));
            const float hn = __fmul_rn(og, gate_tanh<HARD>(cn));
            c[i] = cn;
            const __half hh = jv ? __float2half_rn(hn) : __float2half_rn(0.0f);
            /* h_t of row b is read at step t + 1 only if t + 1 < len[b] */
            if (MODE != CU_PERSIST_SYNC_TAGGED) {
                if (lane < 8 && jv && t + 1 < lenb[i]) P.hb[(size_t)(t & 1) * hbs + (size_t)b * hp + j] = hh;
            } else {
                const unsigned bits = __half_as_ushort(hh);
                const unsigned hi = __shfl_down_sync(0xffffffffu, bits, 1);
                if (lane < 8 && !(lane & 1) && jv && t + 1 < lenb[i])
                    st_relaxed(P.ll + (size_t)(t & 1) * lls + (size_t)b * (hp / 2) + j / 2,
                               ((unsigned long long)tag << 32) | (unsigned long long)((hi << 16) | bits));
            }
            hy[i] = t >= lenb[i] ? __float2half_rn(0.0f) : hh;
        }
        /* y and the next step's input projection after the arrival: the release fence then waits for
         * the h stores only, and the x loads (from DRAM) overlap the wait */
        auto finish = [&]() {
#pragma unroll
            for (int i = 0; i < NT; i++) {
                const int b = w + 8 * i;
                if (b >= nb) break;
                if (lane < 8 && jv) P.y[b * P.ldy_b + (size_t)t * hp + j] = hy[i];
                if (t + 1 < lenb[i] && jv) /* rows past their length need no input */
                    xb[i] = __fadd_rn(__half2float(P.x[b * P.ldx_b + (size_t)(t + 1) * P.g4 + gr * H + j]), bias_r);
            }
            if (blockIdx.x == 0 && hp > H)
                for (int i = tid; i < nb * (hp - H); i += THREADS) {
                    int b = i / (hp - H), col = H + i % (hp - H);
                    P.y[b * P.ldy_b + (size_t)t * hp + col] = __float2half_rn(0.0f);
                }
        };
        if (MODE == CU_PERSIST_SYNC_COUNTER && t + 1 < Trun) {
            __syncthreads();
            if (tid == 0) red_release_add(&P.ctl[0], 1u);
            finish();
            if (tid == 0) spin_until(&P.ctl[0], nblk * (unsigned)(t + 1), P.backoff, 1u << 26);
            __syncthreads();
        } else if (MODE >= CU_PERSIST_SYNC_WARP) {
            /* per-warp arrival, no block barrier: the warp's h stores, then lane 0's release */
            if (t + 1 < mlw) {
                __syncwarp();
                if (lane == 0) red_release_add(ctr_w, 1u);
            }
            finish();
        } else {
            finish();
        }
    }
    /* steps Trun..T-1: zeros (this block's units of every row; block 0 also the pad columns) */
    if (Trun < T) {
        const int n_t = T - Trun;
        for (int i = tid; i < nb * n_t * U; i += THREADS) {
            const int u = i % U, r = i / U, b = r % nb, tt = Trun + r / nb;
            if (j0 + u < H) P.y[b * P.ldy_b + (size_t)tt * hp + j0 + u] = __float2half_rn(0.0f);
        }
        if (blockIdx.x == 0 && hp > H)
            for (int i = tid; i < nb * n_t * (hp - H); i += THREADS) {
                const int col = H + i % (hp - H), r = i / (hp - H), b = r % nb, tt = Trun + r / nb;
                P.y[b * P.ldy_b + (size_t)tt * hp + col] = __float2half_rn(0.0f);
            }
    }
    /* the last block out resets the counters and advances the tag generation past every tag written */
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(&P.ctl[1], 1u) == nblk - 1) {
            P.ctl[0] = 0;
            for (int k = 1; k <= WARPS; k++) P.ctl[CTR_W * k] = 0;
            P.ctl[1] = 0;
            P.ctl[2] = gen + (unsigned)T;
            __threadfence();
        }
    }
}

typedef void (*kern_t)(prm);

template <bool HARD, int KS, int NT>
kern_t pick_mode(int mode)
{
    if (mode == CU_PERSIST_SYNC_TAGGED) {
        if (NT <= 2) return k_persist<HARD, KS, (NT <= 2 ? NT : 2), CU_PERSIST_SYNC_TAGGED>;
        return NULL;
    }
    if (mode == CU_PERSIST_SYNC_WARP) return k_persist<HARD, KS, NT, CU_PERSIST_SYNC_WARP>;
    if (mode == CU_PERSIST_SYNC_WARP_BLOCK) return k_persist<HARD, KS, NT, CU_PERSIST_SYNC_WARP_BLOCK>;
    return k_persist<HARD, KS, NT, CU_PERSIST_SYNC_COUNTER>;
}

template <bool HARD, int KS>
kern_t pick_nt(int nt, int mode)
{
    switch (nt) {
    case 1: return pick_mode<HARD, KS, 1>(mode);
    case 2: return pick_mode<HARD, KS, 2>(mode);
    case 4: return pick_mode<HARD, KS, 4>(mode);
    default: return pick_mode<HARD, KS, 8>(mode);
    }
}

template <bool HARD>
kern_t pick_ks(int ks, int nt, int mode)
{
    switch (ks) {
    case 2: return pick_nt<HARD, 2>(nt, mode);
    case 4: return pick_nt<HARD, 4>(nt, mode);
    default: return pick_nt<HARD, 8>(nt, mode);
    }
}

int ks_of(int H) { return H <= 2 * 16 * WARPS ? 2 : H <= 4 * 16 * WARPS ? 4 : 8; }
int nt_of(int nb) { return nb <= 8 ? 1 : nb <= 16 ? 2 : nb <= 32 ? 4 : 8; }
size_t smem_of(int nt) { return (size_t)2 * WARPS * nt * 8 * RS * sizeof(float); }

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
    if (H < 1 || H > CU_PERSIST_MAX_H || nb_max < 1 || nb_max > CU_PERSIST_MAX_B || nblk > sms) return 0;
    if (smem_of(nt_of(nb_max)) > (size_t)optin) return 0;
    if (blocks) *blocks = nblk;
    return 1;
}

void cu_persist_set_backoff(int ns) { g_backoff_ns = ns > 0 ? ns : 0; }

size_t cu_persist_scratch_bytes(int nb_max, int hp)
{
    size_t rows = (size_t)cu_round_up_i(nb_max, 8);
    return CTL_BYTES + cu_round_up(2 * rows * hp * 2, 256) + (size_t)2 * TAGGED_ROWS * hp * 4 + 16;
}

rnnt_status cu_lstm_persist(cudaStream_t stream, rnnt_lstm_act act, int nb, int T, int H, int hp, int g4,
                            const __half *w_hh, const float *bias, const __half *x, size_t ldx_b, const int *len,
                            __half *y, size_t ldy_b, void *scratch, size_t scratch_bytes, int sync, char *err,
                            size_t errlen)
{
    if (nb <= 0 || T <= 0) return RNNT_OK;
    int blocks;
    if (!cu_persist_fits(H, nb, &blocks) || hp % 8)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: persistent LSTM does not fit H=%d, %d rows", H, nb);
    int nt = nt_of(nb), ks = ks_of(H);
    /* measured on the H100 (kernels/dev/NOTES.md, v3 runs 5-6): the counter at one n-tile (B <= 8) and at
     * eight, per-warp sync at two and four (B = 16: 3.5 vs 3.8-4.1 us per step, B = 32: 5.8 vs 5.9-6.0
     * with every row live); all modes give bitwise the same results */
    if (sync == CU_PERSIST_SYNC_AUTO) sync = nt == 2 || nt == 4 ? CU_PERSIST_SYNC_WARP : CU_PERSIST_SYNC_COUNTER;
    if (sync == CU_PERSIST_SYNC_TAGGED && nt > 2) sync = CU_PERSIST_SYNC_COUNTER;
    if (sync < CU_PERSIST_SYNC_COUNTER || sync > CU_PERSIST_SYNC_WARP_BLOCK) sync = CU_PERSIST_SYNC_COUNTER;
    kern_t kern = act == RNNT_ACT_HARD ? pick_ks<true>(ks, nt, sync) : pick_ks<false>(ks, nt, sync);
    size_t smem = smem_of(nt);
    CU_TRY(cu_allow_max_smem((const void *)kern));
    int per_sm = 0, dev, sms = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, THREADS, smem));
    CU_TRY(cudaGetDevice(&dev));
    CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (per_sm * sms < blocks)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: persistent LSTM needs %d co-resident blocks, %d fit",
                          blocks, per_sm * sms);
    prm P;
    P.nb = nb, P.T = T, P.H = H, P.hp = hp, P.g4 = g4, P.ldx_b = ldx_b, P.ldy_b = ldy_b;
    P.w = w_hh, P.bias = bias, P.x = x, P.len = len, P.y = y;
    P.backoff = g_backoff_ns;
    /* control words, then the counter mode's buffer from the front, the tagged words at the end: the two
     * never overlap, so a tagged launch never reads a counter launch's halves as tags */
    char *sc = (char *)scratch;
    size_t ll_bytes = (size_t)2 * TAGGED_ROWS * hp * 4;
    size_t ll_off = scratch_bytes >= ll_bytes ? (scratch_bytes - ll_bytes) & ~(size_t)15 : 0;
    if ((uintptr_t)scratch % 16 || ll_off < (size_t)CTL_BYTES + (size_t)2 * nb * hp * 2)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: persistent LSTM scratch of %zu bytes too small", scratch_bytes);
    P.ctl = (unsigned *)sc;
    P.hb = (__half *)(sc + CTL_BYTES);
    P.ll = (unsigned long long *)(sc + ll_off);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)blocks);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeCooperative; /* co-residency of every block is required (spin waits) */
    attr[0].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, P));
    return RNNT_OK;
}
