/* cu_wave.cu — a layer wavefront of persistent LSTM recurrences in one kernel (see cu_wave.h). The
 * recurrence of each layer is cu_persist.cu's counter mode; what is new: several layers' blocks in one
 * grid, each layer with its own arrival counter and h double buffer, a progress counter per layer (steps
 * whose y rows are written), and the later layers' input projections in chunks inside the kernel. */
#include "cu_wave.h"

#include <stdint.h>
#include <stdlib.h>

#include "cu_persist.h"
#include "cu_persist_dev.cuh"

namespace {

constexpr int U = CU_PERSIST_U;
constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;
constexpr int RS = 36;          /* floats per (warp, column) row of the partial sums: 32 gate rows + pad */
constexpr int CCOLS = 16;       /* columns (step, row) per pass of the chunked input projection: 2 n-tiles */
constexpr int LINE = 32;        /* words per control line (128 bytes) */
constexpr size_t CTL_BYTES = 4096; /* layer l: arrivals at line 2l, progress at line 2l + 1; group done at line 2 MAX */
constexpr int MAX_ROWS = 32;    /* batch rows per launch (NT <= 4) */
constexpr size_t SMEM_BUDGET = 110 * 1024; /* per block, so that two blocks share an SM */
static_assert(4 * U == 32, "a block's gate rows are one warp's lanes");

struct wlayer {
    const __half *w_hh, *w_ih, *x;
    const float *bias;
    const int *len;
    __half *y;
    size_t ldx_b, ldy_b;
    int T, in_w, s;
};

struct wprm {
    wlayer L[CU_WAVE_MAX_LAYERS];
    int n, nb, H, hp, g4, chunk;
    unsigned *ctl;
    __half *hb; /* layer l: [2][nb][hp] at hb + l * 2 * nb * hp */
};

/* KS: k16 steps per warp of the recurrent product (K slice 16 KS); NT: n-tiles of 8 rows. */
template <bool HARD, int KS, int NT>
__global__ void __launch_bounds__(THREADS, 2) k_wave(const __grid_constant__ wprm P)
{
    static_assert(KS % 2 == 0, "16-byte h loads cover two k-steps");
    constexpr int NC = NT * 8;
    constexpr int NG = NT < 4 ? NT : 4;
    extern __shared__ __align__(16) float smem[];
    float *const part = smem;                          /* [2][WARPS][NC][RS] */
    float *const cpart = part + 2 * WARPS * NC * RS;   /* [WARPS][CCOLS][RS] */
    __half *const xin = (__half *)(cpart + WARPS * CCOLS * RS); /* [chunk][nb][32] input projection (fp16) */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const int nb = P.nb, H = P.H, hp = P.hp, C = P.chunk;
    const unsigned nblk = gridDim.x / (unsigned)P.n;
    const int li = (int)(blockIdx.x / nblk), j0 = (int)(blockIdx.x % nblk) * U;
    const wlayer &L = P.L[li];
    const int T = L.T;
    auto kch = [&](int v) { return 8 * (w * (2 * KS) + 4 * v + q); };

    uint32_t A[2][KS][4]; /* W_hh fragments in registers, as cu_persist.cu */
    load_whh_fragments<KS>(A, L.w_hh, H, hp, j0, w, g, q);

    const int gr = lane >> 3, ul = lane & 7, j = j0 + ul;
    const bool jv = j < H;
    const float bias_r = jv ? L.bias[gr * H + j] : 0.0f;
    float xb[NT], c[NT];
    int lenb[NT], lenf[NT];
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const int b = w + 8 * i;
        const bool v = b < nb && jv;
        xb[i] = v && li == 0 ? __fadd_rn(__half2float(L.x[b * L.ldx_b + gr * H + j]), bias_r) : 0.0f;
        c[i] = 0.0f;
        lenb[i] = b < nb ? L.len[b] : 0;
        const int bf = i * 8 + g;
        lenf[i] = bf < nb ? L.len[bf] : 0;
    }
    int lmax = 0;
    for (int b = 0; b < nb; b++) lmax = L.len[b] > lmax ? L.len[b] : lmax;
    const int Trun = lmax < T ? lmax : T;
    /* the layer before (li > 0): its steps run, its progress counter */
    int Tprev_run = 0;
    if (li > 0) {
        const wlayer &Lp = P.L[li - 1];
        int m = 0;
        for (int b = 0; b < nb; b++) m = Lp.len[b] > m ? Lp.len[b] : m;
        Tprev_run = m < Lp.T ? m : Lp.T;
    }
    const size_t hbs = (size_t)nb * hp;
    __half *const hb = P.hb + (size_t)li * 2 * hbs;
    unsigned *const ctr = P.ctl + LINE * (2 * li), *const prog = P.ctl + LINE * (2 * li + 1);
    unsigned published = 0; /* thread 0: steps of this block's y published on prog */

