/* cu_dec_fused.cu — the decoding loop of a batch in one kernel (see cu_dec_fused.h). */
#include "cu_dec_fused.h"

#include <math.h>

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
    __shared__ double wsum[kWarps][G]; /* as k_joint_argmax's, for the emitted label's probability */
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
        double sum[G];
        int bi[G], bad[G];
#pragma unroll
        for (int i = 0; i < G; i++) {
            best[i] = -INFINITY;
            sum[i] = 0.0;
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
                    if (st.probs) sum[i] = sum[i] * exp((double)best[i] - (double)z) + 1.0;
                    best[i] = z;
                    bi[i] = o;
                } else if (st.probs) {
                    sum[i] += exp((double)z - (double)best[i]);
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
        /* argmax across warps (as k_joint_argmax's thread 0), then the rule, per live slot */
        if (threadIdx.x < G) {
            int i = threadIdx.x, b = base + i, emits = 0, live = 0;
            if (s_live[i]) {
                float bv = -INFINITY;
                int bo = net.n_out, anybad = 0;
                for (int w = 0; w < kWarps; w++) {
                    anybad |= wbad[w][i];
                    if (widx[w][i] == net.n_out) continue;
                    if (bo == net.n_out || wbest[w][i] > bv || (wbest[w][i] == bv && widx[w][i] < bo)) {
                        bv = wbest[w][i];
                        bo = widx[w][i];
                    }
                }
                st.k[b] = (anybad || bo == net.n_out) ? -1 : bo;
                if (st.probs && st.k[b] >= 0) st.p[b] = softmax_of_best(&wbest[0][i], &wsum[0][i], kWarps, G, bv);
                dec_rule_slot(rule, st, b, iter > rule.max_iters, &emits, &live);
            }
            s_emits[i] = emits;
            s_live[i] = live;
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
