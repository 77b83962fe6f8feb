/* cu_kernels.cu — frontend, fused LSTM cell, fused joint+argmax, predictor step, decode control.
 *
 * Batch invariance: no kernel here reduces across rows, and every reduction inside a row runs in an
 * order fixed by the row's own sizes (lane-strided partial sums, then an xor butterfly, which gives
 * every lane the bitwise same sum since IEEE addition commutes). So a row's result never depends on
 * which other rows share its launch. */
#include "cu_kernels.h"
#include "cu_device.cuh"

#include <cub/block/block_scan.cuh>
#include <math.h>

namespace {

/* ---------------------------------------------------------------- frontend */

template <typename S>
__global__ void k_frontend(int T, int F, int fp, const float *__restrict__ raw, const int *__restrict__ off,
                           const int *__restrict__ frames, const float *__restrict__ mean,
                           const float *__restrict__ sd, S *__restrict__ x0)
{
    int b = blockIdx.y;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)T * fp) return;
    int t = (int)(i / fp), f = (int)(i % fp);
    float v = 0.0f;
    if (t < frames[b] && f < F) {
        float x = raw[((size_t)off[b] + t) * F + f];
        v = mean ? __fdiv_rn(__fsub_rn(x, mean[f]), sd[f]) : x;
    }
    cu_st(&x0[((size_t)b * T + t) * fp + f], v);
}

/* ---------------------------------------------------------------- LSTM cell */

template <typename S, bool HARD>
__global__ void k_lstm_pointwise(int H, int hp, const S *__restrict__ x, size_t ldx_b,
                                 const float *__restrict__ hproj, int ldh, const float *__restrict__ bias,
                                 float *__restrict__ c, int ldc, S *__restrict__ y, size_t ldy_b,
                                 S *__restrict__ hs, int ldhs, const int *__restrict__ len, int t)
{
    int b = blockIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= hp) return;
    S *yo = y + b * ldy_b + j;
    if (len && t >= len[b]) {
        cu_st(yo, 0.0f);
        return;
    }
    S *ho = hs + (size_t)b * ldhs + j;
    if (j >= H) {
        cu_st(yo, 0.0f);
        cu_st(ho, 0.0f);
        return;
    }
    const S *xr = x + b * ldx_b;
    float a[4];
#pragma unroll
    for (int g = 0; g < 4; g++) {
        float v = __fadd_rn(cu_ld(&xr[g * H + j]), bias[g * H + j]);
        if (hproj) v = __fadd_rn(v, hproj[(size_t)b * ldh + g * H + j]);
        a[g] = v;
    }
    float *cp = c + (size_t)b * ldc + j;
    float cn, hn;
    lstm_cell<HARD>(a, hproj ? *cp : 0.0f, &cn, &hn);
    *cp = cn;
    cu_st(yo, hn);
    cu_st(ho, hn);
}

/* ---------------------------------------------------------------- fused recurrent step (small batches) */

/* One warp per hidden unit j: the four gate rows of W_hh (from L2) dotted with h_{t-1} of every row
 * (from shared memory), lane-strided then an xor butterfly, then the cell update by lane b for row b.
 * BT: rows per launch (compile-time, so the accumulators stay in registers). */
__device__ __forceinline__ float2 cu_ld2(const float *p) { return *(const float2 *)p; }
__device__ __forceinline__ float2 cu_ld2(const __half *p) { return __half22float2(*(const __half2 *)p); }