    /* input projection of steps [t0, t0 + C) (li > 0): x = fp16(W_ih in) per (step, row) column */
    auto chunk_proj = [&](int t0) {
        const wlayer &Lp = P.L[li - 1];
        const int s = L.s, in_w = L.in_w, nk = (in_w + 15) / 16; /* in_w is a multiple of 8, not always of 16 */
        /* columns (step, row) of the rows still live at t0 only: an encoder bucket of 8 slots holding one
         * utterance projects 1 row, not 8 */
        unsigned live = 0;
        for (int b = 0; b < nb; b++) live |= L.len[b] > t0 ? 1u << b : 0u;
        const int nl = __popc(live), cs = Trun - t0 < C ? Trun - t0 : C, ncols = cs * nl;
        auto row_of = [&](int col) { return (int)__fns(live, 0, col % nl + 1); }; /* the (col % nl)-th live row */
        int need = (t0 + cs) * s;
        need = need < Tprev_run ? need : Tprev_run;
        if (tid == 0 && need > 0) spin_until(P.ctl + LINE * (2 * li - 1), nblk * (unsigned)need, 0, 1u << 27);
        __syncthreads();
        /* this lane's 4 W_ih rows (mt 0: g, g + 8; mt 1: + 16) as element offsets, -1 past H */
        int wro[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int R = (r >> 1) * 16 + (r & 1) * 8 + g, jj = j0 + (R & 7);
            wro[r] = jj < H ? ((R >> 3) * H + jj) * in_w : -1;
        }
        for (int c0 = 0; c0 < ncols; c0 += CCOLS) {
            float acc[2][2][4];
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int mt = 0; mt < 2; mt++) acc[n][mt][0] = acc[n][mt][1] = acc[n][mt][2] = acc[n][mt][3] = 0.0f;
            /* this lane's B columns: (step tt, row b) */
            int src[2]; /* element offset of the column's stacked input row in the layer before's y */
            int lim[2]; /* producer steps < lim are live for this column (its row's length) */
            int base[2];
#pragma unroll
            for (int n = 0; n < 2; n++) {
                const int col = c0 + n * 8 + g;
                const bool cv = col < ncols;
                const int tl = cv ? col / nl : 0, b = cv ? row_of(col) : 0, tt = t0 + tl;
                src[n] = (int)(b * Lp.ldy_b + (size_t)tt * s * hp);
                base[n] = tt * s;
                lim[n] = cv ? Lp.len[b] : 0;
            }
#pragma unroll 2
            for (int ks = w; ks < nk; ks += WARPS) {
                const int k = ks * 16 + 2 * q;
                const bool k0 = k < in_w, k1 = k + 8 < in_w; /* the second half of the last k16 step may be past in_w */
                uint32_t a[2][4];
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    const int ra = 2 * mt, rb = 2 * mt + 1;
                    a[mt][0] = wro[ra] >= 0 && k0 ? __ldg((const unsigned *)(L.w_ih + wro[ra] + k)) : 0u;
                    a[mt][1] = wro[rb] >= 0 && k0 ? __ldg((const unsigned *)(L.w_ih + wro[rb] + k)) : 0u;
                    a[mt][2] = wro[ra] >= 0 && k1 ? __ldg((const unsigned *)(L.w_ih + wro[ra] + k + 8)) : 0u;
                    a[mt][3] = wro[rb] >= 0 && k1 ? __ldg((const unsigned *)(L.w_ih + wro[rb] + k + 8)) : 0u;
                }
#pragma unroll
                for (int n = 0; n < 2; n++) {
                    const bool v0 = k0 && base[n] + k / hp < lim[n], v1 = k1 && base[n] + (k + 8) / hp < lim[n];
                    const uint32_t b0 = v0 ? __ldcg((const unsigned *)(Lp.y + src[n] + k)) : 0u;
                    const uint32_t b1 = v1 ? __ldcg((const unsigned *)(Lp.y + src[n] + k + 8)) : 0u;
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) mma16816(acc[n][mt], a[mt], b0, b1);
                }
            }
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int mt = 0; mt < 2; mt++) {
                    const int col = n * 8 + 2 * q, row = mt * 16 + g;
                    float *p = cpart + ((size_t)w * CCOLS + col) * RS + row;
                    p[0] = acc[n][mt][0];
                    p[RS] = acc[n][mt][1];
                    p[8] = acc[n][mt][2];
                    p[RS + 8] = acc[n][mt][3];
                }
            __syncthreads();
            for (int i = tid; i < CCOLS * 32; i += THREADS) {
                const int col = i >> 5, R = i & 31;
                if (c0 + col >= ncols) continue;
                const float *p = cpart + (size_t)col * RS + R;
                float sum = p[0];
#pragma unroll
                for (int k = 1; k < WARPS; k++) sum = __fadd_rn(sum, p[(size_t)k * CCOLS * RS]);
                const int cc = c0 + col;
                xin[((size_t)(cc / nl) * nb + row_of(cc)) * 32 + R] = __float2half_rn(sum);
            }
            __syncthreads();
        }
    };

    for (int t = 0; t < Trun; t++) {
        float *pt = part + (size_t)(t & 1) * WARPS * NC * RS;
        if (li > 0 && t % C == 0) chunk_proj(t);
        if (t > 0) {
#pragma unroll
            for (int n0 = 0; n0 < NT; n0 += NG) {
                uint32_t Bf[NG][KS][2];
                const __half *src = hb + (size_t)((t - 1) & 1) * hbs;
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
        __half hy[NT];
#pragma unroll
        for (int i = 0; i < NT; i++) {
            const int b = w + 8 * i;
            if (b >= nb) break;
            if (t >= lenb[i]) {
                hy[i] = __float2half_rn(0.0f);
                continue;
            }
            float v = li == 0 ? xb[i]
                              : __fadd_rn(__half2float(xin[((size_t)(t % C) * nb + b) * 32 + lane]), bias_r);
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
            if (lane < 8 && jv && t + 1 < lenb[i]) hb[(size_t)(t & 1) * hbs + (size_t)b * hp + j] = hh;
            hy[i] = hh;
        }
        auto finish = [&]() {
#pragma unroll
            for (int i = 0; i < NT; i++) {
                const int b = w + 8 * i;
                if (b >= nb) break;
                if (lane < 8 && jv) L.y[b * L.ldy_b + (size_t)t * hp + j] = hy[i];
                if (li == 0 && t + 1 < lenb[i] && jv)
                    xb[i] = __fadd_rn(__half2float(L.x[b * L.ldx_b + (size_t)(t + 1) * P.g4 + gr * H + j]), bias_r);
            }
            if (j0 == 0 && hp > H)
                for (int i = tid; i < nb * (hp - H); i += THREADS) {
                    int b = i / (hp - H), col = H + i % (hp - H);
                    L.y[b * L.ldy_b + (size_t)t * hp + col] = __float2half_rn(0.0f);
                }
        };
        if (t + 1 < Trun) {
            __syncthreads();
            if (tid == 0) {
                red_release_add(ctr, 1u);
                /* y of steps < t are written (the block barrier above follows step t - 1's stores) */
                if ((unsigned)t > published) red_release_add(prog, (unsigned)t - published), published = (unsigned)t;
            }
            finish();
            if (tid == 0) spin_until(ctr, nblk * (unsigned)(t + 1), 0, 1u << 27);
            __syncthreads();
        } else {
            finish();
        }
    }
    if (Trun < T) {
        const int n_t = T - Trun;
        for (int i = tid; i < nb * n_t * U; i += THREADS) {
            const int u = i % U, r = i / U, b = r % nb, tt = Trun + r / nb;
            if (j0 + u < H) L.y[b * L.ldy_b + (size_t)tt * hp + j0 + u] = __float2half_rn(0.0f);
        }
        if (j0 == 0 && hp > H)
            for (int i = tid; i < nb * n_t * (hp - H); i += THREADS) {
                const int col = H + i % (hp - H), r = i / (hp - H), b = r % nb, tt = Trun + r / nb;
                L.y[b * L.ldy_b + (size_t)tt * hp + col] = __float2half_rn(0.0f);
            }
    }
    __syncthreads();
    if (tid == 0) {
        if ((unsigned)T > published) red_release_add(prog, (unsigned)T - published);
        /* the last block of the whole group resets every counter (no block waits any more) */
        __threadfence();
        unsigned *done = P.ctl + LINE * (2 * CU_WAVE_MAX_LAYERS);
        if (atomicAdd(done, 1u) == gridDim.x - 1) {
            for (int l = 0; l < 2 * CU_WAVE_MAX_LAYERS; l++) P.ctl[LINE * l] = 0;
            *done = 0;
            __threadfence();
        }
    }
}

typedef void (*kern_t)(wprm);

template <bool HARD, int KS>
kern_t pick_nt(int nt)
{
    return nt == 1 ? k_wave<HARD, KS, 1> : nt == 2 ? k_wave<HARD, KS, 2> : k_wave<HARD, KS, 4>;
}
template <bool HARD>
kern_t pick(int ks, int nt)
{
    return ks == 2 ? pick_nt<HARD, 2>(nt) : ks == 4 ? pick_nt<HARD, 4>(nt) : pick_nt<HARD, 8>(nt);
}
int ks_of(int H) { return H <= 2 * 16 * WARPS ? 2 : H <= 4 * 16 * WARPS ? 4 : 8; }
int nt_of(int nb) { return nb <= 8 ? 1 : nb <= 16 ? 2 : 4; }
size_t smem_fixed(int nt) { return ((size_t)2 * WARPS * nt * 8 * RS + (size_t)WARPS * CCOLS * RS) * sizeof(float); }

} // namespace

