/* cu_device.cuh — device helpers shared by the decoding kernels (cu_kernels.cu, cu_dec_fused.cu): the
 * warp sum, the LSTM cell, the joint's activation and one output's logit, the predictor's row groups,
 * the greedy multi-blank rule for one slot and one decoding step of a batch (also cu_stream.cu's). One
 * definition each, so every path computes the same bits in the same order.
 * Thread safety: device functions of their arguments; each slot is written by one thread. */
#ifndef RNNT_CU_DEVICE_CUH
#define RNNT_CU_DEVICE_CUH

#include <cub/block/block_scan.cuh>

#include "cu_kernels.h"
#include "multiblank.h"

namespace {

constexpr int kWarps = 8; /* warps per block of the row kernels */

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <bool HARD>
__device__ __forceinline__ float gate_sig(float x)
{
    return HARD ? cu_hardsigmoid(x) : cu_sigmoid(x);
}
template <bool HARD>
__device__ __forceinline__ float gate_tanh(float x)
{
    return HARD ? cu_hardtanh(x) : tanhf(x);
}

/* c' = f c + i g; h' = o phi(c'), without contraction (as the CPU twin computes it). */
template <bool HARD>
__device__ __forceinline__ void lstm_cell(const float a[4], float c_prev, float *c_out, float *h_out)
{
    float i = gate_sig<HARD>(a[0]), f = gate_sig<HARD>(a[1]), g = gate_tanh<HARD>(a[2]);
    float o = gate_sig<HARD>(a[3]);
    float c = __fadd_rn(__fmul_rn(f, c_prev), __fmul_rn(i, g));
    *c_out = c;
    *h_out = __fmul_rn(o, gate_tanh<HARD>(c));
}

template <bool RELU>
__device__ __forceinline__ float joint_act(float v)
{
    return RELU ? (v != v ? v : (v > 0.0f ? v : 0.0f)) : tanhf(v);
}

/* W_out[o] . hid + b_out[o] for one warp: lane-strided partial sums over J, then the xor butterfly
 * (every lane gets the same bits). */
template <typename S>
__device__ __forceinline__ float joint_logit(const S *__restrict__ wr, const float *hid, int J, int lane, float bo)
{
    float s = 0.0f;
    for (int j = lane; j < J; j += 32) s = fmaf(cu_ld(&wr[j]), hid[j], s);
    s = warp_sum(s);
    return __fadd_rn(s, bo);
}

/* The predictor kernels take RB rows (utterances) at a time: each weight a lane loads serves RB rows
 * (RB times fewer weight loads, RB independent FMA chains in flight). Each row's sums keep the one-row
 * order (lane q sums q, q + 32, ... in turn; then warp_sum), so the results are bitwise those of RB = 1
 * whatever RB is. A group of nr < RB rows repeats its last row (not stored); a lone row takes the
 * one-row code, so a batch of one does no padding work. The state pointers (rows, e, k, h, c, gp and
 * the input h) carry no __restrict__: the fused decoding kernel writes them between its own reads, so
 * their loads must not take the non-coherent path. */
/* The gate sums of one predictor unit j for R rows: acc[i][g] = w_ih[g H + j] . x[i] + w_hh[g H + j] . hold[i]
 * as lane-strided partial sums (lane q takes q, q + 32, ...; the input part first), one weight load
 * per R rows. wi / wh: the unit's four gate rows (global or shared memory). */
template <typename S, int R>
__device__ __forceinline__ void lstm_unit_dot(const S *const *x, const S *const *hold, int I, int H, const S *const *wi,
                                              const S *const *wh, int lane, float (*acc)[4])
{
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int g = 0; g < 4; g++) acc[i][g] = 0.0f;
    for (int q = lane; q < I; q += 32) {
        float wv[4];
#pragma unroll
        for (int g = 0; g < 4; g++) wv[g] = cu_ld(&wi[g][q]);
#pragma unroll
        for (int i = 0; i < R; i++) {
            float xv = cu_ld(&x[i][q]);
#pragma unroll
            for (int g = 0; g < 4; g++) acc[i][g] = fmaf(wv[g], xv, acc[i][g]);
        }
    }
    for (int q = lane; q < H; q += 32) {
        float wv[4];
#pragma unroll
        for (int g = 0; g < 4; g++) wv[g] = cu_ld(&wh[g][q]);
#pragma unroll
        for (int i = 0; i < R; i++) {
            float hv = cu_ld(&hold[i][q]);
#pragma unroll
            for (int g = 0; g < 4; g++) acc[i][g] = fmaf(wv[g], hv, acc[i][g]);
        }
    }
}