template <typename S, bool HARD, int BT>
__global__ void __launch_bounds__(kWarps * 32)
    k_lstm_step_fused(int nb, int H, int hp, const S *__restrict__ w_hh, const S *__restrict__ h_in, S *__restrict__ h_out,
                      const S *__restrict__ x, size_t ldx_b, const float *__restrict__ bias, float *__restrict__ c,
                      S *__restrict__ y, size_t ldy_b, const int *__restrict__ len, int t)
{
    extern __shared__ __align__(16) unsigned char fsm[];
    S *hsm = (S *)fsm; /* [nb][hp] of h_{t-1}; the pad columns are zero (written so by the previous step) */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, j = blockIdx.x * kWarps + warp;
    if (t > 0) {
        for (int i = threadIdx.x; i < nb * hp; i += blockDim.x) hsm[i] = h_in[i];
        __syncthreads();
    }
    if (j >= hp) return;
    if (j >= H) { /* pad columns */
        if (lane < nb) {
            cu_st(&y[lane * ldy_b + j], 0.0f);
            cu_st(&h_out[(size_t)lane * hp + j], 0.0f);
        }
        return;
    }
    float acc[4][BT];
#pragma unroll
    for (int g = 0; g < 4; g++)
#pragma unroll
        for (int b = 0; b < BT; b++) acc[g][b] = 0.0f;
    if (t > 0) {
        /* pairs of columns (hp is even; W's pad columns are zero) */
        for (int k = 2 * lane; k < hp; k += 64) {
            float2 w[4];
#pragma unroll
            for (int g = 0; g < 4; g++) w[g] = cu_ld2(&w_hh[(size_t)(g * H + j) * hp + k]);
#pragma unroll
            for (int b = 0; b < BT; b++) {
                if (b >= nb) break;
                float2 hv = cu_ld2(&hsm[b * hp + k]);
#pragma unroll
                for (int g = 0; g < 4; g++) acc[g][b] = fmaf(w[g].y, hv.y, fmaf(w[g].x, hv.x, acc[g][b]));
            }
        }
#pragma unroll
        for (int g = 0; g < 4; g++)
#pragma unroll
            for (int b = 0; b < BT; b++) acc[g][b] = warp_sum(acc[g][b]);
    }
    float mine[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int b = 0; b < BT; b++)
        if (b == lane)
#pragma unroll
            for (int g = 0; g < 4; g++) mine[g] = acc[g][b];
    const int b = lane;
    if (b >= nb) return;
    S *yo = y + b * ldy_b + j;
    if (len && t >= len[b]) {
        cu_st(yo, 0.0f);
        return;
    }
    const S *xr = x + b * ldx_b;
    float a[4];
#pragma unroll
    for (int g = 0; g < 4; g++) {
        float v = __fadd_rn(cu_ld(&xr[g * H + j]), bias[g * H + j]);
        if (t > 0) v = __fadd_rn(v, mine[g]);
        a[g] = v;
    }
    float *cp = c + (size_t)b * hp + j;
    float cn, hn;
    lstm_cell<HARD>(a, t > 0 ? *cp : 0.0f, &cn, &hn);
    *cp = cn;
    cu_st(yo, hn);
    cu_st(&h_out[(size_t)b * hp + j], hn);
}

/* ---------------------------------------------------------------- joint + argmax */

template <typename S, bool RELU>
__global__ void k_joint_argmax(int J, int n_out, const float *__restrict__ fproj, int ldf, int fstride,
                               const int *__restrict__ fstride_dev, const float *__restrict__ gp, int ldg,
                               const S *__restrict__ wout, int ldw, const float *__restrict__ bout,
                               const int *__restrict__ tix, const int *__restrict__ done, int *__restrict__ kout,
                               float *__restrict__ pout)
{
    extern __shared__ float hid[]; /* J floats */
    __shared__ float wbest[kWarps], wsum[kWarps];
    __shared__ int widx[kWarps], wbad[kWarps];
    int b = blockIdx.x;
    if (done && done[b]) return;
    int stride = fstride_dev ? *fstride_dev : fstride;
    const float *f = fproj + ((size_t)b * stride + tix[b]) * ldf;
    const float *g = gp + (size_t)b * ldg;
    for (int j = threadIdx.x; j < J; j += blockDim.x) hid[j] = joint_act<RELU>(__fadd_rn(f[j], g[j]));
    __syncthreads();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float best = -INFINITY;
    /* sum over this warp's outputs of exp(z - best), in float: terms are <= 1 and at most a few per warp,
     * so float loses ~1e-7 relative against the CPU's double sum (the tests allow 1e-4); the double exps
     * here cost the greedy loop ~0.25 us per step at batch 1 (bench_engine, H100) */
    float sum = 0.0f;
    int bi = n_out, bad = 0;
    for (int o = warp; o < n_out; o += kWarps) {
        float z = joint_logit(wout + (size_t)o * ldw, hid, J, lane, bout[o]);
        if (!isfinite(z))
            bad = 1;
        else if (z > best) { /* o ascends: a tie keeps the lower index */
            sum = pout ? sum * expf(best - z) + 1.0f : 0.0f;
            best = z;
            bi = o;
        } else if (pout) {
            sum += expf(z - best);
        }
    }
    if (lane == 0) {
        wbest[warp] = best;
        wsum[warp] = sum;
        widx[warp] = bi;
        wbad[warp] = bad;
    }
    __syncthreads();
    /* warp 0 combines the warps' partials with shuffles (a serial loop in one thread cost the greedy
     * loop ~0.2 us per step at batch 1; kernels/dev/NOTES.md) */
    if (warp == 0) {
        int bo, anybad;
        float bv = best_of_warps(wbest, widx, wbad, 1, n_out, lane, &bo, &anybad);
        float p = pout ? softmax_of_best_warp(wbest, wsum, 1, lane, bv) : 0.0f;
        if (lane == 0) {
            kout[b] = (anybad || bo == n_out) ? -1 : bo;
            if (pout) pout[b] = (anybad || bo == n_out) ? 0.0f : p;
        }
    }
}