int cu_wave_fits(int n, int H, int nb_max)
{
    int dev, sms = 0;
    if (n < 1 || n > CU_WAVE_MAX_LAYERS || H < 1 || H > CU_PERSIST_MAX_H || nb_max < 1 || nb_max > MAX_ROWS) return 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    int nt = nt_of(nb_max);
    if (smem_fixed(nt) + (size_t)nb_max * 64 > SMEM_BUDGET) return 0;
    kern_t k = pick<false>(ks_of(H), nt);
    size_t smem = SMEM_BUDGET;
    int per_sm = 0;
    if (cu_allow_max_smem((const void *)k) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, THREADS, smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return per_sm * sms >= n * cu_div_up(H, U);
}

size_t cu_wave_scratch_bytes(int n, int nb_max, int hp) { return CTL_BYTES + (size_t)n * 2 * nb_max * hp * 2 + 16; }

rnnt_status cu_lstm_wave(cudaStream_t stream, rnnt_lstm_act act, int nb, int n, const cu_wave_layer *layers, int chunk,
                         void *scratch, size_t scratch_bytes, char *err, size_t errlen)
{
    if (nb <= 0 || n <= 0) return RNNT_OK;
    const int H = layers[0].H, hp = layers[0].hp;
    if (n > CU_WAVE_MAX_LAYERS || nb > MAX_ROWS || hp % 8)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: wavefront of %d layers, %d rows not supported", n, nb);
    for (int l = 0; l < n; l++) {
        const cu_wave_layer *L = &layers[l];
        if (L->H != H || L->hp != hp || L->g4 != layers[0].g4)
            return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: wavefront layers differ in size");
        if (l > 0 && (L->stack_in < 1 || L->in_w != L->stack_in * hp || L->T * L->stack_in > layers[l - 1].T || !L->w_ih))
            return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: wavefront layer %d: input %d != %d x %d", l, L->in_w,
                              L->stack_in, hp);
    }
    if (scratch_bytes < cu_wave_scratch_bytes(n, nb, hp) - 16 || (uintptr_t)scratch % 16)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: wavefront scratch of %zu bytes too small", scratch_bytes);
    const int nt = nt_of(nb), ks = ks_of(H), nblk = cu_div_up(H, U);
    size_t fixed = smem_fixed(nt);
    int C = chunk > 0 ? chunk : CU_WAVE_CHUNK_DEFAULT;
    int cmax = (int)((SMEM_BUDGET - fixed) / ((size_t)nb * 64));
    if (C > cmax) C = cmax;
    if (C < 1) return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: wavefront shared memory too small");
    size_t smem = fixed + (size_t)C * nb * 64;
    kern_t kern = act == RNNT_ACT_HARD ? pick<true>(ks, nt) : pick<false>(ks, nt);
    CU_TRY(cu_allow_max_smem((const void *)kern));
    int per_sm = 0, dev, sms = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, THREADS, smem));
    CU_TRY(cudaGetDevice(&dev));
    CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (per_sm * sms < n * nblk)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: wavefront needs %d co-resident blocks, %d fit", n * nblk,
                          per_sm * sms);
    wprm P = {};
    for (int l = 0; l < n; l++) {
        const cu_wave_layer *L = &layers[l];
        P.L[l].w_hh = L->w_hh, P.L[l].w_ih = L->w_ih, P.L[l].x = L->x, P.L[l].bias = L->bias, P.L[l].len = L->len;
        P.L[l].y = L->y, P.L[l].ldx_b = L->ldx_b, P.L[l].ldy_b = L->ldy_b, P.L[l].T = L->T, P.L[l].in_w = L->in_w;
        P.L[l].s = l > 0 ? L->stack_in : 1;
    }
    P.n = n, P.nb = nb, P.H = H, P.hp = hp, P.g4 = layers[0].g4, P.chunk = C;
    P.ctl = (unsigned *)scratch;
    P.hb = (__half *)((char *)scratch + CTL_BYTES);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(n * nblk));
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeCooperative; /* every block co-resident (spin waits) */
    attr[0].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, P));
    return RNNT_OK;
}