template <typename S, bool HARD, int R>
__device__ __forceinline__ void pred_layer_rows(int nr, const int *rows, const int *e, const int *k,
                                                const S *__restrict__ xemb, const S *xh, size_t xpar, int ldx, int I,
                                                const S *const *wi, const S *const *wh, const float *__restrict__ bias,
                                                int H, int j, int lane, S *h, size_t hpar, int ldh, float *c, int ldc)
{
    int bs[R], ebs[R];
    const S *x[R], *hold[R];
    float acc[R][4];
#pragma unroll
    for (int i = 0; i < R; i++) {
        int b = rows[min(i, nr - 1)], eb = e[b];
        bs[i] = b;
        ebs[i] = eb;
        x[i] = xemb ? xemb + (size_t)k[b] * ldx : xh + (size_t)(eb & 1) * xpar + (size_t)b * ldx;
        hold[i] = h + (size_t)((eb - 1) & 1) * hpar + (size_t)b * ldh;
    }
    lstm_unit_dot<S, R>(x, hold, I, H, wi, wh, lane, acc);
#pragma unroll
    for (int i = 0; i < R; i++) {
        float a[4];
#pragma unroll
        for (int g = 0; g < 4; g++) a[g] = __fadd_rn(warp_sum(acc[i][g]), bias[g * H + j]);
        if (lane == 0 && i < nr) {
            float *cp = c + (size_t)bs[i] * ldc + j;
            float cn, hn;
            lstm_cell<HARD>(a, *cp, &cn, &hn);
            *cp = cn;
            cu_st(&h[(size_t)(ebs[i] & 1) * hpar + (size_t)bs[i] * ldh + j], hn);
        }
    }
}

template <typename S, int R>
__device__ __forceinline__ void pred_proj_rows(int nr, const int *rows, const int *e, const S *h, size_t hpar, int ldh,
                                               int Hl, const S *__restrict__ wr, float bo, int o, int lane, float *gp,
                                               int ldg)
{
    int bs[R];
    const S *g[R];
    float s[R];
#pragma unroll
    for (int i = 0; i < R; i++) {
        int b = rows[min(i, nr - 1)];
        bs[i] = b;
        g[i] = h + (size_t)(e[b] & 1) * hpar + (size_t)b * ldh;
        s[i] = 0.0f;
    }
    for (int q = lane; q < Hl; q += 32) {
        float wv = cu_ld(&wr[q]);
#pragma unroll
        for (int i = 0; i < R; i++) s[i] = fmaf(wv, cu_ld(&g[i][q]), s[i]);
    }
#pragma unroll
    for (int i = 0; i < R; i++) {
        float v = warp_sum(s[i]);
        if (lane == 0 && i < nr) gp[(size_t)bs[i] * ldg + o] = __fadd_rn(v, bo);
    }
}

/* The joint's argmax across the kWarps warps' partials (stride apart: [w * stride]): each warp's largest
 * finite logit wbest[w] at output widx[w] (n_out: none), wbad[w] = it saw a non-finite one. Called by
 * all 32 lanes of one warp; lane w < kWarps takes warp w's partials and a butterfly over the first
 * kWarps lanes keeps the largest, a tie to the lower output (the serial loop's choice: the indices are
 * distinct, so the order is total and every lane ends with the same). Returns the best logit; *bo its
 * output (n_out when no warp has one), *anybad whether any logit was not finite. */
template <int WARPS = kWarps>
__device__ __forceinline__ float best_of_warps(const float *wbest, const int *widx, const int *wbad, int stride, int n_out,
                                               int lane, int *bo, int *anybad)
{
    static_assert((WARPS & (WARPS - 1)) == 0 && WARPS <= 32, "WARPS: a power of two <= 32");
    float bv = lane < WARPS ? wbest[lane * stride] : -INFINITY;
    int bi = lane < WARPS ? widx[lane * stride] : n_out;
    *anybad = __any_sync(0xffffffffu, lane < WARPS && wbad[lane * stride]);
#pragma unroll
    for (int o = WARPS / 2; o > 0; o >>= 1) {
        float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
        int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
        if (i2 != n_out && (bi == n_out || v2 > bv || (v2 == bv && i2 < bi))) {
            bv = v2;
            bi = i2;
        }
    }
    *bo = bi;
    return bv;
}