/* ---------------------------------------------------------------- predictor */

/* k_pred_layer / k_pred_proj: RB rows at a time (pred_layer_rows / pred_proj_rows, cu_device.cuh). */
template <typename S, bool HARD, int RB>
__global__ void k_pred_layer(int rows_per_block, const int *__restrict__ emit, const int *__restrict__ count,
                             const int *__restrict__ e, const int *__restrict__ k, const S *__restrict__ xemb,
                             const S *__restrict__ xh, size_t xpar, int ldx, int I, const S *__restrict__ w_ih,
                             int ld_ih, const S *__restrict__ w_hh, int ld_hh, const float *__restrict__ bias,
                             int H, S *__restrict__ h, size_t hpar, int ldh, float *__restrict__ c, int ldc)
{
    int n = *count;
    int r0 = blockIdx.y * rows_per_block;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int j = blockIdx.x * kWarps + warp;
    if (r0 >= n || j >= H) return; /* warp-uniform; no block barrier below */
    int r1 = min(n, r0 + rows_per_block);
    const S *wi[4], *wh[4];
#pragma unroll
    for (int g = 0; g < 4; g++) {
        wi[g] = w_ih + (size_t)(g * H + j) * ld_ih;
        wh[g] = w_hh + (size_t)(g * H + j) * ld_hh;
    }
    for (int r = r0; r < r1; r += RB) {
        int nr = min(RB, r1 - r);
        if (RB > 1 && nr == 1)
            pred_layer_rows<S, HARD, 1>(1, emit + r, e, k, xemb, xh, xpar, ldx, I, wi, wh, bias, H, j, lane, h, hpar,
                                        ldh, c, ldc);
        else
            pred_layer_rows<S, HARD, RB>(nr, emit + r, e, k, xemb, xh, xpar, ldx, I, wi, wh, bias, H, j, lane, h,
                                         hpar, ldh, c, ldc);
    }
}

template <typename S, int RB>
__global__ void k_pred_proj(int rows_per_block, const int *__restrict__ emit, const int *__restrict__ count,
                            const int *__restrict__ e, const S *__restrict__ h, size_t hpar, int ldh, int Hl,
                            const S *__restrict__ w, int ldw, const float *__restrict__ jb, int J,
                            float *__restrict__ gp, int ldg)
{
    int n = *count;
    int r0 = blockIdx.y * rows_per_block;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int o = blockIdx.x * kWarps + warp;
    if (r0 >= n || o >= J) return;
    int r1 = min(n, r0 + rows_per_block);
    const S *wr = w + (size_t)o * ldw;
    float bo = jb[o];
    for (int r = r0; r < r1; r += RB) {
        int nr = min(RB, r1 - r);
        if (RB > 1 && nr == 1)
            pred_proj_rows<S, 1>(1, emit + r, e, h, hpar, ldh, Hl, wr, bo, o, lane, gp, ldg);
        else
            pred_proj_rows<S, RB>(nr, emit + r, e, h, hpar, ldh, Hl, wr, bo, o, lane, gp, ldg);
    }
}

/* ---------------------------------------------------------------- decode control */