/* ---------------------------------------------------------------------------------------------------
 * Every layer in ONE persistent kernel with the recurrent weights on chip (cu_lstm_wave_chip, issue 16
 * §1; counts in kernels/dev/NOTES.md, "All layers in flight, W_hh on chip"). One block of 512 threads
 * per SM owns the units j0 .. j0 + 7 of EVERY layer: the 32 gate rows of each layer's W_hh, 64 KB in
 * fp16. Layers 0 and 1 keep theirs in registers (64 fragment registers per thread), layers 2.. in shared
 * memory as the same fragments (one 16-byte load per lane and (m-tile, k-step)). Warp w multiplies the
 * K slice 64 w .. 64 w + 63 of every layer (16 partial sums per gate row, added in warp order). One
 * arrival counter for the whole grid: one barrier per wavefront step, every layer's step in it. Layer l
 * runs its step t at wavefront step off_l + t R_l (R_l: the product of the time stacks before it);
 * layers l >= 1 project their input, W_ih [x_t s .. x_t s + s - 1], for C steps at once in the shadow
 * of the barrier before their chunk starts (W_ih rows read from L2 once per chunk), the fp16 results in
 * a per-block global ring. */
namespace {

constexpr int CH_THREADS = 512;
constexpr int CH_WARPS = CH_THREADS / 32;
constexpr int CH_KS = 4;                 /* k16 steps per warp: K slice 64, so H <= 1024 */
constexpr int CH_NR = 2;                 /* layers whose W_hh fragments live in registers */
constexpr int CH_PCOLS = 8;              /* (step, row) columns per projection pass */
constexpr int CH_MAX_ROWS = 8;           /* one n-tile */
constexpr size_t CH_WBYTES = (size_t)CH_WARPS * 2 * CH_KS * 32 * 16; /* one layer's fragments: 64 KB */

struct clayer {
    const __half *w_hh, *w_ih, *x;
    const float *bias;
    const int *len;
    __half *y;
    size_t ldx_b, ldy_b;
    int T, in_w, s, off, R;
};

struct cprm {
    clayer L[CU_WAVE_MAX_LAYERS];
    int n, nb, H, hp, g4, chunk, part_floats;
    int stage;     /* h of every layer copied into shared memory (cp.async) before the products */
    unsigned *ctl; /* [0] arrivals, [LINE] blocks done */
    __half *hb;    /* layer l: [2][nb][hp] at hb + l * 2 * nb * hp */
    __half *xin;   /* block k: [n][chunk][nb][32] at xin + k * n * chunk * nb * 32 */
};

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(src_bytes) : "memory");
}

/* LEAN: the projection passes one m-tile per sweep over K (8 W_ih + 4 input + 4 accumulator registers live, not
 * 16 + 4 + 8 and 4 row offsets) with the row addresses computed per sweep; ptxas then keeps every W_hh fragment in
 * registers (0 bytes of spills) where the two-m-tile sweep (LEAN = 0, session 5) makes it keep 24 of layer 0's
 * fragment registers in local memory and reload them (12 LDL.64) before every step's products. Same sums in the
 * same order. Measured no faster at B = 1 and slower at B = 2-3 (twice the dependent load rounds per pass): off by
 * default (CU_WAVE_CHIP_LEAN_DEFAULT; kernels/dev/NOTES.md, "The on-chip wavefront, session 7"). */
