/* cu_dec_fused.cu — the decoding loop of a batch in one kernel (see cu_dec_fused.h). */
#include "cu_dec_fused.h"

#include <math.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include "cu_device.cuh"

namespace {

/* Rows of one predictor layer for the group's emitters: the one-row code for a lone row (as the
 * per-step kernel does). */
template <typename S, bool HARD, int G>
__device__ __forceinline__ void fused_layer(int n, const int *rows, const cu_dec_state &st, const S *xemb, const S *xh,
                                            size_t xpar, int ldx, const cu_dec_fused_layer &L, int warp, int lane)
{
    for (int j = warp; j < L.H; j += kWarps) {
        const S *wi[4], *wh[4];
#pragma unroll
        for (int g = 0; g < 4; g++) {
            wi[g] = (const S *)L.w_ih + (size_t)(g * L.H + j) * L.ld_ih;
            wh[g] = (const S *)L.w_hh + (size_t)(g * L.H + j) * L.ld_hh;
        }
        if (G == 1 || n == 1)
            pred_layer_rows<S, HARD, 1>(1, rows, st.e, st.k, xemb, xh, xpar, ldx, L.I, wi, wh, L.bias, L.H, j, lane,
                                        (S *)L.h, L.hpar, L.ldh, L.c, L.ldc);
        else
            pred_layer_rows<S, HARD, G>(n, rows, st.e, st.k, xemb, xh, xpar, ldx, L.I, wi, wh, L.bias, L.H, j, lane,
                                        (S *)L.h, L.hpar, L.ldh, L.c, L.ldc);
    }
}

template <typename S, int G>
__global__ void __launch_bounds__(kWarps * 32) k_dec_fused(int nb, int hard, int relu, cu_dec_rule rule, cu_dec_state st,
                                                          cu_dec_fused_net net)
{
    extern __shared__ float hid[]; /* [G][J] */
    __shared__ float wbest[kWarps][G];
    __shared__ float wsum[kWarps][G]; /* as k_joint_argmax's, for the emitted label's probability */
    __shared__ int widx[kWarps][G], wbad[kWarps][G];
    __shared__ int s_live[G], s_emits[G], s_rows[G], s_n, s_any;
    const int base = blockIdx.x * G, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, J = net.J;
    const int fstride = *net.fstride_dev;
    for (int iter = 1;; iter++) {
        if (threadIdx.x < G) {
            int b = base + threadIdx.x;
            s_live[threadIdx.x] = b < nb && !st.done[b];
        }
        __syncthreads();
        /* joint hidden vector of each live slot (as k_joint_argmax) */
        for (int i = 0; i < G; i++) {
            if (!s_live[i]) continue; /* block-uniform */
            int b = base + i;
            const float *f = net.fproj + ((size_t)b * fstride + st.t[b]) * net.ldf;
            const float *g = net.gp + (size_t)b * net.ldg;
            for (int j = threadIdx.x; j < J; j += blockDim.x)
                hid[i * J + j] = relu ? joint_act<true>(__fadd_rn(f[j], g[j])) : joint_act<false>(__fadd_rn(f[j], g[j]));
        }
        __syncthreads();
        /* logits: warp w takes outputs w, w + kWarps, ...; each output's sum in joint_logit's order, for
         * every slot of the group at once (one weight load serves G slots) */
        float best[G];
        float sum[G];
        int bi[G], bad[G];
#pragma unroll
        for (int i = 0; i < G; i++) {
            best[i] = -INFINITY;
            sum[i] = 0.0f;
            bi[i] = net.n_out;
            bad[i] = 0;
        }
        for (int o = warp; o < net.n_out; o += kWarps) {
            const S *wr = (const S *)net.wout + (size_t)o * net.ldw;
            float s[G];
#pragma unroll
            for (int i = 0; i < G; i++) s[i] = 0.0f;
            for (int j = lane; j < J; j += 32) {
                float wv = cu_ld(&wr[j]);
#pragma unroll
                for (int i = 0; i < G; i++) s[i] = fmaf(wv, hid[i * J + j], s[i]);
            }
            float bo = net.bout[o];
#pragma unroll
            for (int i = 0; i < G; i++) {
                float z = __fadd_rn(warp_sum(s[i]), bo);
                if (!isfinite(z))
                    bad[i] = 1;
                else if (z > best[i]) { /* o ascends: a tie keeps the lower index */
                    if (st.probs) sum[i] = sum[i] * expf(best[i] - z) + 1.0f;
                    best[i] = z;
                    bi[i] = o;
                } else if (st.probs) {
                    sum[i] += expf(z - best[i]);
                }
            }
        }
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < G; i++) {
                wbest[warp][i] = best[i];
                wsum[warp][i] = sum[i];
                widx[warp][i] = bi[i];
                wbad[warp][i] = bad[i];
            }
        __syncthreads();
        /* argmax across warps (as k_joint_argmax's warp 0), then the rule: warp i takes slot i */
        if (warp < G) {
            int i = warp, b = base + i, emits = 0, live = 0;
            if (s_live[i]) { /* warp-uniform */
                int bo, anybad;
                float bv = best_of_warps(&wbest[0][i], &widx[0][i], &wbad[0][i], G, net.n_out, lane, &bo, &anybad);
                float p = st.probs ? softmax_of_best_warp(&wbest[0][i], &wsum[0][i], G, lane, bv) : 0.0f;
                if (lane == 0) {
                    st.k[b] = (anybad || bo == net.n_out) ? -1 : bo;
                    if (st.probs && st.k[b] >= 0) st.p[b] = p;
                    dec_rule_slot(rule, st, b, iter > rule.max_iters, &emits, &live);
                }
            }
            __syncwarp(); /* every lane has read s_live[i] before lane 0 rewrites it (racecheck: 16 warnings) */
            if (lane == 0) {
                s_emits[i] = emits;
                s_live[i] = live;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int n = 0, any = 0;
            for (int i = 0; i < G; i++) {
                if (s_emits[i]) s_rows[n++] = base + i;
                any |= s_live[i];
            }
            s_n = n;
            s_any = any;
        }
        __syncthreads();
        if (!s_any) break;
        int n = s_n;
        if (n == 0) continue;
        /* the predictor step of the emitters, layer by layer, then their joint projection */
        for (int l = 0; l < net.n_pred; l++) {
            const cu_dec_fused_layer &L = net.L[l];
            const S *xemb = l == 0 ? (const S *)net.emb : NULL;
            const S *xh = l == 0 ? NULL : (const S *)net.L[l - 1].h;
            size_t xpar = l == 0 ? 0 : net.L[l - 1].hpar;
            int ldx = l == 0 ? net.ld_emb : net.L[l - 1].ldh;
            if (hard)
                fused_layer<S, true, G>(n, s_rows, st, xemb, xh, xpar, ldx, L, warp, lane);
            else
                fused_layer<S, false, G>(n, s_rows, st, xemb, xh, xpar, ldx, L, warp, lane);
            __syncthreads(); /* the next layer reads this layer's new h */
        }
        const cu_dec_fused_layer &T = net.L[net.n_pred - 1];
        for (int o = warp; o < J; o += kWarps) {
            const S *wr = (const S *)net.wp + (size_t)o * net.ldwp;
            if (G == 1 || n == 1)
                pred_proj_rows<S, 1>(1, s_rows, st.e, (const S *)T.h, T.hpar, T.ldh, T.H, wr, net.jb[o], o, lane, net.gp,
                                     net.ldg);
            else
                pred_proj_rows<S, G>(n, s_rows, st.e, (const S *)T.h, T.hpar, T.ldh, T.H, wr, net.jb[o], o, lane, net.gp,
                                     net.ldg);
        }
        __syncthreads(); /* the next step's joint reads gp */
    }
}

} // namespace

int cu_dec_fused_group(const cu_dec_fused_net *net, int group)
{
    if (net->n_pred < 1 || net->n_pred > CU_DEC_FUSED_MAX_PRED || net->J < 1) return 0;
    int g = group >= 8 ? 8 : group >= 4 ? 4 : group >= 2 ? 2 : 1;
    while (g > 1 && (size_t)g * net->J * sizeof(float) > 48 * 1024) g /= 2;
    return (size_t)g * net->J * sizeof(float) <= 48 * 1024 ? g : 0;
}