__global__ void k_dec_init(int nb, const int *__restrict__ t_enc_src, int V, cu_dec_state st)
{
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += gridDim.x * blockDim.x) {
        int T = t_enc_src[b];
        st.t[b] = 0;
        st.labels[b] = 0;
        st.t_enc[b] = T;
        st.n_tok[b] = 0;
        st.e[b] = 1;
        st.status[b] = 0;
        st.steps[b] = 0;
        st.skipped[b] = 0;
        st.done[b] = T <= 0;
        st.k[b] = V;
        st.emit[b] = b;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        st.counts[0] = nb;
        st.counts[1] = nb;
        st.counts[2] = 0;
        st.counts[3] = 0;
    }
}

constexpr int kUpdThreads = 256;

__global__ void __launch_bounds__(kUpdThreads) k_dec_update(int nb, cu_dec_rule rule, cu_dec_state st,
                                                            int use_cond, cudaGraphConditionalHandle cond,
                                                            int *active_host)
{
    int active = dec_update_block<kUpdThreads>(nb, rule, st, NULL, NULL);
    if (threadIdx.x == 0) {
        if (use_cond) cudaGraphSetConditional(cond, active > 0 ? 1u : 0u);
        if (active_host) *(volatile int *)active_host = active;
    }
}

__global__ void k_dec_pack(cu_dec_state st, int *out)
{
    int b = blockIdx.x;
    int *o = out + (size_t)b * CU_DEC_OUT_INTS(st.cap);
    int n = min(st.n_tok[b], st.cap);
    if (threadIdx.x == 0) {
        o[0] = st.n_tok[b];
        o[1] = st.steps[b];
        o[2] = st.skipped[b];
        o[3] = st.status[b];
        o[4] = st.t[b];
        o[5] = o[6] = o[7] = 0;
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        o[8 + i] = st.tokens[(size_t)b * st.cap + i];
        o[8 + n + i] = st.frames[(size_t)b * st.cap + i];
        o[8 + 2 * n + i] = st.probs ? __float_as_int(st.probs[(size_t)b * st.cap + i]) : 0;
    }
}

} // namespace

/* ---------------------------------------------------------------- launchers */