template <bool HARD, int NR, bool LEAN>
__global__ void __launch_bounds__(CH_THREADS, 1) k_wave_chip(const __grid_constant__ cprm P)
{
    constexpr int KS = CH_KS, WARPS = CH_WARPS;
    extern __shared__ __align__(16) unsigned char csm[];
    const int n = P.n, nb = P.nb, H = P.H, hp = P.hp, C = P.chunk;
    uint4 *const wsm = (uint4 *)csm;                                  /* [n - NR][WARPS][2][KS][32] */
    float *const part = (float *)(csm + (size_t)(n - NR) * CH_WBYTES); /* steps: [n][WARPS][nb][RS]; projections: [WARPS][PCOLS][RS] */
    __half *const hs = (__half *)(part + P.part_floats);                /* stage: [n][nb][hp] */
    int *const slen = (int *)(hs + (P.stage ? (size_t)n * nb * hp : 0)); /* [n][nb], then trun [n] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const unsigned nblk = gridDim.x;
    const int j0 = (int)blockIdx.x * U;
    auto kch = [&](int v) { return 8 * (w * (2 * KS) + 4 * v + q); };

    uint32_t A[NR][2][KS][4];
#pragma unroll
    for (int l = 0; l < NR; l++) load_whh_fragments<KS>(A[l], P.L[l].w_hh, H, hp, j0, w, g, q);
    for (int l = NR; l < n; l++) {
        uint32_t F[2][KS][4];
        load_whh_fragments<KS>(F, P.L[l].w_hh, H, hp, j0, w, g, q);
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int s = 0; s < KS; s++)
                wsm[((((l - NR) * WARPS + w) * 2 + mt) * KS + s) * 32 + lane] =
                    make_uint4(F[mt][s][0], F[mt][s][1], F[mt][s][2], F[mt][s][3]);
    }
    for (int i = tid; i < n * nb; i += CH_THREADS) slen[i] = P.L[i / nb].len[i % nb];
    __syncthreads();
    /* steps each layer runs (its longest row), and the wavefront steps in all */
    int *const trun = slen + n * nb; /* [n] */
    int W = 0;
    for (int l = 0; l < n; l++) {
        int m = 0;
        for (int b = 0; b < nb; b++) m = slen[l * nb + b] > m ? slen[l * nb + b] : m;
        m = m < P.L[l].T ? m : P.L[l].T;
        if (m > 0) {
            const int e = P.L[l].off + (m - 1) * P.L[l].R + 1;
            W = e > W ? e : W;
        }
        if (tid == 0) trun[l] = m;
    }
    __syncthreads();
    /* the schedule, one wavefront step ahead, by lanes l < n of warp 1 (integer divisions by runtime
     * values cost ~30 instructions each: once per layer and step, not in every thread): sst[l] = layer l's
     * step at the current wavefront step (-1: none), spj[l] = the step whose chunk projection is due in the
     * shadow of this step's barrier (its chunk starts at the next wavefront step; -1: none); two copies by
     * the step's parity, so the next step's can be written while this step's projections read theirs */
    int *const sst = trun + n, *const spj = sst + 2 * n; /* [2][n] each */
    auto step_div = [&](int l, int wv) {
        const int d = wv - P.L[l].off;
        if (d < 0 || d % P.L[l].R) return -1;
        const int t = d / P.L[l].R;
        return t < trun[l] ? t : -1;
    };
    auto schedule = [&](int wv) {
        if (w == 1 && lane < n) {
            sst[(wv & 1) * n + lane] = step_div(lane, wv);
            const int t1 = step_div(lane, wv + 1);
            spj[(wv & 1) * n + lane] = lane > 0 && t1 >= 0 && t1 % C == 0 ? t1 : -1;
        }
    };
    schedule(0);
    __syncthreads();
    auto step_of = [&](int l, int wv) { return sst[(wv & 1) * n + l]; }; /* wv: always the current step */

    /* the cell's warp: layer cl, row cb (warps n nb.. only multiply) */
    const bool cw = w < n * nb;
    const int cl = cw ? w / nb : 0, cb = cw ? w % nb : 0;
    const int gr = lane >> 3, ul = lane & 7, j = j0 + ul;
    const bool jv = j < H;
    const float bias_r = cw && jv ? P.L[cl].bias[gr * H + j] : 0.0f;
    const int clen = cw ? slen[cl * nb + cb] : 0;
    float c = 0.0f;
    const size_t hbs = (size_t)nb * hp;
    __half *const xin = P.xin + (size_t)blockIdx.x * n * C * nb * 32;

    /* input projections of the chunks that start at wavefront step ws (layers >= 1) */
    auto project = [&](int ws) { /* ws = wv + 1: the chunk starts were scheduled with step wv */
        for (int l = 1; l < n; l++) {
            const clayer &L = P.L[l], &Lp = P.L[l - 1];
            const int t0 = spj[((ws - 1) & 1) * n + l]; /* the chunk starting at wavefront step ws, if any */
            if (t0 < 0) continue;
            const int cs = trun[l] - t0 < C ? trun[l] - t0 : C, ncols = cs * nb, s = L.s, in_w = L.in_w;
            const int jj = j0 + g; /* LEAN: this lane's W_ih rows are gate rows 2 mt, 2 mt + 1 of unit jj */
            int wro[4]; /* this lane's W_ih rows: R = 16 (r / 2) + 8 (r % 2) + g, -1 past H */
            if (!LEAN)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int R = (r >> 1) * 16 + (r & 1) * 8 + g, jr = j0 + (R & 7);
                    wro[r] = jr < H ? ((R >> 3) * H + jr) : -1;
                }
            for (int c0 = 0; c0 < ncols; c0 += CH_PCOLS) {
                const int col = c0 + g;
                const bool cv = col < ncols;
                const int tt = t0 + (cv ? col / nb : 0), b = cv ? col % nb : 0;
                const __half *in = Lp.y + b * Lp.ldy_b + (size_t)tt * s * hp;
                if (LEAN) {
#pragma unroll 1
                    for (int mt = 0; mt < 2; mt++) { /* one m-tile a sweep */
                        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        const __half *wa = L.w_ih + (size_t)(2 * mt * H + jj) * in_w, *wb = wa + (size_t)H * in_w;
#pragma unroll 1
                        for (int kk = w * 32; kk < in_w; kk += WARPS * 32) {
                            const int k = kk + 8 * q;
                            const uint4 z = make_uint4(0, 0, 0, 0);
                            const bool kv = k < in_w;
                            const uint4 bv = cv && kv ? __ldcg((const uint4 *)(in + k)) : z;
                            const uint4 va = jj < H && kv ? __ldg((const uint4 *)(wa + k)) : z;
                            const uint4 vb = jj < H && kv ? __ldg((const uint4 *)(wb + k)) : z;
                            const uint32_t a0[4] = {va.x, vb.x, va.y, vb.y};
                            const uint32_t a1[4] = {va.z, vb.z, va.w, vb.w};
                            mma16816(acc, a0, bv.x, bv.y);
                            mma16816(acc, a1, bv.z, bv.w);
                        }
                        float *p = part + ((size_t)w * CH_PCOLS + 2 * q) * RS + mt * 16 + g;
                        p[0] = acc[0];
                        p[RS] = acc[1];
                        p[8] = acc[2];
                        p[RS + 8] = acc[3];
                    }
                } else {
                    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 1
                    for (int kk = w * 32; kk < in_w; kk += WARPS * 32) {
                        const int k = kk + 8 * q;
                        const uint4 z = make_uint4(0, 0, 0, 0);
                        const bool kv = k < in_w;
                        const uint4 bv = cv && kv ? __ldcg((const uint4 *)(in + k)) : z;
#pragma unroll
                        for (int mt = 0; mt < 2; mt++) { /* the four rows' loads in flight together */
                            const int ra = wro[2 * mt], rb = wro[2 * mt + 1];
                            const uint4 va = ra >= 0 && kv ? __ldg((const uint4 *)(L.w_ih + (size_t)ra * in_w + k)) : z;
                            const uint4 vb = rb >= 0 && kv ? __ldg((const uint4 *)(L.w_ih + (size_t)rb * in_w + k)) : z;
                            const uint32_t a0[4] = {va.x, vb.x, va.y, vb.y};
                            const uint32_t a1[4] = {va.z, vb.z, va.w, vb.w};
                            mma16816(acc[mt], a0, bv.x, bv.y);
                            mma16816(acc[mt], a1, bv.z, bv.w);
                        }
                    }
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        float *p = part + ((size_t)w * CH_PCOLS + 2 * q) * RS + mt * 16 + g;
                        p[0] = acc[mt][0];
                        p[RS] = acc[mt][1];
                        p[8] = acc[mt][2];
                        p[RS + 8] = acc[mt][3];
                    }
                }
                __syncthreads();
                if (tid < CH_PCOLS * 32) {
                    const int cc = tid >> 5, R = tid & 31;
                    if (c0 + cc < ncols) {
                        const float *p = part + (size_t)cc * RS + R;
                        float sum = p[0];
#pragma unroll
                        for (int k = 1; k < WARPS; k++) sum = __fadd_rn(sum, p[(size_t)k * CH_PCOLS * RS]);
                        const int col2 = c0 + cc, t2 = t0 + col2 / nb, b2 = col2 % nb;
                        xin[(((size_t)l * C + t2 % C) * nb + b2) * 32 + R] = __float2half_rn(sum);
                    }
                }
                __syncthreads();
            }
        }
    };

    for (int wv = 0; wv < W; wv++) {
        /* the cell's input projection, early (its latency under the products) */
        const int ct = cw ? step_of(cl, wv) : -1;
        float xv = 0.0f;
        if (ct >= 0 && ct < clen) {
            const clayer &L = P.L[cl];
            xv = cl == 0 ? (jv ? __half2float(__ldg(L.x + cb * L.ldx_b + (size_t)ct * P.g4 + gr * H + j)) : 0.0f)
                         : __half2float(__ldcg(xin + (((size_t)cl * C + ct % C) * nb + cb) * 32 + lane));
        }
        if (P.stage) { /* every layer's h rows in one round of copies, not one L2 round trip per layer */
            const int nch = hp / 8;
            for (int l = 0; l < n; l++) {
                const int t = step_of(l, wv);
                if (t <= 0) continue;
                const __half *src = P.hb + ((size_t)l * 2 + ((t - 1) & 1)) * hbs;
                for (int i = tid; i < nb * nch; i += CH_THREADS) {
                    const int b = i / nch, k = (i % nch) * 8;
                    cp_async16(hs + ((size_t)l * nb + b) * hp + k, src + (size_t)b * hp + k, t < slen[l * nb + b] ? 16 : 0);
                }
            }
            asm volatile("cp.async.wait_all;\n" ::: "memory");
            __syncthreads();
        }
        /* the recurrent products: every layer's step of this wavefront step (register layers unrolled so
         * their fragments stay in registers; shared-memory layers in a plain loop) */
        auto product = [&](int l, auto afrag) {
            const int t = step_of(l, wv);
            if (t <= 0) return; /* no step, or the first (h = 0) */
            uint32_t Bf[KS][2];
            const __half *src = P.hb + ((size_t)l * 2 + ((t - 1) & 1)) * hbs;
            const bool rv = g < nb && t < slen[l * nb + (g < nb ? g : 0)];
#pragma unroll
            for (int v = 0; v < KS / 2; v++) {
                const int k = kch(v);
                uint4 d = make_uint4(0, 0, 0, 0);
                if (rv && k < H)
                    d = P.stage ? *(const uint4 *)(hs + ((size_t)l * nb + g) * hp + k)
                                : __ldcg((const uint4 *)(src + (size_t)g * hp + k));
                if (k + 8 > H) {
                    d.x = mask2(d.x, k, H), d.y = mask2(d.y, k + 2, H);
                    d.z = mask2(d.z, k + 4, H), d.w = mask2(d.w, k + 6, H);
                }
                Bf[2 * v][0] = d.x, Bf[2 * v][1] = d.y;
                Bf[2 * v + 1][0] = d.z, Bf[2 * v + 1][1] = d.w;
            }
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int s = 0; s < KS; s++) {
                    uint32_t a[4];
                    afrag(mt, s, a);
                    mma16816(acc, a, Bf[s][0], Bf[s][1]);
                }
                float *p = part + (((size_t)l * WARPS + w) * nb + 2 * q) * RS + mt * 16 + g;
                if (2 * q < nb) p[0] = acc[0], p[8] = acc[2];
                if (2 * q + 1 < nb) p[RS] = acc[1], p[RS + 8] = acc[3];
            }
        };