rnnt_status cu_dec_fused(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb, int group,
                         cu_dec_rule rule, cu_dec_state st, const cu_dec_fused_net *net, char *err, size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    int G = cu_dec_fused_group(net, group);
    if (G == 0 || G != group)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: fused decoding does not take groups of %d here", group);
    size_t smem = (size_t)G * net->J * sizeof(float);
    unsigned grid = (unsigned)((nb + G - 1) / G);
    int hard = act == RNNT_ACT_HARD, relu = jact == RNNT_JOINT_RELU;
#define RNNT_DF(S, G_)                                                                                   \
    k_dec_fused<S, G_><<<grid, kWarps * 32, smem, stream>>>(nb, hard, relu, rule, st, *net)
#define RNNT_DF_G(S)                                                                                     \
    do {                                                                                                 \
        if (G == 1) RNNT_DF(S, 1);                                                                       \
        else if (G == 2) RNNT_DF(S, 2);                                                                  \
        else if (G == 4) RNNT_DF(S, 4);                                                                  \
        else RNNT_DF(S, 8);                                                                              \
    } while (0)
    if (dt == CU_F16) RNNT_DF_G(__half); else RNNT_DF_G(float);
#undef RNNT_DF_G
#undef RNNT_DF
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

/* ---------------------------------------------------------------- the cluster loop (cu_dec_cluster) */

namespace {

namespace cg = cooperative_groups;
constexpr int kCluG = CU_DEC_CLUSTER_MAX_G;

/* What block 0 tells the others before each predictor step: the emitting slots (ascending), every
 * slot's e and k, and whether the group is done. */
struct clu_ctl {
    int n, stop;
    int rows[kCluG], e[kCluG], k[kCluG];
};

/* int4 copy of `rows` rows of `n16` 16-byte words each from src(row) into dst (rows back to back). */
template <typename F>
__device__ __forceinline__ void clu_copy_rows(int4 *dst, int rows, int n16, F src)
{
    for (int x = threadIdx.x; x < rows * n16; x += blockDim.x) {
        const int4 *s = src(x / n16);
        dst[x] = s ? s[x % n16] : make_int4(0, 0, 0, 0);
    }
}

/* Dot products of a warp in the per-step kernels' order (lane l sums elements l, l + 32, ... in turn,
 * then warp_sum), with the loads of K of the lane's elements issued before their FMAs: the one-at-a-time
 * loop (lstm_unit_dot) was a chain of dependent shared loads, converts and FMAs at ~8 cycles per
 * instruction (ncu, kernels/dev/NOTES.md); the same sums, so the same bits. acc[i][g] += w[g] . v[i]
 * over n elements (G_ rows w, R vectors v). */
template <typename S, typename T, int G_, int R, int K>
__device__ __forceinline__ void clu_dot_batched(const T *const *v, int n, const S *const *w, int lane, float (*acc)[G_])
{
    for (int q0 = lane; q0 < n; q0 += 32 * K) {
        float wv[K][G_], xv[K][R];
#pragma unroll
        for (int t = 0; t < K; t++) {
            const int q = q0 + 32 * t;
            const bool ok = q < n;
#pragma unroll
            for (int g = 0; g < G_; g++) wv[t][g] = ok ? cu_ld(&w[g][q]) : 0.0f;
#pragma unroll
            for (int i = 0; i < R; i++) xv[t][i] = ok ? cu_ld(&v[i][q]) : 0.0f;
        }
#pragma unroll
        for (int t = 0; t < K; t++)
            if (q0 + 32 * t < n)
#pragma unroll
                for (int i = 0; i < R; i++)
#pragma unroll
                    for (int g = 0; g < G_; g++) acc[i][g] = fmaf(wv[t][g], xv[t][i], acc[i][g]);
    }
}

/* lstm_unit_dot's sums (x part, then h part) with batched loads (clu_dot_batched). */
template <typename S, int R>
__device__ __forceinline__ void clu_unit_dot(const S *const *x, const S *const *hold, int I, int H, const S *const *wi,
                                             const S *const *wh, int lane, float (*acc)[4])
{
    constexpr int K = R == 1 ? 8 : 2;
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int g = 0; g < 4; g++) acc[i][g] = 0.0f;
    clu_dot_batched<S, S, 4, R, K>(x, I, wi, lane, acc);
    clu_dot_batched<S, S, 4, R, K>(hold, H, wh, lane, acc);
}

/* One warp's part of the joint's logits for Q slots (hid rows J apart): outputs warp, warp + W, ..., each
 * summed as joint_logit sums it, to z[q * n_out + o] (written by lane 0). Returns Q. */
template <typename S, int Q, int W>
__device__ __forceinline__ int clu_logits(const float *hid, int J, const S *wout, int ldw, const float *bout, int n_out,
                                          int warp, int lane, float *z, int chain)
{
    for (int o = warp; o < n_out; o += W) {
        const S *wr = wout + (size_t)o * ldw;
        float s[Q];
#pragma unroll
        for (int q = 0; q < Q; q++) s[q] = 0.0f;
        if (chain) {
            for (int j = lane; j < J; j += 32) {
                float wv = cu_ld(&wr[j]);
#pragma unroll
                for (int q = 0; q < Q; q++) s[q] = fmaf(wv, hid[q * J + j], s[q]);
            }
        } else {
            const float *hq[Q];
            float(*sq)[1] = (float(*)[1])s;
#pragma unroll
            for (int q = 0; q < Q; q++) hq[q] = hid + (size_t)q * J;
            clu_dot_batched<S, float, 1, Q, Q == 1 ? 8 : 4>(hq, J, &wr, lane, sq);
        }
        float bo = bout[o];
#pragma unroll
        for (int q = 0; q < Q; q++) {
            float v = __fadd_rn(warp_sum(s[q]), bo);
            if (lane == 0) z[(size_t)q * n_out + o] = v;
        }
    }
    return Q;
}

/* The argmax partials of the logits z ([ng][n_out]) in k_joint_argmax's grouping, whatever the block's warps:
 * warp w < kWarps takes outputs w, w + kWarps, ... in turn (a tie keeps the lower index), lane i slot i: its
 * best finite logit, its output, the sum of exp(z - best) and whether any was not finite, at [w][i] (stride
 * kCluG). The same groups and order as the per-step kernels, so the label probability has their bits
 * (softmax_of_best_warp<kWarps>). */
__device__ __forceinline__ void clu_logit_partials(const float *z, int ng, int n_out, int warp, int lane, float *wb,
                                                   float *ws, int *wi, int *wbad)
{
    if (warp >= kWarps || lane >= ng) return;
    float best = -INFINITY, sum = 0.0f;
    int bi = n_out, bad = 0;
    for (int o = warp; o < n_out; o += kWarps) {
        float v = z[(size_t)lane * n_out + o];
        if (!isfinite(v))
            bad = 1;
        else if (v > best) {
            sum = sum * expf(best - v) + 1.0f;
            best = v;
            bi = o;
        } else {
            sum += expf(v - best);
        }
    }
    const int k = warp * kCluG + lane;
    wb[k] = best, ws[k] = sum, wi[k] = bi, wbad[k] = bad;
}

template <typename S>
__device__ __forceinline__ const S *clu_at(const unsigned char *sm, size_t off) { return (const S *)(sm + off); }

template <typename S, bool HARD, bool RELU, int W>
__global__ void __launch_bounds__(W * 32, 1) k_dec_cluster(int nb, cu_dec_rule rule, cu_dec_state st,
                                                                cu_dec_fused_net net, cu_dec_cluster_plan pl)
{
    static_assert(W == 8 || W == 16, "W warps; units and outputs go to other blocks in groups of W");
    cg::cluster_group cl = cg::this_cluster();
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ clu_ctl ctl;
    __shared__ int s_t[kCluG], s_lab[kCluG], s_tenc[kCluG], s_ntok[kCluG], s_e[kCluG], s_status[kCluG], s_steps[kCluG],
        s_skip[kCluG], s_done[kCluG], s_k[kCluG], s_emits[kCluG];
    __shared__ float s_p[kCluG];
    __shared__ int s_fa_t[kCluG], s_fb_t[kCluG]; /* the frames of the f rows at o_fa and o_fb (-1: none) */
    __shared__ float wbest[W][kCluG], wsum[W][kCluG];
    __shared__ int widx[W][kCluG], wbad[W][kCluG];
    const int C = pl.C, G = pl.G, rank = (int)cl.block_rank(), base = (int)(blockIdx.x / C) * G;
    const int ng = min(G, nb - base), warp = threadIdx.x >> 5, lane = threadIdx.x & 31, J = net.J;
    const int fstride = *net.fstride_dev;
    float *hid = (float *)(sm + pl.o_hid), *gps = (float *)(sm + pl.o_gp);
    const int n16 = 16 / (int)sizeof(S);
    /* phase clocks (pl.trace, RNNT_CUDA_DEC_TRACE: thread 0 of blocks 0 and 1 of the first cluster) */
    const bool tr = pl.trace && blockIdx.x < 2 && threadIdx.x == 0;
    long long tr_c[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, tr_last = tr ? clock64() : 0, tr_joint = 0, tr_pred = 0;
#define CLU_T(k)                                  \
    do {                                          \
        if (tr) {                                 \
            long long now_ = clock64();           \
            tr_c[k] += now_ - tr_last;            \
            tr_last = now_;                       \
        }                                         \
    } while (0)

    /* weights of this block's units and outputs into shared memory (row u * 4 + g: w_ih then w_hh) */
    for (int l = 0; l < net.n_pred; l++) {
        const cu_dec_fused_layer &L = net.L[l];
        float *bs = (float *)(sm + pl.o_b[l]); /* the units' gate biases: row u * 4 + g */
        for (int x = threadIdx.x; x < pl.U[l] * 4; x += blockDim.x) {
            int u = x >> 2, g = x & 3, j = ((u / W) * C + rank) * W + u % W;
            bs[x] = j < L.H ? L.bias[g * L.H + j] : 0.0f;
        }
        int wi16 = L.ld_ih / n16, wh16 = L.ld_hh / n16;
        for (int x = threadIdx.x; x < pl.U[l] * 4 * (wi16 + wh16); x += blockDim.x) {
            int r = x / (wi16 + wh16), w = x % (wi16 + wh16);
            int u = r >> 2, g = r & 3, j = ((u / W) * C + rank) * W + u % W;
            if (j >= L.H) continue;
            const int4 *src = w < wi16 ? (const int4 *)((const S *)L.w_ih + (size_t)(g * L.H + j) * L.ld_ih) + w
                                       : (const int4 *)((const S *)L.w_hh + (size_t)(g * L.H + j) * L.ld_hh) + (w - wi16);
            ((int4 *)(sm + pl.o_w[l]))[x] = *src;
        }
    }
    for (int u = threadIdx.x; u < pl.P; u += blockDim.x) {
        int o = ((u / W) * C + rank) * W + u % W;
        ((float *)(sm + pl.o_jb))[u] = o < J ? net.jb[o] : 0.0f;
    }
    for (int o = threadIdx.x; o < net.n_out; o += blockDim.x) ((float *)(sm + pl.o_bout))[o] = net.bout[o];
    clu_copy_rows((int4 *)(sm + pl.o_proj), pl.P, net.ldwp / n16, [&](int u) -> const int4 * {
            int o = ((u / W) * C + rank) * W + u % W;
            return o < J ? (const int4 *)((const S *)net.wp + (size_t)o * net.ldwp) : NULL;
        });
    if (rank == 0)
        clu_copy_rows((int4 *)(sm + pl.o_wout), net.n_out, net.ldw / n16,
                      [&](int o) { return (const int4 *)((const S *)net.wout + (size_t)o * net.ldw); });
    clu_copy_rows((int4 *)(sm + pl.o_emb), pl.V + 1, net.ld_emb / n16,
                      [&](int v) { return (const int4 *)((const S *)net.emb + (size_t)v * net.ld_emb); });
    /* the state after the predictor's start step: h (at parity e & 1) of every slot in every block, c of
     * this block's units, gp and the decoder scalars in block 0 */
    for (int l = 0; l < net.n_pred; l++) {
        const cu_dec_fused_layer &L = net.L[l];
        S *hb = (S *)(sm + pl.o_h[l]);
        for (int x = threadIdx.x; x < ng * L.ldh; x += blockDim.x) {
            int i = x / L.ldh, q = x % L.ldh, b = base + i, par = st.e[b] & 1;
            hb[((size_t)par * G + i) * L.ldh + q] = ((const S *)L.h)[(size_t)par * L.hpar + (size_t)b * L.ldh + q];
        }
        float *cs = (float *)(sm + pl.o_c[l]);
        for (int x = threadIdx.x; x < ng * pl.U[l]; x += blockDim.x) {
            int i = x / pl.U[l], u = x % pl.U[l], j = ((u / W) * C + rank) * W + u % W;
            cs[x] = j < L.H ? L.c[(size_t)(base + i) * L.ldc + j] : 0.0f;
        }
    }
    if (rank == 0) {
        for (int x = threadIdx.x; x < ng * J; x += blockDim.x)
            gps[(size_t)(x / J) * pl.ldgs + x % J] = net.gp[(size_t)(base + x / J) * net.ldg + x % J];
        for (int i = threadIdx.x; i < ng; i += blockDim.x) {
            int b = base + i;
            s_t[i] = st.t[b], s_lab[i] = st.labels[b], s_tenc[i] = st.t_enc[b], s_ntok[i] = st.n_tok[b];
            s_e[i] = st.e[b], s_status[i] = st.status[b], s_steps[i] = st.steps[b], s_skip[i] = st.skipped[b];
            s_done[i] = st.done[b], s_k[i] = st.k[b], s_p[i] = 0.0f;
            s_fa_t[i] = -1, s_fb_t[i] = -1;
        }
    }
    cu_dec_state lst = st; /* block 0's view: the scalars in shared memory, slot i = base + i */
    lst.t = s_t, lst.labels = s_lab, lst.t_enc = s_tenc, lst.n_tok = s_ntok, lst.e = s_e, lst.status = s_status;
    lst.steps = s_steps, lst.skipped = s_skip, lst.done = s_done, lst.k = s_k, lst.p = s_p;
    lst.tokens = st.tokens + (size_t)base * st.cap, lst.frames = st.frames + (size_t)base * st.cap;
    lst.probs = st.probs ? st.probs + (size_t)base * st.cap : NULL;
    const S *wout_s = clu_at<S>(sm, pl.o_wout);
    const float *bout_s = (const float *)(sm + pl.o_bout);
    cl.sync(); /* every block has started: shared memory may be written across the cluster */
    CLU_T(9);

    for (int iter = 1;;) {
        if (rank == 0) {
            /* joint, argmax and rule of the live slots until one emits or none is live */
            for (;;) {
                if (pl.fcache) __pipeline_wait_prior(0); /* this thread's prefetched elements of f */
                for (int x = threadIdx.x; x < ng * J; x += blockDim.x) {
                    int i = x / J, j = x % J;
                    if (s_done[i]) continue;
                    float fv;
                    if (pl.fcache) { /* x is always this thread's: fa / fb[x] were written by it */
                        float *fa = (float *)(sm + pl.o_fa);
                        const int t = s_t[i];
                        if (s_fa_t[i] == t)
                            fv = fa[x];
                        else if (s_fb_t[i] == t)
                            fv = ((const float *)(sm + pl.o_fb))[x];
                        else
                            fv = net.fproj[((size_t)(base + i) * fstride + t) * net.ldf + j];
                        fa[x] = fv;
                    } else {
                        fv = net.fproj[((size_t)(base + i) * fstride + s_t[i]) * net.ldf + j];
                    }
                    hid[x] = joint_act<RELU>(__fadd_rn(fv, gps[(size_t)i * pl.ldgs + j]));
                }
                __syncthreads();
                if (pl.fcache && threadIdx.x < ng && !s_done[threadIdx.x]) s_fa_t[threadIdx.x] = s_t[threadIdx.x];
                float *zs = (float *)(sm + pl.o_stage); /* [ng][n_out] logits (stage is free here) */
                for (int i0 = 0; i0 < ng;) /* 4 slots at a time while 4 are left, then one */
                    if (ng - i0 >= 4)
                        i0 += clu_logits<S, 4, W>(hid + (size_t)i0 * J, J, wout_s, net.ldw, bout_s, net.n_out, warp, lane,
                                                  zs + (size_t)i0 * net.n_out, pl.chain);
                    else
                        i0 += clu_logits<S, 1, W>(hid + (size_t)i0 * J, J, wout_s, net.ldw, bout_s, net.n_out, warp, lane,
                                                  zs + (size_t)i0 * net.n_out, pl.chain);
                __syncthreads();
                clu_logit_partials(zs, ng, net.n_out, warp, lane, &wbest[0][0], &wsum[0][0], &widx[0][0], &wbad[0][0]);
                CLU_T(0);
                __syncthreads();
                for (int i = warp; i < ng; i += W) {
                    int emits = 0, live = 0;
                    if (!s_done[i]) { /* warp-uniform */
                        int bo, anybad;
                        float bv = best_of_warps<kWarps>(&wbest[0][i], &widx[0][i], &wbad[0][i], kCluG, net.n_out, lane, &bo, &anybad);
                        float p = softmax_of_best_warp<kWarps>(&wbest[0][i], &wsum[0][i], kCluG, lane, bv);
                        __syncwarp(); /* every lane has read s_done[i] before lane 0's rule rewrites it */
                        if (lane == 0) {
                            s_k[i] = (anybad || bo == net.n_out) ? -1 : bo;
                            s_p[i] = s_k[i] >= 0 ? p : 0.0f;
                            dec_rule_slot(rule, lst, i, iter > rule.max_iters, &emits, &live);
                        }
                    }
                    if (lane == 0) s_emits[i] = emits;
                }
                CLU_T(1);
                __syncthreads();
                if (warp == 0) {
                    unsigned em = __ballot_sync(0xffffffffu, lane < ng && s_emits[lane]);
                    unsigned lv = __ballot_sync(0xffffffffu, lane < ng && !s_done[lane]);
                    if (lane < ng && s_emits[lane]) ctl.rows[__popc(em & ((1u << lane) - 1u))] = lane;
                    if (lane < ng) ctl.e[lane] = s_e[lane], ctl.k[lane] = s_k[lane];
                    if (lane == 0) ctl.n = __popc(em), ctl.stop = lv == 0u;
                }
                __syncthreads();
                iter++;
                if (tr) tr_joint++;
                if (ctl.n > 0 || ctl.stop) break;
            }
            /* during the predictor step: each live slot's next f row not at o_fa (its frame t, if the rule
             * moved it, else t + 1), into o_fb with cp.async by the threads that read it (x as above) */
            if (pl.fcache && !ctl.stop) {
                for (int x = threadIdx.x; x < ng * J; x += blockDim.x) {
                    int i = x / J, j = x % J, r = s_t[i] == s_fa_t[i] ? s_t[i] + 1 : s_t[i];
                    if (s_done[i] || r >= s_tenc[i]) continue;
                    __pipeline_memcpy_async((float *)(sm + pl.o_fb) + x,
                                            net.fproj + ((size_t)(base + i) * fstride + r) * net.ldf + j, 4);
                }
                __pipeline_commit();
                __syncthreads(); /* every thread has read s_fb_t: the frames may change */
                for (int i = threadIdx.x; i < ng; i += blockDim.x) {
                    int r = s_t[i] == s_fa_t[i] ? s_t[i] + 1 : s_t[i];
                    s_fb_t[i] = s_done[i] || r >= s_tenc[i] ? -1 : r;
                }
            }
            /* to the other blocks */
            const int words = (int)(sizeof(clu_ctl) / sizeof(int));
            for (int x = threadIdx.x; x < (C - 1) * words; x += blockDim.x) {
                int *dst = (int *)cl.map_shared_rank((void *)&ctl, 1 + x / words);
                dst[x % words] = ((const int *)&ctl)[x % words];
            }
        }
        CLU_T(3);
        cl.sync();
        CLU_T(4);
        if (ctl.stop) break;
        const int n = ctl.n;
        if (tr) tr_pred++;
        /* the predictor step of the emitters, layer by layer: this block's units, h to every block */
        for (int l = 0; l < net.n_pred; l++) {
            const cu_dec_fused_layer &L = net.L[l];
            const S *hb = clu_at<S>(sm, pl.o_h[l]);
            float *cs = (float *)(sm + pl.o_c[l]);
            const int rowlen = L.ld_ih + L.ld_hh;
            for (int u = warp; u < pl.U[l]; u += W) {
                int j = ((u / W) * C + rank) * W + warp;
                if (j >= L.H) break; /* warp-uniform; later u only larger */
                const S *wi[4], *wh[4];
#pragma unroll
                for (int g = 0; g < 4; g++) {
                    wi[g] = clu_at<S>(sm, pl.o_w[l]) + (size_t)(u * 4 + g) * rowlen;
                    wh[g] = wi[g] + L.ld_ih;
                }
                float bias[4];
#pragma unroll
                for (int g = 0; g < 4; g++) bias[g] = ((const float *)(sm + pl.o_b[l]))[u * 4 + g];
                for (int r0 = 0; r0 < n; r0 += 4) {
                    const int nr = min(4, n - r0);
                    const S *x[4], *hold[4];
                    int is[4];
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        int i = ctl.rows[r0 + min(q, nr - 1)], e = ctl.e[i];
                        is[q] = i;
                        if (l == 0)
                            x[q] = clu_at<S>(sm, pl.o_emb) + (size_t)ctl.k[i] * net.ld_emb;
                        else
                            x[q] = clu_at<S>(sm, pl.o_h[l - 1]) + ((size_t)(e & 1) * G + i) * net.L[l - 1].ldh;
                        hold[q] = hb + ((size_t)((e - 1) & 1) * G + i) * L.ldh;
                    }
                    float acc[4][4];
                    if (pl.chain) {
                        if (nr == 1)
                            lstm_unit_dot<S, 1>(x, hold, L.I, L.H, wi, wh, lane, acc);
                        else
                            lstm_unit_dot<S, 4>(x, hold, L.I, L.H, wi, wh, lane, acc);
                    } else if (nr == 1) {
                        clu_unit_dot<S, 1>(x, hold, L.I, L.H, wi, wh, lane, acc);
                    } else {
                        clu_unit_dot<S, 4>(x, hold, L.I, L.H, wi, wh, lane, acc);
                    }
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        if (q >= nr) break;
                        float a[4];
#pragma unroll
                        for (int g = 0; g < 4; g++) a[g] = __fadd_rn(warp_sum(acc[q][g]), bias[g]);
                        int i = is[q];
                        float *cp = cs + (size_t)i * pl.U[l] + u;
                        float cn, hn;
                        lstm_cell<HARD>(a, *cp, &cn, &hn);
                        __syncwarp();
                        if (lane == 0) {
                            *cp = cn;
                            cu_st(&((S *)(sm + pl.o_stage))[(size_t)i * pl.U[l] + u], hn);
                        }
                    }
                }
            }
            /* the new h to every block in one burst of 16-byte stores (units u = W m + w are h[j0 + w],
             * j0 = W (m C + rank); a 16-byte piece past the padded row (ldh, a multiple of 8) is not sent) */
            __syncthreads();
            {
                const int e16 = 16 / (int)sizeof(S), per = W / e16, groups = pl.U[l] / W, total = n * groups * per * C;
                for (int x = threadIdx.x; x < total; x += blockDim.x) {
                    int k = x % per, m = (x / per) % groups, r = (x / per / groups) % C, row = x / per / groups / C;
                    int i = ctl.rows[row], j0 = (m * C + rank) * W;
                    if (j0 >= L.H || j0 + k * e16 >= L.ldh) continue;
                    const int4 *src = (const int4 *)(sm + pl.o_stage + ((size_t)i * pl.U[l] + m * W) * sizeof(S)) + k;
                    int4 *dst = (int4 *)cl.map_shared_rank(
                                    (void *)(sm + pl.o_h[l] + (((size_t)(ctl.e[i] & 1) * G + i) * L.ldh + j0) * sizeof(S)), r) + k;
                    *dst = *src;
                }
            }
            CLU_T(5);
            cl.sync(); /* the next layer (or the projection) reads every block's new h */
            CLU_T(6);
        }
        /* the joint's predictor projection of the emitters: this block's outputs, to block 0 */
        {
            const cu_dec_fused_layer &T = net.L[net.n_pred - 1];
            const S *hb = clu_at<S>(sm, pl.o_h[net.n_pred - 1]);
            float *pst = (float *)(sm + pl.o_stage);
            for (int u = warp; u < pl.P; u += W) {
                int o = ((u / W) * C + rank) * W + warp;
                if (o >= J) break;
                const S *wr = clu_at<S>(sm, pl.o_proj) + (size_t)u * net.ldwp;
                float bo = ((const float *)(sm + pl.o_jb))[u];
                for (int r0 = 0; r0 < n; r0 += 4) {
                    const int nr = min(4, n - r0);
                    const S *g[4];
                    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        int i = ctl.rows[r0 + min(q, nr - 1)];
                        g[q] = hb + ((size_t)(ctl.e[i] & 1) * G + i) * T.ldh;
                    }
                    if (pl.chain) {
                        for (int q2 = lane; q2 < T.H; q2 += 32) {
                            float wv = cu_ld(&wr[q2]);
#pragma unroll
                            for (int q = 0; q < 4; q++) s[q] = fmaf(wv, cu_ld(&g[q][q2]), s[q]);
                        }
                    } else if (nr == 1) {
                        clu_dot_batched<S, S, 1, 1, 8>(g, T.H, &wr, lane, (float(*)[1])s);
                    } else {
                        clu_dot_batched<S, S, 1, 4, 2>(g, T.H, &wr, lane, (float(*)[1])s);
                    }
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        float v = warp_sum(s[q]);
                        if (lane == 0 && q < nr) pst[(size_t)ctl.rows[r0 + q] * pl.P + u] = __fadd_rn(v, bo);
                    }
                }
            }
        }
        __syncthreads(); /* this block's gp outputs to block 0 in one burst (as h above) */
        {
            const int per = W / 4, groups = pl.P / W, total = n * groups * per;
            for (int x = threadIdx.x; x < total; x += blockDim.x) {
                int k = x % per, m = (x / per) % groups, row = x / per / groups;
                int i = ctl.rows[row], o0 = (m * C + rank) * W;
                if (o0 >= J || o0 + k * 4 >= pl.ldgs) continue;
                const int4 *src = (const int4 *)(sm + pl.o_stage + ((size_t)i * pl.P + m * W) * 4) + k;
                int4 *dst = (int4 *)cl.map_shared_rank((void *)(gps + (size_t)i * pl.ldgs + o0), 0) + k;
                *dst = *src;
            }
        }
        CLU_T(7);
        cl.sync(); /* block 0's next joint reads gp; ctl may be rewritten */
        CLU_T(8);
    }
    if (tr) {
        long long *o = pl.trace + blockIdx.x * 16;
        for (int k = 0; k < 10; k++) o[k] = tr_c[k];
        o[10] = tr_joint, o[11] = tr_pred;
    }