rnnt_status cu_frontend(cudaStream_t stream, cu_dtype dt, int nb, int T, int F, int fp, const float *raw,
                        const int *off, const int *frames, const float *mean, const float *sd, void *x0,
                        char *err, size_t errlen)
{
    if (nb <= 0 || T <= 0) return RNNT_OK;
    long long cells = (long long)T * fp;
    dim3 grid((unsigned)((cells + 255) / 256), (unsigned)nb);
    if (dt == CU_F16)
        k_frontend<__half><<<grid, 256, 0, stream>>>(T, F, fp, raw, off, frames, mean, sd, (__half *)x0);
    else
        k_frontend<float><<<grid, 256, 0, stream>>>(T, F, fp, raw, off, frames, mean, sd, (float *)x0);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

rnnt_status cu_lstm_pointwise(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, int nb, int H, int hp,
                              const void *x, size_t ldx_b, const float *hproj, int ldh, const float *bias,
                              float *c, int ldc, void *y, size_t ldy_b, void *hs, int ldhs, const int *len,
                              int t, char *err, size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    int threads = hp >= 256 ? 256 : cu_round_up_i(hp, 32);
    dim3 grid((unsigned)cu_div_up(hp, threads), (unsigned)nb);
#define RNNT_PW(S, HARD)                                                                                \
    k_lstm_pointwise<S, HARD><<<grid, threads, 0, stream>>>(H, hp, (const S *)x, ldx_b, hproj, ldh, bias, \
                                                            c, ldc, (S *)y, ldy_b, (S *)hs, ldhs, len, t)
    if (dt == CU_F16) {
        if (act == RNNT_ACT_HARD) RNNT_PW(__half, true); else RNNT_PW(__half, false);
    } else {
        if (act == RNNT_ACT_HARD) RNNT_PW(float, true); else RNNT_PW(float, false);
    }
#undef RNNT_PW
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

int cu_step_fused_rows(int rows) { return rows <= 8 ? 8 : (rows <= 16 ? 16 : (rows <= 32 ? 32 : 0)); }

rnnt_status cu_lstm_step_fused(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, int bt, int nb, int H, int hp,
                               const void *w_hh, const void *h_in, void *h_out, const void *x, size_t ldx_b,
                               const float *bias, float *c, void *y, size_t ldy_b, const int *len, int t, char *err,
                               size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    if (nb > bt || (bt != 8 && bt != 16 && bt != 32))
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: fused step for %d rows with a tile of %d", nb, bt);
    size_t smem = (size_t)nb * hp * cu_dtype_size(dt);
    if (smem > 200 * 1024)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: fused step: H=%d too large", H);
    dim3 grid((unsigned)cu_div_up(hp, kWarps));
#define RNNT_FS(S, HARD, BT)                                                                                       \
    do {                                                                                                           \
        if (smem > 48 * 1024)                                                                                      \
            CU_TRY(cu_allow_max_smem((const void *)k_lstm_step_fused<S, HARD, BT>));                               \
        k_lstm_step_fused<S, HARD, BT><<<grid, kWarps * 32, smem, stream>>>(                                        \
            nb, H, hp, (const S *)w_hh, (const S *)h_in, (S *)h_out, (const S *)x, ldx_b, bias, c, (S *)y, ldy_b, len, t); \
    } while (0)
#define RNNT_FS_BT(S, HARD) \
    do { if (bt == 8) RNNT_FS(S, HARD, 8); else if (bt == 16) RNNT_FS(S, HARD, 16); else RNNT_FS(S, HARD, 32); } while (0)
    if (dt == CU_F16) {
        if (act == RNNT_ACT_HARD) RNNT_FS_BT(__half, true); else RNNT_FS_BT(__half, false);
    } else {
        if (act == RNNT_ACT_HARD) RNNT_FS_BT(float, true); else RNNT_FS_BT(float, false);
    }
#undef RNNT_FS_BT
#undef RNNT_FS
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

rnnt_status cu_joint_argmax(cudaStream_t stream, cu_dtype dt, rnnt_joint_act act, int nb, int J, int n_out,
                            const float *fproj, int ldf, int fstride, const int *fstride_dev,
                            const float *gp, int ldg, const void *wout, int ldw, const float *bout,
                            const int *t, const int *done, int *k, float *p, char *err, size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    size_t smem = (size_t)J * sizeof(float);
    if (smem > 48 * 1024)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: joint dim %d too large for the joint kernel", J);
#define RNNT_JA(S, RELU)                                                                                  \
    k_joint_argmax<S, RELU><<<nb, kWarps * 32, smem, stream>>>(J, n_out, fproj, ldf, fstride, fstride_dev, \
                                                               gp, ldg, (const S *)wout, ldw, bout, t, done, k, p)
    if (dt == CU_F16) {
        if (act == RNNT_JOINT_RELU) RNNT_JA(__half, true); else RNNT_JA(__half, false);
    } else {
        if (act == RNNT_JOINT_RELU) RNNT_JA(float, true); else RNNT_JA(float, false);
    }
#undef RNNT_JA
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

/* Rows per block of the predictor kernels: enough blocks to cover the SMs at large batches while
 * each block reuses its weight rows (from L1) over several utterances. */
static int pred_rows_per_block(int max_rows) { return max_rows >= 64 ? 8 : (max_rows >= 16 ? 4 : 2); }

/* Rows taken at a time by the predictor kernels: all of a block's rows (2, 4 or 8), at most
 * g_pred_rows_max (cu_pred_set_rows_at_once; CU_PRED_ROWS_DEFAULT = 4: 8 rows take 136 registers a
 * thread, one block per SM, and measured slower at batch 256, kernels/dev/NOTES.md). The bits do not
 * depend on it. */
static int g_pred_rows_max = CU_PRED_ROWS_DEFAULT;
void cu_pred_set_rows_at_once(int rows) { g_pred_rows_max = rows >= 8 ? 8 : rows >= 4 ? 4 : rows >= 2 ? 2 : 1; }
static int pred_rows_at_once(int max_rows, int rpb)
{
    int r = max_rows <= 1 ? 1 : rpb;
    return r < g_pred_rows_max ? r : g_pred_rows_max;
}

rnnt_status cu_pred_layer(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, int max_rows, const int *emit,
                          const int *count, const int *e, const int *k, const void *xemb, const void *xh,
                          size_t xpar, int ldx, int I, const void *w_ih, int ld_ih, const void *w_hh,
                          int ld_hh, const float *bias, int H, void *h, size_t hpar, int ldh, float *c,
                          int ldc, char *err, size_t errlen)
{
    if (max_rows <= 0) return RNNT_OK;
    int rpb = pred_rows_per_block(max_rows), rb = pred_rows_at_once(max_rows, rpb);
    dim3 grid((unsigned)cu_div_up(H, kWarps), (unsigned)cu_div_up(max_rows, rpb));
#define RNNT_PL(S, HARD, RB)                                                                            \
    k_pred_layer<S, HARD, RB><<<grid, kWarps * 32, 0, stream>>>(                                        \
        rpb, emit, count, e, k, (const S *)xemb, (const S *)xh, xpar, ldx, I, (const S *)w_ih, ld_ih,   \
        (const S *)w_hh, ld_hh, bias, H, (S *)h, hpar, ldh, c, ldc)
#define RNNT_PL_RB(S, HARD)                                                                             \
    do {                                                                                                \
        if (rb == 1) RNNT_PL(S, HARD, 1);                                                               \
        else if (rb == 2) RNNT_PL(S, HARD, 2);                                                          \
        else if (rb == 4) RNNT_PL(S, HARD, 4);                                                          \
        else RNNT_PL(S, HARD, 8);                                                                       \
    } while (0)
    if (dt == CU_F16) {
        if (act == RNNT_ACT_HARD) RNNT_PL_RB(__half, true); else RNNT_PL_RB(__half, false);
    } else {
        if (act == RNNT_ACT_HARD) RNNT_PL_RB(float, true); else RNNT_PL_RB(float, false);
    }
#undef RNNT_PL_RB
#undef RNNT_PL
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

rnnt_status cu_pred_proj(cudaStream_t stream, cu_dtype dt, int max_rows, const int *emit, const int *count,
                         const int *e, const void *h, size_t hpar, int ldh, int Hl, const void *w, int ldw,
                         const float *jb, int J, float *gp, int ldg, char *err, size_t errlen)
{
    if (max_rows <= 0) return RNNT_OK;
    int rpb = pred_rows_per_block(max_rows), rb = pred_rows_at_once(max_rows, rpb);
    dim3 grid((unsigned)cu_div_up(J, kWarps), (unsigned)cu_div_up(max_rows, rpb));
#define RNNT_PP(S, RB)                                                                                  \
    k_pred_proj<S, RB><<<grid, kWarps * 32, 0, stream>>>(rpb, emit, count, e, (const S *)h, hpar, ldh, Hl, \
                                                         (const S *)w, ldw, jb, J, gp, ldg)
#define RNNT_PP_RB(S)                                                                                   \
    do {                                                                                                \
        if (rb == 1) RNNT_PP(S, 1);                                                                     \
        else if (rb == 2) RNNT_PP(S, 2);                                                                \
        else if (rb == 4) RNNT_PP(S, 4);                                                                \
        else RNNT_PP(S, 8);                                                                             \
    } while (0)
    if (dt == CU_F16) RNNT_PP_RB(__half); else RNNT_PP_RB(float);
#undef RNNT_PP_RB
#undef RNNT_PP
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

rnnt_status cu_dec_init(cudaStream_t stream, int nb, const int *t_enc_src, int V, cu_dec_state st, char *err,
                        size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    k_dec_init<<<cu_div_up(nb, 256), 256, 0, stream>>>(nb, t_enc_src, V, st);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

rnnt_status cu_dec_update(cudaStream_t stream, int nb, cu_dec_rule rule, cu_dec_state st, int use_cond,
                          cudaGraphConditionalHandle cond, int *active_host, char *err, size_t errlen)
{
    k_dec_update<<<1, kUpdThreads, 0, stream>>>(nb, rule, st, use_cond, cond, active_host);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

rnnt_status cu_dec_pack(cudaStream_t stream, int nb, cu_dec_state st, int *out, char *err, size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    k_dec_pack<<<nb, 128, 0, stream>>>(st, out);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}