#pragma unroll
        for (int l = 0; l < NR; l++)
            if (l < n)
                product(l, [&](int mt, int s, uint32_t(&a)[4]) {
                    a[0] = A[l][mt][s][0], a[1] = A[l][mt][s][1], a[2] = A[l][mt][s][2], a[3] = A[l][mt][s][3];
                });
#pragma unroll 1
        for (int l = NR; l < n; l++)
            product(l, [&](int mt, int s, uint32_t(&a)[4]) {
                const uint4 f = wsm[((((l - NR) * WARPS + w) * 2 + mt) * KS + s) * 32 + lane];
                a[0] = f.x, a[1] = f.y, a[2] = f.z, a[3] = f.w;
            });
        __syncthreads();
        if (ct >= 0 && ct < clen) {
            float v = __fadd_rn(xv, bias_r);
            if (ct > 0) {
                const float *p = part + ((size_t)cl * WARPS * nb + cb) * RS + lane;
                float sum = p[0];
#pragma unroll
                for (int k = 1; k < WARPS; k++) sum = __fadd_rn(sum, p[(size_t)k * nb * RS]);
                v = __fadd_rn(v, sum);
            }
            const float ai = __shfl_sync(0xffffffffu, v, ul), af = __shfl_sync(0xffffffffu, v, 8 + ul);
            const float ag = __shfl_sync(0xffffffffu, v, 16 + ul), ao = __shfl_sync(0xffffffffu, v, 24 + ul);
            const float ig = gate_sig<HARD>(ai), fg = gate_sig<HARD>(af), gg = gate_tanh<HARD>(ag);
            const float og = gate_sig<HARD>(ao);
            const float cn = __fadd_rn(__fmul_rn(fg, c), __fmul_rn(ig, gg));
            const float hn = __fmul_rn(og, gate_tanh<HARD>(cn));
            c = cn;
            if (lane < 8 && jv) {
                const __half hh = __float2half_rn(hn);
                if (ct + 1 < clen) P.hb[((size_t)cl * 2 + (ct & 1)) * hbs + (size_t)cb * hp + j] = hh;
                P.L[cl].y[cb * P.L[cl].ldy_b + (size_t)ct * hp + j] = hh;
            }
        }
        schedule(wv + 1); /* the other parity's copy: nothing reads it until the next step */
        if (wv + 1 < W) {
            __syncthreads();
            if (tid == 0) red_release_add(P.ctl, 1u);
            project(wv + 1); /* its inputs were complete at the barrier before this step */
            if (tid == 0) spin_until(P.ctl, nblk * (unsigned)(wv + 1), 0, 1u << 27);
            __syncthreads();
        }
    }
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        unsigned *done = P.ctl + LINE;
        if (atomicAdd(done, 1u) == nblk - 1) { /* every block is past its last wait */
            P.ctl[0] = 0;
            *done = 0;
            __threadfence();
        }
    }
}