#undef CLU_T
    if (rank == 0)
        for (int i = threadIdx.x; i < ng; i += blockDim.x) {
            int b = base + i;
            st.t[b] = s_t[i], st.labels[b] = s_lab[i], st.n_tok[b] = s_ntok[i], st.e[b] = s_e[i];
            st.status[b] = s_status[i], st.steps[b] = s_steps[i], st.skipped[b] = s_skip[i], st.done[b] = s_done[i];
            st.k[b] = s_k[i];
        }
}

template <typename S, bool HARD, bool RELU, int W>
rnnt_status launch_cluster(cudaStream_t stream, int nb, const cu_dec_cluster_plan *pl, cu_dec_rule rule,
                           cu_dec_state st, const cu_dec_fused_net *net, char *err, size_t errlen)
{
    auto kern = k_dec_cluster<S, HARD, RELU, W>;
    CU_TRY(cu_allow_max_smem((const void *)kern));
    if (pl->C > 8) CU_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)pl->C;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)(pl->clusters * pl->C));
    cfg.blockDim = dim3(W * 32);
    cfg.dynamicSmemBytes = pl->smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, nb, rule, st, *net, *pl));
    return RNNT_OK;
}

} // namespace

/* What both persistent decode loops' plans start from: the device's SM count and opt-in shared memory per
 * block, a launch feature it must have (thread-block clusters, cooperative launch), and a predictor depth
 * the loops handle. 0 with *why set when any of it is missing. */