/* The softmax probability of the best output (logit bv) from the warps' partials: wsum[w] the sum of
 * exp(z - wbest[w]) over warp w's finite logits (0 for none). 1 / sum_w wsum[w] exp(wbest[w] - bv), one
 * term per lane, summed by a butterfly; all 32 lanes of one warp call it and get the same value. In
 * float: the terms are <= the output count, so float stays within ~1e-7 relative of the CPU's double
 * sum (the tests allow 1e-4). */
template <int WARPS = kWarps>
__device__ __forceinline__ float softmax_of_best_warp(const float *wbest, const float *wsum, int stride, int lane, float bv)
{
    float s = 0.0f;
    if (lane < WARPS && wsum[lane * stride] > 0.0f) s = wsum[lane * stride] * expf(wbest[lane * stride] - bv);
#pragma unroll
    for (int o = WARPS / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return 1.0f / s;
}

/* The greedy multi-blank rule (FORMAT.md stage 6) for slot b, which is not done, given its joint
 * argmax st.k[b]: counts the step, emits (token and frame) or moves t, marks done. *emits: it emitted
 * and is still live (its predictor steps next); *live: t is still inside the utterance. */
__device__ __forceinline__ void dec_rule_slot(const cu_dec_rule &rule, const cu_dec_state &st, int b, int overrun,
                                              int *emits_out, int *live_out)
{
    int emits = 0, live = 0;
    int kk = st.k[b], t = st.t[b], T = st.t_enc[b];
    /* loaded with k, not after the branch: a load there waited a whole L2 round trip per emitted label */
    float pb = st.probs ? st.p[b] : 0.0f;
    st.steps[b] += 1;
    if (overrun) {
        st.status[b] = 2;
        t = T;
    } else if (kk < 0) {
        st.status[b] = 1; /* non-finite joint output at frame t */
        t = T;
    } else if (kk < rule.V) {
        int n = st.n_tok[b];
        if (n < st.cap) {
            st.tokens[(size_t)b * st.cap + n] = kk;
            st.frames[(size_t)b * st.cap + n] = t;
            if (st.probs) st.probs[(size_t)b * st.cap + n] = pb;
        }
        st.n_tok[b] = n + 1;
        st.e[b] += 1;
        emits = 1;
        int lab = st.labels[b] + 1;
        if (lab == rule.max_symbols) {
            t += 1;
            lab = 0;
        }
        st.labels[b] = lab;
    } else { /* the blank or a big blank (multiblank.h) */
        int d = rnnt_mb_advance(kk, rule.V, rule.blank, rule.durations);
        st.skipped[b] += d - 1 - rnnt_mb_past_end(t + d, T);
        t += d;
        st.labels[b] = 0;
    }
    st.t[b] = t;
    if (t >= T) st.done[b] = 1;
    live = t < T;
    emits = emits && live;
    *emits_out = emits;
    *live_out = live;
}

/* One decoding step of the whole batch in one block of THREADS threads (k_dec_update, k_stream_update):
 * the rule for every slot not done, the emitter list rebuilt (st.emit, counts[0]), the live slots
 * counted (counts[1]), the step counted (counts[2]) and an overrun of rule.max_iters flagged
 * (counts[3]). probs: NULL, or [nb, st.cap] that gets pk[b], the probability of each label emitted.
 * Returns the live slots (the same in every thread). */
template <int THREADS>
__device__ __forceinline__ int dec_update_block(int nb, const cu_dec_rule &rule, const cu_dec_state &st,
                                                const float *__restrict__ pk, float *__restrict__ probs)
{
    typedef cub::BlockScan<int, THREADS> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    __shared__ int overrun;
    int iter = st.counts[2] + 1;
    if (threadIdx.x == 0) overrun = iter > rule.max_iters;
    __syncthreads();
    int base = 0, active = 0;
    for (int b0 = 0; b0 < nb; b0 += THREADS) {
        int b = b0 + threadIdx.x;
        int emits = 0, live = 0;
        if (b < nb && !st.done[b]) {
            int n0 = probs ? st.n_tok[b] : 0;
            dec_rule_slot(rule, st, b, overrun, &emits, &live);
            if (probs && st.n_tok[b] > n0 && n0 < st.cap) probs[(size_t)b * st.cap + n0] = pk[b];
        }
        int pos, total;
        scan_t(tmp).ExclusiveSum(emits, pos, total);
        if (emits) st.emit[base + pos] = b;
        base += total;
        active += __syncthreads_count(live);
        __syncthreads(); /* tmp is reused by the next chunk */
    }
    if (threadIdx.x == 0) {
        st.counts[0] = base;
        st.counts[1] = active;
        st.counts[2] = iter;
        if (overrun) st.counts[3] = 1;
    }
    return active;
}

} // namespace

#endif