typedef void (*ckern_t)(cprm);
template <bool HARD>
ckern_t chip_kernel_nr(int nr, bool lean)
{
    if (nr == 1) return lean ? k_wave_chip<HARD, 1, true> : k_wave_chip<HARD, 1, false>;
    return lean ? k_wave_chip<HARD, 2, true> : k_wave_chip<HARD, 2, false>;
}
ckern_t chip_kernel(bool hard, int nr, bool lean)
{
    return hard ? chip_kernel_nr<true>(nr, lean) : chip_kernel_nr<false>(nr, lean);
}
int chip_nr(int n) { return n < CH_NR ? n : CH_NR; }
int chip_part_floats(int n, int nb)
{
    int a = n * CH_WARPS * nb * RS, b = CH_WARPS * CH_PCOLS * RS;
    return a > b ? a : b;
}
size_t chip_smem(int n, int nb, int hp, int stage)
{
    return (size_t)(n - chip_nr(n)) * CH_WBYTES + (size_t)chip_part_floats(n, nb) * 4 + (stage ? (size_t)n * nb * hp * 2 : 0) +
           (size_t)n * (nb + 5) * 4;
}

} // namespace

int cu_wave_chip_fits(int n, int H, int nb)
{
    int dev, sms = 0, optin = 0;
    /* one warp per (layer, row) cell: n nb <= 16 */
    if (n < 1 || n > CU_WAVE_MAX_LAYERS || H < 1 || H > CH_WARPS * 16 * CH_KS || nb < 1 || nb > CH_MAX_ROWS || n * nb > CH_WARPS)
        return 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    size_t smem = chip_smem(n, nb, 8, 0);
    if (smem > (size_t)optin) return 0;
    ckern_t k = chip_kernel(false, chip_nr(n), CU_WAVE_CHIP_LEAN_DEFAULT);
    int per_sm = 0;
    if (cu_allow_max_smem((const void *)k) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, CH_THREADS, smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return per_sm * sms >= cu_div_up(H, U);
}

size_t cu_wave_chip_scratch_bytes(int n, int nb, int H, int hp, int chunk)
{
    if (chunk <= 0) chunk = CU_WAVE_CHUNK_DEFAULT;
    return 256 + (size_t)n * 2 * nb * hp * 2 + (size_t)cu_div_up(H, U) * n * chunk * nb * 32 * 2 + 16;
}

rnnt_status cu_lstm_wave_chip(cudaStream_t stream, rnnt_lstm_act act, int nb, int n, const cu_wave_layer *layers, int chunk,
                              int stagger, int stage, void *scratch, size_t scratch_bytes, char *err, size_t errlen)
{
    if (nb <= 0 || n <= 0) return RNNT_OK;
    const int H = layers[0].H, hp = layers[0].hp;
    const int C = chunk > 0 ? chunk : CU_WAVE_CHUNK_DEFAULT;
    if (stagger < 0) stagger = C / 4;
    if (n > CU_WAVE_MAX_LAYERS || nb > CH_MAX_ROWS || n * nb > CH_WARPS || hp % 8 || H > CH_WARPS * 16 * CH_KS)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: on-chip wavefront of %d layers, %d rows, H %d not supported",
                          n, nb, H);
    for (int l = 0; l < n; l++) {
        const cu_wave_layer *L = &layers[l];
        if (L->H != H || L->hp != hp || L->g4 != layers[0].g4)
            return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: wavefront layers differ in size");
        if (l > 0 && (L->stack_in < 1 || L->in_w != L->stack_in * hp || L->T * L->stack_in > layers[l - 1].T || !L->w_ih))
            return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: wavefront layer %d: input %d != %d x %d", l, L->in_w,
                              L->stack_in, hp);
    }
    if (scratch_bytes < cu_wave_chip_scratch_bytes(n, nb, H, hp, C) - 16 || (uintptr_t)scratch % 16)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: on-chip wavefront scratch of %zu bytes too small", scratch_bytes);
    const int nblk = cu_div_up(H, U), nr = chip_nr(n);
    int optin = 0, dev0;
    CU_TRY(cudaGetDevice(&dev0));
    CU_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev0));
    /* stage < 0: the defaults (no staging; the lean projection as CU_WAVE_CHIP_LEAN_DEFAULT or RNNT_CUDA_WAVE_CHIP_LEAN) */
    bool lean = CU_WAVE_CHIP_LEAN_DEFAULT;
    if (stage < 0) {
        const char *env = getenv("RNNT_CUDA_WAVE_CHIP_LEAN");
        if (env && *env) lean = atoi(env) != 0;
        stage = 0;
    } else {
        lean = (stage & CU_WAVE_CHIP_LEAN) != 0;
    }
    /* staging measured slower (lab run 1: B = 1 3.55 vs 2.91 ms): only when asked for (bit 1) */
    stage = (stage & 1) && chip_smem(n, nb, hp, 1) <= (size_t)optin;
    const size_t smem = chip_smem(n, nb, hp, stage);
    ckern_t kern = chip_kernel(act == RNNT_ACT_HARD, nr, lean);
    CU_TRY(cu_allow_max_smem((const void *)kern));
    int per_sm = 0, dev, sms = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, CH_THREADS, smem));
    CU_TRY(cudaGetDevice(&dev));
    CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (per_sm * sms < nblk)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: on-chip wavefront needs %d co-resident blocks, %d fit", nblk,
                          per_sm * sms);
    cprm P = {};
    int off = 0, R = 1;
    for (int l = 0; l < n; l++) {
        const cu_wave_layer *L = &layers[l];
        const int s = l > 0 ? L->stack_in : 1;
        if (l > 0) off += (C * s - 1) * R + 2 + stagger; /* chunk 0's inputs done two steps before it starts */
        R *= s;
        P.L[l].w_hh = L->w_hh, P.L[l].w_ih = L->w_ih, P.L[l].x = L->x, P.L[l].bias = L->bias, P.L[l].len = L->len;
        P.L[l].y = L->y, P.L[l].ldx_b = L->ldx_b, P.L[l].ldy_b = L->ldy_b, P.L[l].T = L->T, P.L[l].in_w = L->in_w;
        P.L[l].s = s, P.L[l].off = off, P.L[l].R = R;
        /* y is written for steps < len only: the rest (and the pad columns) are zero */
        CU_TRY(cudaMemset2DAsync(L->y, L->ldy_b * 2, 0, (size_t)L->T * hp * 2, (size_t)nb, stream));
    }
    P.n = n, P.nb = nb, P.H = H, P.hp = hp, P.g4 = layers[0].g4, P.chunk = C, P.part_floats = chip_part_floats(n, nb);
    P.stage = stage;
    P.ctl = (unsigned *)scratch;
    P.hb = (__half *)((char *)scratch + 256);
    P.xin = P.hb + (size_t)n * 2 * nb * hp;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)nblk);
    cfg.blockDim = dim3(CH_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, P));
    return RNNT_OK;
}