static int dec_plan_device(const cu_dec_fused_net *net, cudaDeviceAttr feature, const char *no_feature, int *sms,
                           int *optin, const char **why)
{
    int dev = 0, has = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev) ||
        cudaDeviceGetAttribute(optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) ||
        cudaDeviceGetAttribute(&has, feature, dev)) {
        cudaGetLastError();
        *why = "device attributes unavailable";
        return 0;
    }
    if (!has) {
        *why = no_feature;
        return 0;
    }
    if (net->n_pred < 1 || net->n_pred > CU_DEC_FUSED_MAX_PRED) {
        *why = "predictor depth";
        return 0;
    }
    return 1;
}

int cu_dec_cluster_plan_make(const cu_dec_fused_net *net, cu_dtype dt, int V, int nb, int cluster, int warps,
                             int slots, cu_dec_cluster_plan *pl, const char **why)
{
    memset(pl, 0, sizeof *pl);
    *why = NULL;
    int sms = 0, optin = 0;
    if (!dec_plan_device(net, cudaDevAttrClusterLaunch, "the device has no thread-block clusters", &sms, &optin, why))
        return 0;
    const int C = cluster >= 16 ? 16 : 8, W = warps >= 16 ? 16 : 8;
    pl->W = W;
    const size_t esz = dt == CU_F16 ? 2 : 4;
    int per = sms / C > 0 ? sms / C : 1; /* clusters that run at once, about */
    int G = slots > 0 ? slots : (nb + per - 1) / per;
    G = G < 1 ? 1 : G > CU_DEC_CLUSTER_MAX_G ? CU_DEC_CLUSTER_MAX_G : G;
    pl->C = C, pl->G = G, pl->clusters = (nb + G - 1) / G, pl->V = V;
    size_t off = 0, limit = (size_t)optin - 6 * 1024; /* the kernel's static shared memory */
#define TAKE(o, bytes) (off = (off + 15) & ~(size_t)15, (o) = off, off += (bytes))
    TAKE(pl->o_hid, (size_t)G * net->J * 4);
    pl->ldgs = (net->J + 7) / 8 * 8;
    TAKE(pl->o_gp, (size_t)G * pl->ldgs * 4);
    for (int l = 0; l < net->n_pred; l++) {
        const cu_dec_fused_layer *L = &net->L[l];
        pl->U[l] = (L->H + C * W - 1) / (C * W) * W;
        TAKE(pl->o_h[l], 2 * (size_t)G * L->ldh * esz);
        TAKE(pl->o_c[l], (size_t)G * pl->U[l] * 4);
    }
    pl->P = (net->J + C * W - 1) / (C * W) * W;
    size_t stage = (size_t)G * pl->P * 4;
    if ((size_t)G * net->n_out * 4 > stage) stage = (size_t)G * net->n_out * 4; /* block 0's logits in the joint */
    for (int l = 0; l < net->n_pred; l++)
        if ((size_t)G * pl->U[l] * esz > stage) stage = (size_t)G * pl->U[l] * esz;
    TAKE(pl->o_stage, stage);
    if (off > limit) {
        *why = "the state does not fit in shared memory";
        return 0;
    }
    /* every weight and bias the loop reads, in shared memory: the layers' units, the projection's
     * outputs, the output layer and the embedding (loads from global memory after each cluster barrier
     * missed L1 and cost an L2 round trip per unit and output: kernels/dev/NOTES.md) */
    int aligned = (net->ldwp * esz) % 16 == 0 && (net->ldw * esz) % 16 == 0 && (net->ld_emb * esz) % 16 == 0;
    for (int l = 0; l < net->n_pred; l++) {
        const cu_dec_fused_layer *L = &net->L[l];
        aligned = aligned && (L->ld_ih * esz) % 16 == 0 && (L->ld_hh * esz) % 16 == 0;
        TAKE(pl->o_w[l], (size_t)pl->U[l] * 4 * (L->ld_ih + L->ld_hh) * esz);
        TAKE(pl->o_b[l], (size_t)pl->U[l] * 4 * 4);
    }
    TAKE(pl->o_proj, (size_t)pl->P * net->ldwp * esz);
    TAKE(pl->o_jb, (size_t)pl->P * 4);
    TAKE(pl->o_wout, (size_t)net->n_out * net->ldw * esz);
    TAKE(pl->o_bout, (size_t)net->n_out * 4);
    TAKE(pl->o_emb, (size_t)(V + 1) * net->ld_emb * esz);
    if (!aligned) {
        *why = "weight rows not 16-byte multiples";
        return 0;
    }
    if (off > limit) {
        *why = "the predictor and joint weights do not fit in the cluster's shared memory";
        return 0;
    }
    { /* block 0's f rows in use and prefetched, where they fit */
        size_t keep = off, o_fa, o_fb;
        TAKE(o_fa, (size_t)G * net->J * 4);
        TAKE(o_fb, (size_t)G * net->J * 4);
        if (off <= limit)
            pl->fcache = 1, pl->o_fa = o_fa, pl->o_fb = o_fb;
        else
            off = keep;
    }
#undef TAKE
    pl->smem = (off + 15) & ~(size_t)15;
    return 1;
}

rnnt_status cu_dec_cluster(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb,
                           const cu_dec_cluster_plan *pl, cu_dec_rule rule, cu_dec_state st, const cu_dec_fused_net *net,
                           char *err, size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    const bool hard = act == RNNT_ACT_HARD, relu = jact == RNNT_JOINT_RELU;
#define RNNT_DC_W(S, W)                                                                                  \
    do {                                                                                                 \
        if (hard)                                                                                        \
            return relu ? launch_cluster<S, true, true, W>(stream, nb, pl, rule, st, net, err, errlen)   \
                        : launch_cluster<S, true, false, W>(stream, nb, pl, rule, st, net, err, errlen); \
        return relu ? launch_cluster<S, false, true, W>(stream, nb, pl, rule, st, net, err, errlen)      \
                    : launch_cluster<S, false, false, W>(stream, nb, pl, rule, st, net, err, errlen);    \
    } while (0)
#define RNNT_DC(S)                       \
    do {                                 \
        if (pl->W == 16) RNNT_DC_W(S, 16); \
        RNNT_DC_W(S, 8);                 \
    } while (0)
    if (dt == CU_F16) RNNT_DC(__half);
    RNNT_DC(float);
#undef RNNT_DC_W
#undef RNNT_DC
}

/* ---------------------------------------------------------------- the grid loop (cu_dec_grid) */

namespace {

constexpr int kGridSlots = 16; /* slots a block of the grid loop holds: nb <= 16 x blocks (2,112 at one block per SM on the H100: a runner of 2048) */
constexpr int kGridChunk = 4; /* f4: groups of 4 emitters staged at a time */

/* vst: 16 bytes of S from p (16-byte aligned) as floats (half -> float is exact: the values cu_ld gives) */
__device__ __forceinline__ void grid_cvt16(const int4 raw, float *v, const __half *)
{
    const __half2 *h2 = reinterpret_cast<const __half2 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __half22float2(h2[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
__device__ __forceinline__ void grid_cvt16(const int4 raw, float *v, const float *)
{
    v[0] = __int_as_float(raw.x), v[1] = __int_as_float(raw.y), v[2] = __int_as_float(raw.z), v[3] = __int_as_float(raw.w);
}

__device__ __forceinline__ float grid_ldcg(const __half *p) { return __half2float(__ldcg(p)); }
__device__ __forceinline__ float grid_ldcg(const float *p) { return __ldcg(p); }

/* cnt: wait until *c >= want (a counter other blocks raise with a fence before their atomicAdd); loads after it in this
 * thread, and in the block after a __syncthreads, see what those blocks wrote before (ld.acquire). A wait that never ends
 * is a bug: trap (the launch fails with an error) rather than hang the device. */
__device__ __forceinline__ void grid_wait_count(const int *c, int want)
{
    for (long long spins = 0;; spins++) {
        int v;
        asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
        if (v >= want) return;
        if (spins > (1ll << 24)) __trap(); /* ~10 s of polls: seconds where microseconds are normal */
    }
}

/* slices: a barrier among the P blocks of one slice (a counter of the slice's own that only grows; gen, thread 0's count of
 * arrivals it has waited for so far). The pattern of cooperative groups' grid barrier (block barrier, fence, atomicAdd,
 * acquire-poll, fence, block barrier) over P blocks instead of all: writes before it in any block of the slice are seen
 * after it by every block of the slice. */
__device__ __forceinline__ void grid_slice_sync(int *c, int *gen, int P)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        *gen += P;
        __threadfence();
        atomicAdd(c, 1);
        grid_wait_count(c, *gen);
        __threadfence();
    }
    __syncthreads();
}

/* vst: the f4 path's staging of nch groups of 4 emitters as fp32 emitter quadruples, x4[ci * (n0 + n1) + q]: elements
 * q < n0 from row(ci, r, 0), then n1 from row(ci, r, 1). A thread takes 16 bytes of each of the 4 emitters' rows at a
 * time (4 independent 16-byte loads in flight, the row pointers computed once per piece, not per element); a piece that
 * is short (a tail) or not 16-byte aligned is read element by element. The same values as the scalar staging. */
template <typename S, typename R>
__device__ __forceinline__ void grid_stage_vec(float4 *x4, int nch, int n0, int n1, R row)
{
    constexpr int E = 16 / (int)sizeof(S);
    const int s0 = (n0 + E - 1) / E, ns = s0 + (n1 + E - 1) / E, n = n0 + n1;
    for (int task = threadIdx.x; task < nch * ns; task += blockDim.x) {
        const int ci = task / ns, sg = task - ci * ns, part = sg >= s0;
        const int q0 = (part ? sg - s0 : sg) * E, len = min(E, (part ? n1 : n0) - q0);
        const S *p[4];
        bool fast = len == E;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            p[r] = row(ci, r, part) + q0;
            fast = fast && ((size_t)p[r] & 15) == 0;
        }
        float v[4][E];
        if (fast) {
            int4 raw[4];
#pragma unroll
            for (int r = 0; r < 4; r++) raw[r] = __ldcg(reinterpret_cast<const int4 *>(p[r]));
#pragma unroll
            for (int r = 0; r < 4; r++) grid_cvt16(raw[r], v[r], (const S *)NULL);
        } else {
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int i = 0; i < E; i++) v[r][i] = i < len ? grid_ldcg(&p[r][i]) : 0.0f;
        }
        float4 *dst = x4 + (size_t)ci * n + (part ? n0 : 0) + q0;
#pragma unroll
        for (int i = 0; i < E; i++)
            if (i < len) dst[i] = make_float4(v[0][i], v[1][i], v[2][i], v[3][i]);
    }
}

/* The greedy loop of the whole batch in one cooperative launch (issue 16 §3, large batches): per step,
 * (A) each block takes the joint, argmax and rule of its slots (b = block, block + blocks, ...: the
 * cluster loop's joint code, clu_logits + clu_logit_partials, in k_joint_argmax's warp groups), then
 * grid.sync; every block builds the ascending emitter list from the slots' flags; (B) each predictor
 * layer of the emitters, unit j on block j % blocks, its warps over groups of 4 rows (clu_unit_dot: the
 * per-step kernels' sums), grid.sync after each layer; (C) the joint's predictor projection, output o
 * on block o % blocks, grid.sync. A step without an emitter costs one grid barrier. flags: [2][nb] ints
 * (by step parity: a block may start the next step's joint while another still reads this step's).
 * With plan.cnt (cu_dec_grid_plan) the barriers after the last layer and after (C) are per-slot counters
 * instead (grid_wait_count): one grid barrier a step for a one-layer predictor. With nsl > 0 (plan.slices) the grid is
 * nsl independent loops of P blocks each over their own slots, with barriers of their own (grid_slice_sync). */
template <typename S, bool HARD, bool RELU, int MINB, bool PAIR>
__global__ void __launch_bounds__(kWarps * 32, MINB) k_dec_grid(int nb, cu_dec_rule rule, cu_dec_state st,
                                                          cu_dec_fused_net net, int *flags, int tile, int wsm, int f4,
                                                          int vst, int *cnt, int nsl, int *bar, long long *trace)
{
    cg::grid_group grid = cg::this_grid();
    /* slices (nsl > 0, issue 16 §3 session 7): the blocks split into nsl slices of P = gridDim / nsl, slice s owning the
     * slots [nb s / nsl, nb (s + 1) / nsl) and running the whole loop for them alone, its barriers on its own counter
     * (grid_slice_sync on bar[32 s]), so no slice waits for another's steps; every block index below is the one in the
     * slice (bid < P), every slot index the global one. nsl 0: one slice of every block, barriers by grid.sync. */
    const int P = nsl > 0 ? (int)gridDim.x / nsl : (int)gridDim.x, sl = (int)blockIdx.x / P;
    if (nsl > 0 && sl >= nsl) return; /* gridDim % nsl blocks left over: no barrier of theirs is waited for */
    const int sb0 = nsl > 0 ? (int)((long long)nb * sl / nsl) : 0, sb1 = nsl > 0 ? (int)((long long)nb * (sl + 1) / nsl) : nb;
    int *slice_bar = nsl > 0 ? bar + 32 * sl : NULL;
    int bar_gen = 0;
    auto gsync = [&]() {
        if (slice_bar)
            grid_slice_sync(slice_bar, &bar_gen, P);
        else
            grid.sync();
    };
    /* phase clocks (trace, RNNT_CUDA_DEC_TRACE=1: thread 0 of block 0): joint+rule, barrier, list, layers, their
     * barriers, projection, its barrier; steps, predictor steps */
    const bool tr = trace && blockIdx.x == 0 && threadIdx.x == 0;
    long long tr_c[11] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, tr_last = tr ? clock64() : 0, tr_s0 = 0;
#define GRID_T(k)                                 \
    do {                                          \
        if (tr) {                                 \
            long long now_ = clock64();           \
            tr_c[k] += now_ - tr_last;            \
            tr_last = now_;                       \
        }                                         \
    } while (0)
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float wbest[kWarps * kCluG], wsum[kWarps * kCluG];
    __shared__ int widx[kWarps * kCluG], wbad[kWarps * kCluG];
    __shared__ int s_cnt[kWarps], s_lv[kWarps];
    /* the decoder state of this block's slots b = block + blocks m (slot m here), as the cluster loop keeps it */
    __shared__ int g_t[kGridSlots], g_lab[kGridSlots], g_tenc[kGridSlots], g_ntok[kGridSlots], g_e[kGridSlots],
        g_status[kGridSlots], g_steps[kGridSlots], g_skip[kGridSlots], g_done[kGridSlots], g_k[kGridSlots];
    __shared__ float g_p[kGridSlots];
    const int J = net.J, n_out = net.n_out, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nblk = P, bid = (int)blockIdx.x - sl * P; /* in the slice */
    const int fstride = *net.fstride_dev;
    float *hid = (float *)sm;                                   /* [J] */
    float *zs = hid + ((J + 3) & ~3);                           /* [n_out] */
    int *rows = (int *)(zs + ((n_out + 3) & ~3));               /* [nb]: the step's emitters, ascending */
    int *rows_e = rows + nb, *rows_k = rows_e + nb;             /* [nb] each: their e and k */
    const S *wout = (const S *)net.wout;
    for (int m = threadIdx.x, b = sb0 + bid + nblk * m; m < kGridSlots && b < sb1; m += blockDim.x, b += nblk * (int)blockDim.x) {
        g_t[m] = st.t[b], g_lab[m] = st.labels[b], g_tenc[m] = st.t_enc[b], g_ntok[m] = st.n_tok[b], g_e[m] = st.e[b];
        g_status[m] = st.status[b], g_steps[m] = st.steps[b], g_skip[m] = st.skipped[b], g_done[m] = st.done[b];
        g_k[m] = st.k[b], g_p[m] = 0.0f;
    }
    __syncthreads();
    /* wsm (tile only): the block's kWarps units of each layer (row w * 4 + g: w_ih then w_hh), its kWarps
     * projection rows and the joint's output layer, copied into shared memory once (grid_wsm_bytes) */
    S *ws_base = (S *)(sm + (((size_t)((J + 3) & ~3) + ((n_out + 3) & ~3) + 3 * (size_t)nb) * 4 + 15) / 16 * 16);
    float4 *w4_base = NULL, *x4 = NULL; /* f4: [layer][kWarps][I + H] gate quadruples; [kGridChunk][max I + H] */
    if (wsm) {
        S *wp = ws_base;
        for (int l = 0; l < net.n_pred && !f4; l++) {
            const cu_dec_fused_layer &L = net.L[l];
            const int nug = (L.H + kWarps - 1) / kWarps, S_ = max(1, nblk / nug), rl = L.ld_ih + L.ld_hh;
            for (int x = threadIdx.x; x < kWarps * 4 * rl; x += blockDim.x) {
                const int r = x / rl, q = x % rl, j = (bid / S_) * kWarps + r / 4, g = r % 4;
                wp[x] = bid < nug * S_ && j < L.H
                            ? (q < L.ld_ih ? ((const S *)L.w_ih)[(size_t)(g * L.H + j) * L.ld_ih + q]
                                           : ((const S *)L.w_hh)[(size_t)(g * L.H + j) * L.ld_hh + q - L.ld_ih])
                            : (S)0.0f;
            }
            wp += (size_t)kWarps * 4 * rl;
        }
        {
            const int nog = (J + kWarps - 1) / kWarps, S_ = max(1, nblk / nog);
            for (int x = threadIdx.x; x < kWarps * net.ldwp; x += blockDim.x) {
                const int o = (bid / S_) * kWarps + x / net.ldwp;
                wp[x] = bid < nog * S_ && o < J ? ((const S *)net.wp)[(size_t)o * net.ldwp + x % net.ldwp] : (S)0.0f;
            }
            wp += (size_t)kWarps * net.ldwp;
        }
        for (int x = threadIdx.x; x < n_out * net.ldw; x += blockDim.x) wp[x] = ((const S *)net.wout)[x];
        wout = wp;
        wp += (size_t)n_out * net.ldw;
        if (f4) {
            /* each unit's four gate rows as float quadruples, w_ih then w_hh: one 16-byte load feeds 4 x 4 FMAs */
            w4_base = (float4 *)((unsigned char *)ws_base + ((size_t)((unsigned char *)wp - (unsigned char *)ws_base) + 15) / 16 * 16);
            float4 *w4 = w4_base;
            for (int l = 0; l < net.n_pred; l++) {
                const cu_dec_fused_layer &L = net.L[l];
                const int nug = (L.H + kWarps - 1) / kWarps, S_ = max(1, nblk / nug), IH = L.I + L.H;
                for (int x = threadIdx.x; x < kWarps * IH; x += blockDim.x) {
                    const int w = x / IH, q = x % IH, j = (bid / S_) * kWarps + w;
                    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    if (bid < nug * S_ && j < L.H)
#pragma unroll
                        for (int g = 0; g < 4; g++)
                            v[g] = cu_ld(q < L.I ? &((const S *)L.w_ih)[(size_t)(g * L.H + j) * L.ld_ih + q]
                                                 : &((const S *)L.w_hh)[(size_t)(g * L.H + j) * L.ld_hh + q - L.I]);
                    w4[x] = make_float4(v[0], v[1], v[2], v[3]);
                }
                w4 += (size_t)kWarps * IH;
            }
            x4 = w4; /* the projection reads its rows from the staged S rows (fp32 copies cost L1: run 3) */
        }
        __syncthreads();
    }
    for (int iter = 1;; iter++) {
        /* per slot: x = emits | live << 1 | (k + 1) << 2, y = e (after the rule) */
        int2 *fl = (int2 *)flags + (size_t)(iter & 1) * nb;
        /* (A) joint + argmax + rule of this block's slots */
        for (int m = 0, b = sb0 + bid; b < sb1; m++, b += nblk) {
            if (!g_done[m]) { /* block-uniform */
                const float *f = net.fproj + ((size_t)b * fstride + g_t[m]) * net.ldf;
                const float *g = net.gp + (size_t)b * net.ldg;
                if (cnt) { /* no grid barrier after the projection: wait for this slot's gp (every output group's part) */
                    if (threadIdx.x == 0) grid_wait_count(cnt + nb + b, ((J + kWarps - 1) / kWarps) * (g_e[m] - st.e[b]));
                    __syncthreads();
                    for (int j = threadIdx.x; j < J; j += blockDim.x) hid[j] = joint_act<RELU>(__fadd_rn(f[j], __ldcg(&g[j])));
                } else {
                    for (int j = threadIdx.x; j < J; j += blockDim.x) hid[j] = joint_act<RELU>(__fadd_rn(f[j], g[j]));
                }
                __syncthreads();
                clu_logits<S, 1, kWarps>(hid, J, wout, net.ldw, net.bout, n_out, warp, lane, zs, 0);
                __syncthreads();
                clu_logit_partials(zs, 1, n_out, warp, lane, wbest, wsum, widx, wbad);
                __syncthreads();
                if (warp == 0) {
                    int bo, anybad;
                    float bv = best_of_warps<kWarps>(wbest, widx, wbad, kCluG, n_out, lane, &bo, &anybad);
                    float p = softmax_of_best_warp<kWarps>(wbest, wsum, kCluG, lane, bv);
                    if (lane == 0) {
                        int kk = (anybad || bo == n_out) ? -1 : bo, emits = 0, live = 0;
                        /* the rule on the shared-memory state: slot m here; tokens, frames and probabilities of
                         * slot b in memory (rows b - m apart so that row m is slot b's) */
                        cu_dec_state lst = st;
                        lst.t = g_t, lst.labels = g_lab, lst.t_enc = g_tenc, lst.n_tok = g_ntok, lst.e = g_e;
                        lst.status = g_status, lst.steps = g_steps, lst.skipped = g_skip, lst.done = g_done;
                        lst.k = g_k, lst.p = g_p;
                        lst.tokens = st.tokens + (size_t)(b - m) * st.cap, lst.frames = st.frames + (size_t)(b - m) * st.cap;
                        lst.probs = st.probs ? st.probs + (size_t)(b - m) * st.cap : NULL;
                        g_k[m] = kk;
                        g_p[m] = kk >= 0 ? p : 0.0f;
                        dec_rule_slot(rule, lst, m, iter > rule.max_iters, &emits, &live);
                        fl[b] = make_int2(emits | (live << 1) | ((kk + 1) << 2), g_e[m]);
                    }
                }
            } else if (threadIdx.x == 0) {
                fl[b] = make_int2(0, 0);
            }
            __syncthreads(); /* hid, the partials and the slot's state are rewritten for the next slot */
        }
        GRID_T(0);
        gsync();
        GRID_T(1);
        if (tr) tr_c[7]++;
        /* the emitters in ascending order, and whether any slot is live (the same in every block) */
        int n = 0, any = 0;
        for (int b0 = sb0; b0 < sb1; b0 += blockDim.x) {
            const int b = b0 + (int)threadIdx.x;
            const int2 f2 = b < sb1 ? fl[b] : make_int2(0, 0);
            const int fb = f2.x;
            const unsigned em = __ballot_sync(0xffffffffu, fb & 1), lv = __ballot_sync(0xffffffffu, fb & 2);
            if (lane == 0) s_cnt[warp] = __popc(em), s_lv[warp] = lv != 0u;
            __syncthreads();
            int off = n;
            for (int w = 0; w < kWarps; w++) {
                if (w < warp) off += s_cnt[w];
                n += s_cnt[w];
                any |= s_lv[w];
            }
            if (fb & 1) {
                const int r = off + __popc(em & ((1u << lane) - 1u));
                rows[r] = b, rows_e[r] = f2.y, rows_k[r] = (fb >> 2) - 1;
            }
            __syncthreads(); /* s_cnt is rewritten by the next chunk; rows complete */
        }
        GRID_T(2);
        if (!any) break;
        if (n == 0) continue;
        if (tr) tr_c[8]++;
        const int groups = (n + 3) / 4;
        /* (B) the predictor layers of the emitters */
        for (int l = 0; l < net.n_pred; l++) {
            const cu_dec_fused_layer &L = net.L[l];
            const int nu = L.H > bid ? (L.H - bid + nblk - 1) / nblk : 0;
            const S *xemb = l == 0 ? (const S *)net.emb : NULL;
            const S *xh = l == 0 ? NULL : (const S *)net.L[l - 1].h;
            const size_t xpar = l == 0 ? 0 : net.L[l - 1].hpar;
            const int ldx = l == 0 ? net.ld_emb : net.L[l - 1].ldh;
            S *h = (S *)L.h;
            const S *wl = ws_base; /* this layer's staged rows (wsm) */
            for (int l2 = 0; l2 < l; l2++) wl += (size_t)kWarps * 4 * (net.L[l2].ld_ih + net.L[l2].ld_hh);
            /* unit j, emitters r0 .. r0 + 3 */
            auto unit_task = [&](int j, int r0) {
                const int nr = min(4, n - r0);
                const S *wi[4], *wh[4];
#pragma unroll
                for (int g = 0; g < 4; g++) {
                    if (wsm) {
                        wi[g] = wl + (size_t)((j % kWarps) * 4 + g) * (L.ld_ih + L.ld_hh);
                        wh[g] = wi[g] + L.ld_ih;
                    } else {
                        wi[g] = (const S *)L.w_ih + (size_t)(g * L.H + j) * L.ld_ih;
                        wh[g] = (const S *)L.w_hh + (size_t)(g * L.H + j) * L.ld_hh;
                    }
                }
                const S *x[4], *hold[4];
                int bs[4], es[4];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int rr = r0 + min(q, nr - 1), b = rows[rr], e = rows_e[rr];
                    bs[q] = b;
                    es[q] = e;
                    x[q] = xemb ? xemb + (size_t)rows_k[rr] * ldx : xh + (size_t)(e & 1) * xpar + (size_t)b * ldx;
                    hold[q] = h + (size_t)((e - 1) & 1) * L.hpar + (size_t)b * L.ldh;
                }
                float acc[4][4];
                if (nr == 1)
                    clu_unit_dot<S, 1>(x, hold, L.I, L.H, wi, wh, lane, acc);
                else
                    clu_unit_dot<S, 4>(x, hold, L.I, L.H, wi, wh, lane, acc);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    if (q >= nr) break;
                    float a[4];
#pragma unroll
                    for (int g = 0; g < 4; g++) a[g] = __fadd_rn(warp_sum(acc[q][g]), L.bias[g * L.H + j]);
                    if (lane == 0) {
                        const int b = bs[q];
                        float *cp = L.c + (size_t)b * L.ldc + j;
                        float cn, hn;
                        lstm_cell<HARD>(a, *cp, &cn, &hn);
                        *cp = cn;
                        cu_st(&h[(size_t)(es[q] & 1) * L.hpar + (size_t)b * L.ldh + j], hn);
                    }
                }
            };
            if (f4) {
                /* the block's groups of 4 emitters, kGridChunk at a time: their inputs (x, then the old h) as float
                 * quadruples (one per emitter) in shared memory, then warp w runs unit w of the group over them:
                 * lane l sums elements l, l + 32, ... (x part, then h part) as clu_unit_dot does, and the 16 sums
                 * (4 emitters x 4 gates) are reduced in warp_sum's tree with each lane keeping half at each
                 * stage, so lane 2a and 2a + 1 end with sum a = emitter a / 4, gate a % 4: the same bits */
                const int nug = (L.H + kWarps - 1) / kWarps, S_ = max(1, nblk / nug), j = (bid / S_) * kWarps + warp;
                const int IH = L.I + L.H;
                const float4 *w4 = w4_base;
                for (int l2 = 0; l2 < l; l2++) w4 += (size_t)kWarps * (net.L[l2].I + net.L[l2].H);
                w4 += (size_t)warp * IH;
                const float bz = j < L.H ? L.bias[((lane >> 1) & 3) * L.H + j] : 0.0f;
                if (bid < nug * S_)
                    for (int c0 = bid % S_; c0 < groups; c0 += kGridChunk * S_) {
                        const int nch = min(kGridChunk, (groups - c0 + S_ - 1) / S_);
                        if (tr) tr_s0 = clock64();
                        if (vst) /* 16 bytes of each emitter's row a thread (grid_stage_vec) */
                            grid_stage_vec<S>(x4, nch, L.I, L.H, [&](int ci, int r, int part) -> const S * {
                                const int r0 = (c0 + S_ * ci) * 4, rr = r0 + min(r, min(4, n - r0) - 1);
                                const int b = rows[rr], e = rows_e[rr];
                                return part ? h + (size_t)((e - 1) & 1) * L.hpar + (size_t)b * L.ldh
                                            : xemb ? xemb + (size_t)rows_k[rr] * ldx : xh + (size_t)(e & 1) * xpar + (size_t)b * ldx;
                            });
                        /* else 4 elements a thread at a time: their 16 loads in flight together */
                        for (int x0 = threadIdx.x; !vst && x0 < nch * IH; x0 += 4 * blockDim.x) {
                            float v[4][4];
#pragma unroll
                            for (int u = 0; u < 4; u++) {
                                const int x = x0 + u * (int)blockDim.x, xc = min(x, nch * IH - 1);
                                const int ci = xc / IH, q = xc % IH, r0 = (c0 + S_ * ci) * 4, nr = min(4, n - r0);
#pragma unroll
                                for (int r = 0; r < 4; r++) {
                                    const int rr = r0 + min(r, nr - 1), b = rows[rr], e = rows_e[rr];
                                    v[u][r] = cu_ld(q < L.I ? (xemb ? &xemb[(size_t)rows_k[rr] * ldx + q]
                                                                    : &xh[(size_t)(e & 1) * xpar + (size_t)b * ldx + q])
                                                            : &h[(size_t)((e - 1) & 1) * L.hpar + (size_t)b * L.ldh + q - L.I]);
                                }
                            }
#pragma unroll
                            for (int u = 0; u < 4; u++) {
                                const int x = x0 + u * (int)blockDim.x;
                                if (x < nch * IH) x4[x] = make_float4(v[u][0], v[u][1], v[u][2], v[u][3]);
                            }
                        }
                        __syncthreads();
                        if (tr) tr_c[9] += clock64() - tr_s0; /* the inputs' staging, within "layers" */
                        int ci1 = 0; /* the first group of the chunk the one-group loop below takes */
                        /* PAIR (plan.pair, lab): two groups of 4 emitters a pass, 32 sums a lane (each weight quadruple's
                         * load feeds 32 FMAs, twice the independent work a warp has in flight); the 32 sums reduced in
                         * warp_sum's tree as below, each lane keeping half at every stage, so lane l ends with sum l =
                         * emitter l >> 2 of the pair (group ci, then ci + 1), gate l & 3: the same additions, the same bits */
                        for (; PAIR && ci1 + 1 < nch && j < L.H; ci1 += 2) {
                            const float4 *xa = x4 + (size_t)ci1 * IH, *xb = xa + IH;
                            const int pr = lane >> 2, pr0 = (c0 + S_ * (ci1 + (pr >> 2))) * 4, pe = pr & 3;
                            const bool pok = pe < min(4, n - pr0);
                            float cpre = 0.0f;
                            if ((lane & 3) == 0 && pok) cpre = L.c[(size_t)rows[pr0 + pe] * L.ldc + j];
                            float acc[32];
#pragma unroll
                            for (int a = 0; a < 32; a++) acc[a] = 0.0f;
#pragma unroll 2
                            for (int q = lane; q < L.I; q += 32) {
                                const float4 w = w4[q], xv = xa[q], xw = xb[q];
                                const float wg[4] = {w.x, w.y, w.z, w.w}, xr[8] = {xv.x, xv.y, xv.z, xv.w, xw.x, xw.y, xw.z, xw.w};
#pragma unroll
                                for (int r = 0; r < 8; r++)
#pragma unroll
                                    for (int g = 0; g < 4; g++) acc[r * 4 + g] = fmaf(wg[g], xr[r], acc[r * 4 + g]);
                            }
#pragma unroll 2
                            for (int q = lane; q < L.H; q += 32) {
                                const float4 w = w4[L.I + q], xv = xa[L.I + q], xw = xb[L.I + q];
                                const float wg[4] = {w.x, w.y, w.z, w.w}, xr[8] = {xv.x, xv.y, xv.z, xv.w, xw.x, xw.y, xw.z, xw.w};
#pragma unroll
                                for (int r = 0; r < 8; r++)
#pragma unroll
                                    for (int g = 0; g < 4; g++) acc[r * 4 + g] = fmaf(wg[g], xr[r], acc[r * 4 + g]);
                            }
                            bool hi = lane & 16;
#pragma unroll
                            for (int i = 0; i < 16; i++)
                                acc[i] = (hi ? acc[i + 16] : acc[i]) + __shfl_xor_sync(0xffffffffu, hi ? acc[i] : acc[i + 16], 16);
                            hi = lane & 8;
#pragma unroll
                            for (int i = 0; i < 8; i++)
                                acc[i] = (hi ? acc[i + 8] : acc[i]) + __shfl_xor_sync(0xffffffffu, hi ? acc[i] : acc[i + 8], 8);
                            hi = lane & 4;
#pragma unroll
                            for (int i = 0; i < 4; i++)
                                acc[i] = (hi ? acc[i + 4] : acc[i]) + __shfl_xor_sync(0xffffffffu, hi ? acc[i] : acc[i + 4], 4);
                            hi = lane & 2;
#pragma unroll
                            for (int i = 0; i < 2; i++)
                                acc[i] = (hi ? acc[i + 2] : acc[i]) + __shfl_xor_sync(0xffffffffu, hi ? acc[i] : acc[i + 2], 2);
                            hi = lane & 1;
                            const float u1 = (hi ? acc[1] : acc[0]) + __shfl_xor_sync(0xffffffffu, hi ? acc[0] : acc[1], 1);
                            const float z = __fadd_rn(u1, L.bias[(lane & 3) * L.H + j]); /* emitter lane >> 2, gate lane & 3 */
                            float a[4];
#pragma unroll
                            for (int g = 0; g < 4; g++) a[g] = __shfl_sync(0xffffffffu, z, (lane & ~3) + g);
                            if ((lane & 3) == 0 && pok) {
                                const int b = rows[pr0 + pe], e = rows_e[pr0 + pe];
                                float *cp = L.c + (size_t)b * L.ldc + j;
                                float cn, hn;
                                lstm_cell<HARD>(a, cpre, &cn, &hn);
                                *cp = cn;
                                cu_st(&h[(size_t)(e & 1) * L.hpar + (size_t)b * L.ldh + j], hn);
                            }
                        }
                        for (int ci = ci1; ci < nch && j < L.H; ci++) {
                            const float4 *xq = x4 + (size_t)ci * IH;
                            /* vst: the cell state's load issued before the dot products (it was a dependent L2 round
                             * trip after them: c[b][j] was last written by whichever block had b's list position) */
                            float cpre = 0.0f;
                            if (vst && (lane & 7) == 0) {
                                const int r0 = (c0 + S_ * ci) * 4, r = lane >> 3;
                                if (r < min(4, n - r0)) cpre = L.c[(size_t)rows[r0 + r] * L.ldc + j];
                            }
                            float acc[16];
#pragma unroll
                            for (int a = 0; a < 16; a++) acc[a] = 0.0f;
#pragma unroll 4
                            for (int q = lane; q < L.I; q += 32) {
                                const float4 w = w4[q], xv = xq[q];
                                const float wg[4] = {w.x, w.y, w.z, w.w}, xr[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                                for (int r = 0; r < 4; r++)
#pragma unroll
                                    for (int g = 0; g < 4; g++) acc[r * 4 + g] = fmaf(wg[g], xr[r], acc[r * 4 + g]);
                            }
#pragma unroll 4
                            for (int q = lane; q < L.H; q += 32) {
                                const float4 w = w4[L.I + q], xv = xq[L.I + q];
                                const float wg[4] = {w.x, w.y, w.z, w.w}, xr[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                                for (int r = 0; r < 4; r++)
#pragma unroll
                                    for (int g = 0; g < 4; g++) acc[r * 4 + g] = fmaf(wg[g], xr[r], acc[r * 4 + g]);
                            }
                            /* warp_sum's tree (xor 16, 8, 4, 2, 1), each lane keeping the half its lane bit picks */
                            float u8[8], u4[4], u2[2];
                            bool hi = lane & 16;
#pragma unroll
                            for (int i = 0; i < 8; i++)
                                u8[i] = (hi ? acc[i + 8] : acc[i]) + __shfl_xor_sync(0xffffffffu, hi ? acc[i] : acc[i + 8], 16);
                            hi = lane & 8;
#pragma unroll
                            for (int i = 0; i < 4; i++)
                                u4[i] = (hi ? u8[i + 4] : u8[i]) + __shfl_xor_sync(0xffffffffu, hi ? u8[i] : u8[i + 4], 8);
                            hi = lane & 4;
#pragma unroll
                            for (int i = 0; i < 2; i++)
                                u2[i] = (hi ? u4[i + 2] : u4[i]) + __shfl_xor_sync(0xffffffffu, hi ? u4[i] : u4[i + 2], 4);
                            hi = lane & 2;
                            float u1 = (hi ? u2[1] : u2[0]) + __shfl_xor_sync(0xffffffffu, hi ? u2[0] : u2[1], 2);
                            u1 += __shfl_xor_sync(0xffffffffu, u1, 1);
                            const float z = __fadd_rn(u1, bz); /* emitter lane >> 3, gate (lane >> 1) & 3 */
                            const int base8 = lane & ~7;
                            float a[4];
#pragma unroll
                            for (int g = 0; g < 4; g++) a[g] = __shfl_sync(0xffffffffu, z, base8 + 2 * g);
                            const int r0 = (c0 + S_ * ci) * 4, r = lane >> 3;
                            if ((lane & 7) == 0 && r < min(4, n - r0)) {
                                const int b = rows[r0 + r], e = rows_e[r0 + r];
                                float *cp = L.c + (size_t)b * L.ldc + j;
                                float cn, hn;
                                lstm_cell<HARD>(a, vst ? cpre : *cp, &cn, &hn);
                                *cp = cn;
                                cu_st(&h[(size_t)(e & 1) * L.hpar + (size_t)b * L.ldh + j], hn);
                            }
                        }
                        __syncthreads(); /* x4 is restaged */
                        if (cnt && l == net.n_pred - 1 && threadIdx.x < nch * 4) { /* this unit group's h of the chunk's emitters is out */
                            const int r0 = (c0 + S_ * (threadIdx.x >> 2)) * 4, r = threadIdx.x & 3;
                            if (r < min(4, n - r0)) {
                                __threadfence();
                                atomicAdd(cnt + rows[r0 + r], 1);
                            }
                        }
                    }
            } else if (tile) { /* block = (group of kWarps units, slice of the emitter groups); warp w unit w of the group */
                const int nug = (L.H + kWarps - 1) / kWarps, S_ = max(1, nblk / nug), j = (bid / S_) * kWarps + warp;
                if (bid < nug * S_ && j < L.H)
                    for (int grp = bid % S_; grp < groups; grp += S_) unit_task(j, grp * 4);
            } else {
                for (int task = warp; task < nu * groups; task += kWarps) unit_task(bid + nblk * (task % nu), (task / nu) * 4);
            }
            GRID_T(3);
            if (!(cnt && l == net.n_pred - 1)) gsync(); /* the next layer (or the projection) reads every unit's new h */
            GRID_T(4);
        }
        /* (C) the joint's predictor projection of the emitters */
        {
            const cu_dec_fused_layer &T = net.L[net.n_pred - 1];
            const int no = J > bid ? (J - bid + nblk - 1) / nblk : 0;
            const S *wpj = ws_base; /* the staged projection rows (wsm) */
            for (int l2 = 0; l2 < net.n_pred && !f4; l2++) wpj += (size_t)kWarps * 4 * (net.L[l2].ld_ih + net.L[l2].ld_hh);
            auto out_task = [&](int o, int r0) {
                const int nr = min(4, n - r0);
                const S *wr = wsm ? wpj + (size_t)(o % kWarps) * net.ldwp : (const S *)net.wp + (size_t)o * net.ldwp;
                const S *g[4];
                float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int rr = r0 + min(q, nr - 1);
                    g[q] = (const S *)T.h + (size_t)(rows_e[rr] & 1) * T.hpar + (size_t)rows[rr] * T.ldh;
                }
                if (nr == 1)
                    clu_dot_batched<S, S, 1, 1, 8>(g, T.H, &wr, lane, (float(*)[1])s);
                else
                    clu_dot_batched<S, S, 1, 4, 2>(g, T.H, &wr, lane, (float(*)[1])s);
                const float bo = net.jb[o];
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    float v = warp_sum(s[q]);
                    if (lane == 0 && q < nr) net.gp[(size_t)rows[r0 + q] * net.ldg + o] = __fadd_rn(v, bo);
                }
            };
            if (f4) {
                /* as the layers' f4 path: the emitters' h as fp32 quadruples, output w of the block's group per
                 * warp, 4 sums reduced in warp_sum's tree (lane 8 r ends with emitter r's) */
                const int nog = (J + kWarps - 1) / kWarps, S_ = max(1, nblk / nog), o = (bid / S_) * kWarps + warp;
                const int Hl = T.H;
                const S *wq = wpj + (size_t)warp * net.ldwp;
                const float bo = o < J ? net.jb[o] : 0.0f;
                if (bid < nog * S_)
                    for (int c0 = bid % S_; c0 < groups; c0 += kGridChunk * S_) {
                        const int nch = min(kGridChunk, (groups - c0 + S_ - 1) / S_);
                        if (tr) tr_s0 = clock64();
                        if (cnt) { /* no grid barrier after the last layer: wait for the chunk's emitters' h (every unit group) */
                            if (threadIdx.x < nch * 4) {
                                const int r0 = (c0 + S_ * (threadIdx.x >> 2)) * 4, r = threadIdx.x & 3;
                                if (r < min(4, n - r0)) {
                                    const int b = rows[r0 + r];
                                    grid_wait_count(cnt + b, ((Hl + kWarps - 1) / kWarps) * (rows_e[r0 + r] - st.e[b]));
                                }
                            }
                            __syncthreads();
                        }
                        if (vst)
                            grid_stage_vec<S>(x4, nch, Hl, 0, [&](int ci, int r, int) -> const S * {
                                const int r0 = (c0 + S_ * ci) * 4, rr = r0 + min(r, min(4, n - r0) - 1);
                                return (const S *)T.h + (size_t)(rows_e[rr] & 1) * T.hpar + (size_t)rows[rr] * T.ldh;
                            });
                        for (int x0 = threadIdx.x; !vst && x0 < nch * Hl; x0 += 4 * blockDim.x) {
                            float v[4][4];
#pragma unroll
                            for (int u = 0; u < 4; u++) {
                                const int x = x0 + u * (int)blockDim.x, xc = min(x, nch * Hl - 1);
                                const int ci = xc / Hl, q = xc % Hl, r0 = (c0 + S_ * ci) * 4, nr = min(4, n - r0);
#pragma unroll
                                for (int r = 0; r < 4; r++) {
                                    const int rr = r0 + min(r, nr - 1);
                                    v[u][r] = cu_ld(&((const S *)T.h)[(size_t)(rows_e[rr] & 1) * T.hpar + (size_t)rows[rr] * T.ldh + q]);
                                }
                            }
#pragma unroll
                            for (int u = 0; u < 4; u++) {
                                const int x = x0 + u * (int)blockDim.x;
                                if (x < nch * Hl) x4[x] = make_float4(v[u][0], v[u][1], v[u][2], v[u][3]);
                            }
                        }
                        __syncthreads();
                        if (tr) tr_c[10] += clock64() - tr_s0; /* within "proj" */
                        for (int ci = 0; ci < nch && o < J; ci++) {
                            const float4 *xq = x4 + (size_t)ci * Hl;
                            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
                            for (int q = lane; q < Hl; q += 32) {
                                const float w = cu_ld(&wq[q]);
                                const float4 xv = xq[q];
                                acc[0] = fmaf(w, xv.x, acc[0]);
                                acc[1] = fmaf(w, xv.y, acc[1]);
                                acc[2] = fmaf(w, xv.z, acc[2]);
                                acc[3] = fmaf(w, xv.w, acc[3]);
                            }
                            bool hi = lane & 16;
                            float u2[2];
#pragma unroll
                            for (int i = 0; i < 2; i++)
                                u2[i] = (hi ? acc[i + 2] : acc[i]) + __shfl_xor_sync(0xffffffffu, hi ? acc[i] : acc[i + 2], 16);
                            hi = lane & 8;
                            float u1 = (hi ? u2[1] : u2[0]) + __shfl_xor_sync(0xffffffffu, hi ? u2[0] : u2[1], 8);
                            u1 += __shfl_xor_sync(0xffffffffu, u1, 4);
                            u1 += __shfl_xor_sync(0xffffffffu, u1, 2);
                            u1 += __shfl_xor_sync(0xffffffffu, u1, 1);
                            const int r0 = (c0 + S_ * ci) * 4, r = lane >> 3; /* lane 8 r: emitter r's sum */
                            if ((lane & 7) == 0 && r < min(4, n - r0))
                                net.gp[(size_t)rows[r0 + r] * net.ldg + o] = __fadd_rn(u1, bo);
                        }
                        __syncthreads(); /* x4 is restaged */
                        if (cnt && threadIdx.x < nch * 4) { /* this output group's gp of the chunk's emitters is out */
                            const int r0 = (c0 + S_ * (threadIdx.x >> 2)) * 4, r = threadIdx.x & 3;
                            if (r < min(4, n - r0)) {
                                __threadfence();
                                atomicAdd(cnt + nb + rows[r0 + r], 1);
                            }
                        }
                    }
            } else if (tile) {
                const int nog = (J + kWarps - 1) / kWarps, S_ = max(1, nblk / nog), o = (bid / S_) * kWarps + warp;
                if (bid < nog * S_ && o < J)
                    for (int grp = bid % S_; grp < groups; grp += S_) out_task(o, grp * 4);
            } else {
                for (int task = warp; task < no * groups; task += kWarps) out_task(bid + nblk * (task % no), (task / no) * 4);
            }
        }
        GRID_T(5);
        if (!cnt) gsync(); /* the next step's joint reads gp (with cnt: each slot waits for its own gp) */
        GRID_T(6);
    }
#undef GRID_T
    if (tr)
        for (int k = 0; k < 11; k++) trace[k] = tr_c[k];
    for (int m = threadIdx.x, b = sb0 + bid + nblk * m; m < kGridSlots && b < sb1; m += blockDim.x, b += nblk * (int)blockDim.x) {
        st.t[b] = g_t[m], st.labels[b] = g_lab[m], st.n_tok[b] = g_ntok[m], st.e[b] = g_e[m], st.status[b] = g_status[m];
        st.steps[b] = g_steps[m], st.skipped[b] = g_skip[m], st.done[b] = g_done[m], st.k[b] = g_k[m];
    }
}

size_t grid_smem(const cu_dec_fused_net *net, int nb)
{
    return ((size_t)((net->J + 3) & ~3) + (size_t)((net->n_out + 3) & ~3) + 3 * (size_t)nb) * 4;
}

/* The weights k_dec_grid keeps in shared memory with wsm (bytes, after grid_smem rounded up to 16). */
size_t grid_wsm_bytes(const cu_dec_fused_net *net, size_t esz, int f4)
{
    size_t n = (size_t)kWarps * net->ldwp + (size_t)net->n_out * net->ldw;
    for (int l = 0; l < net->n_pred && !f4; l++) n += (size_t)kWarps * 4 * (net->L[l].ld_ih + net->L[l].ld_hh);
    return n * esz;
}

/* f4's float quadruples after that (rounded up to 16): the units' gate rows and the emitters' inputs. */
size_t grid_f4_bytes(const cu_dec_fused_net *net)
{
    size_t w = 0, xmax = 0, hl = (size_t)net->L[net->n_pred - 1].H;
    for (int l = 0; l < net->n_pred; l++) {
        size_t ih = (size_t)net->L[l].I + net->L[l].H;
        w += (size_t)kWarps * ih;
        if (ih > xmax) xmax = ih;
    }
    if (hl > xmax) xmax = hl;
    return (w + (size_t)kGridChunk * xmax) * 16;
}

template <typename S, bool HARD, bool RELU>
rnnt_status launch_grid(cudaStream_t stream, int nb, const cu_dec_grid_plan *pl, cu_dec_rule rule, cu_dec_state st,
                        const cu_dec_fused_net *net, int *flags, char *err, size_t errlen)
{
    auto kern = pl->occ2 ? (pl->pair ? k_dec_grid<S, HARD, RELU, 2, true> : k_dec_grid<S, HARD, RELU, 2, false>)
                         : (pl->pair ? k_dec_grid<S, HARD, RELU, 1, true> : k_dec_grid<S, HARD, RELU, 1, false>);
    CU_TRY(cu_allow_max_smem((const void *)kern));
    cu_dec_fused_net n = *net;
    int tile = pl->tile, wsm = pl->tile && pl->wsm, f4 = wsm && pl->f4, vst = f4 && pl->vst;
    int *cnt = vst && pl->cnt ? flags + 4 * (size_t)nb : NULL; /* [2][nb] after the step flags, zeroed per launch */
    if (cnt) CU_TRY(cudaMemsetAsync(cnt, 0, 2 * (size_t)nb * sizeof(int), stream));
    int nsl = pl->slices, *bar = NULL; /* the slices' barrier counters, 128 bytes apart, after the counters */
    if (nsl > 0) {
        bar = flags + ((6 * (size_t)nb + 31) & ~(size_t)31);
        CU_TRY(cudaMemsetAsync(bar, 0, 32 * (size_t)nsl * sizeof(int), stream));
    }
    long long *trace = pl->trace;
    void *args[] = {(void *)&nb,  (void *)&rule, (void *)&st,  (void *)&n,   (void *)&flags, (void *)&tile, (void *)&wsm,
                    (void *)&f4,  (void *)&vst,  (void *)&cnt, (void *)&nsl, (void *)&bar,   (void *)&trace};
    CU_TRY(cudaLaunchCooperativeKernel((const void *)kern, dim3((unsigned)pl->blocks), dim3(kWarps * 32), args,
                                       pl->smem, stream));
    return RNNT_OK;
}

template <typename S, bool HARD, bool RELU>
int grid_blocks_per_sm(size_t smem, int occ2)
{
    auto kern = occ2 ? k_dec_grid<S, HARD, RELU, 2, false> : k_dec_grid<S, HARD, RELU, 1, false>; /* PAIR: the same bounds */
    int per = 0;
    if (cu_allow_max_smem((const void *)kern) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, kWarps * 32, smem) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return per;
}

} // namespace

int cu_dec_grid_plan_make(const cu_dec_fused_net *net, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb,
                          int blocks_per_sm, int wsm, int occ2, cu_dec_grid_plan *pl, const char **why)
{
    memset(pl, 0, sizeof *pl);
    pl->occ2 = occ2 != 0;
    *why = NULL;
    int sms = 0, optin = 0;
    if (!dec_plan_device(net, cudaDevAttrCooperativeLaunch, "the device has no cooperative launch", &sms, &optin, why))
        return 0;
    pl->smem = grid_smem(net, nb);
    if (pl->smem + 8 * 1024 > (size_t)optin) {
        *why = "the joint's hidden vector does not fit in shared memory";
        return 0;
    }
    if (wsm == 2) { /* the f4 layout where it fits */
        size_t with = ((pl->smem + 15) / 16 * 16 + grid_wsm_bytes(net, dt == CU_F16 ? 2 : 4, 1) + 15) / 16 * 16 +
                      grid_f4_bytes(net);
        if (with + 8 * 1024 <= (size_t)optin) pl->smem = with, pl->wsm = 1, pl->f4 = 1;
    }
    if (wsm && !pl->wsm) { /* the weights too, where they fit beside the rest */
        size_t with = (pl->smem + 15) / 16 * 16 + grid_wsm_bytes(net, dt == CU_F16 ? 2 : 4, 0);
        if (with + 8 * 1024 <= (size_t)optin) pl->smem = with, pl->wsm = 1;
    }
    const bool hard = act == RNNT_ACT_HARD, relu = jact == RNNT_JOINT_RELU;
    int per;
    if (dt == CU_F16)
        per = hard ? (relu ? grid_blocks_per_sm<__half, true, true>(pl->smem, pl->occ2) : grid_blocks_per_sm<__half, true, false>(pl->smem, pl->occ2))
                   : (relu ? grid_blocks_per_sm<__half, false, true>(pl->smem, pl->occ2) : grid_blocks_per_sm<__half, false, false>(pl->smem, pl->occ2));
    else
        per = hard ? (relu ? grid_blocks_per_sm<float, true, true>(pl->smem, pl->occ2) : grid_blocks_per_sm<float, true, false>(pl->smem, pl->occ2))
                   : (relu ? grid_blocks_per_sm<float, false, true>(pl->smem, pl->occ2) : grid_blocks_per_sm<float, false, false>(pl->smem, pl->occ2));
    if (per < 1) {
        *why = "the grid loop's block does not fit on an SM";
        return 0;
    }
    if (blocks_per_sm > 0 && per > blocks_per_sm) per = blocks_per_sm;
    pl->blocks = per * sms;
    if (nb > kGridSlots * pl->blocks) {
        *why = "more slots than the grid loop's blocks hold";
        return 0;
    }
    return 1;
}

int cu_dec_grid_slices_fit(const cu_dec_fused_net *net, const cu_dec_grid_plan *pl, int nb, int want)
{
    if (want < 1) return 0;
    int most = 1; /* the most unit (output) groups of 8 of any phase: each needs a block in every slice */
    for (int l = 0; l <= net->n_pred; l++) {
        const int units = l < net->n_pred ? net->L[l].H : net->J, g = (units + kWarps - 1) / kWarps;
        if (g > most) most = g;
    }
    int nsl = pl->blocks / most;
    nsl = nsl < want ? nsl : want;
    nsl = nsl < nb ? nsl : nb;
    nsl = nsl < CU_DEC_GRID_MAX_SLICES ? nsl : CU_DEC_GRID_MAX_SLICES;
    /* every slice's slots in its blocks' kGridSlots each */
    while (nsl > 0 && (nb + nsl - 1) / nsl > kGridSlots * (pl->blocks / nsl)) nsl--;
    return nsl > 0 ? nsl : 0;
}

int cu_dec_grid_tiles_fit(const cu_dec_fused_net *net, const cu_dec_grid_plan *pl)
{
    for (int l = 0; l <= net->n_pred; l++) {
        const int units = l < net->n_pred ? net->L[l].H : net->J;
        if ((units + kWarps - 1) / kWarps > pl->blocks) return 0;
    }
    return 1;
}

rnnt_status cu_dec_grid(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb,
                        const cu_dec_grid_plan *pl, cu_dec_rule rule, cu_dec_state st, const cu_dec_fused_net *net,
                        int *flags, char *err, size_t errlen)
{
    if (nb <= 0) return RNNT_OK;
    const bool hard = act == RNNT_ACT_HARD, relu = jact == RNNT_JOINT_RELU;
#define RNNT_DG(S)                                                                                             \
    do {                                                                                                       \
        if (hard)                                                                                              \
            return relu ? launch_grid<S, true, true>(stream, nb, pl, rule, st, net, flags, err, errlen)        \
                        : launch_grid<S, true, false>(stream, nb, pl, rule, st, net, flags, err, errlen);      \
        return relu ? launch_grid<S, false, true>(stream, nb, pl, rule, st, net, flags, err, errlen)           \
                    : launch_grid<S, false, false>(stream, nb, pl, rule, st, net, flags, err, errlen);         \
    } while (0)
    if (dt == CU_F16) RNNT_DG(__half);
    RNNT_DG(float);
#undef RNNT_DG
}

