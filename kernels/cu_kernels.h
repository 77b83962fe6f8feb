/* cu_kernels.h — the backend's own kernels and their launchers (GEMMs go through cu_gemm.h). Each
 * kernel has a CPU twin in engine/cpu_ops.h and a check in tests/gpu/test_cuda_kernels.cu.
 *
 * Every launcher enqueues on `stream` (capturable into a CUDA graph) and returns the launch status;
 * none synchronises. Row-major everywhere; "ld" = elements between rows. dt is the storage type of
 * the buffers typed void*.
 * Thread safety: launchers keep no state, except the process-wide setting of cu_pred_set_rows_at_once
 * (for benchmarks and tests: set it before any runner decodes). */
#ifndef RNNT_CU_KERNELS_H
#define RNNT_CU_KERNELS_H

#include "cu_common.h"

/* Normalisation, zero padding and cast of a batch of utterances into the input of encoder layer 0:
 * raw holds the utterances' frames back to back ([sum frames][F] fp32); utterance b starts at frame
 * off[b] and has frames[b] frames. x0[b][t][f] (T rows of fp columns per utterance, nb utterances) is
 * (raw - mean[f]) / sd[f] for t < frames[b], f < F, else 0 (mean == NULL: no normalisation). */
rnnt_status cu_frontend(cudaStream_t stream, cu_dtype dt, int nb, int T, int F, int fp, const float *raw,
                        const int *off, const int *frames, const float *mean, const float *sd, void *x0,
                        char *err, size_t errlen);

/* The fused LSTM cell of one time step t for rows b < nb: gate pre-activations
 * a = x[b] + bias (+ hproj[b] when hproj != NULL), gates i f g o (blocks of H), then
 * c = f c + i g (c taken as 0 when hproj == NULL, i.e. at t = 0), h = o phi(c).
 *   x     [dt]  row of b at x + b * ldx_b (stride 4H ≥ gates)   — the input projection at step t
 *   hproj [f32] row of b at hproj + b * ldh                      — the recurrent GEMM at step t
 *   c     [f32] row of b at c + b * ldc, updated in place
 *   y     [dt]  row of b at y + b * ldy_b, hp columns: h, zeros in the pad columns [H, hp)
 *   hs    [dt]  row of b at hs + b * ldhs, hp columns: the same (the next step's GEMM operand)
 * len (may be NULL): rows with t >= len[b] only get y = 0 (their state is left alone): zero output
 * beyond an utterance's end is what makes the next layer's time stacking a view. */
rnnt_status cu_lstm_pointwise(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, int nb, int H, int hp,
                              const void *x, size_t ldx_b, const float *hproj, int ldh, const float *bias,
                              float *c, int ldc, void *y, size_t ldy_b, void *hs, int ldhs, const int *len,
                              int t, char *err, size_t errlen);

/* The whole recurrent step of small batches in ONE kernel (the GEMM h_{t-1}·W_hh^T and the cell of
 * cu_lstm_pointwise): warp per hidden unit, h_{t-1} of all rows staged in shared memory. For nb <= bt
 * rows, bt = cu_step_fused_rows(max rows) (8, 16 or 32; 0 = not applicable). h_in / h_out [rows][hp] must
 * differ (other blocks still read h_{t-1}); c [rows][hp]; t == 0 reads no h_in (zero state). Rows with
 * t >= len[b] get y = 0 and keep their state. Same arithmetic for a row whatever else is in the launch,
 * but not the cuBLAS path's: a runner uses one of the two for all its batches.
 * Status: correct but slower than the cuBLAS graph path (L2-latency-bound; kernels/dev/NOTES.md):
 * opt-in with RNNT_CUDA_FUSED=1. */
int cu_step_fused_rows(int rows);
rnnt_status cu_lstm_step_fused(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, int bt, int nb, int H, int hp,
                               const void *w_hh, const void *h_in, void *h_out, const void *x, size_t ldx_b,
                               const float *bias, float *c, void *y, size_t ldy_b, const int *len, int t, char *err,
                               size_t errlen);

/* Decoder state on the device, one entry per utterance slot (cap = token capacity per utterance). */
typedef struct {
    int *t, *labels, *t_enc, *n_tok, *e, *status, *steps, *skipped, *done, *k;
    int *emit;   /* compacted list of the utterances whose predictor steps next, ascending */
    int *counts; /* [0] emitters, [1] active utterances, [2] iterations, [3] overrun flag */
    int *tokens, *frames; /* [slots][cap] */
    int cap;
    float *p;     /* [slots] the joint's softmax probability of k[b] (written with k), or NULL */
    float *probs; /* [slots][cap] p of each emitted token, or NULL (then p is not read) */
} cu_dec_state;

/* The joint's softmax probability of the argmax o*, as the CPU backend computes it
 * (rnnt_cpu_joint_argmax_prob): 1 / sum_o exp(z_o - z_o*), the sum in double. */

/* Fused joint + argmax for utterances b < nb that are not done: with f = fproj row
 * (b * fstride + t[b]) (fstride read from *fstride_dev when fstride_dev != NULL, else fstride) and
 * g = gp row b, k[b] = argmax_o (W_out[o] · act(f + g) + b_out[o]), ties to the lowest o; -1 when any
 * output is not finite; p[b] (when p != NULL) the softmax probability of k[b] (above). The logits
 * never reach memory. */
rnnt_status cu_joint_argmax(cudaStream_t stream, cu_dtype dt, rnnt_joint_act act, int nb, int J, int n_out,
                            const float *fproj, int ldf, int fstride, const int *fstride_dev,
                            const float *gp, int ldg, const void *wout, int ldw, const float *bout,
                            const int *t, const int *done, int *k, float *p, char *err, size_t errlen);

/* One LSTM layer step of the predictor for the utterances in emit[0 .. *count): row r is utterance
 * b = emit[r], which has done e[b] predictor steps including this one. Its state is double-buffered by
 * parity: h_old = h + ((e-1)&1) * hpar + b * ldh, h_new at parity e&1; c [f32] (b * ldc) in place.
 * Input: layer 0 (xemb != NULL) the embedding row k[b] of xemb (row stride ldx); else the new h of the
 * layer below: xh + (e&1) * xpar + b * ldx. I, H real widths. w_ih [4H][ld_ih], w_hh [4H][ld_hh]. */
rnnt_status cu_pred_layer(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, int max_rows, const int *emit,
                          const int *count, const int *e, const int *k, const void *xemb, const void *xh,
                          size_t xpar, int ldx, int I, const void *w_ih, int ld_ih, const void *w_hh,
                          int ld_hh, const float *bias, int H, void *h, size_t hpar, int ldh, float *c,
                          int ldc, char *err, size_t errlen);

/* Joint predictor projection for the same rows: gp[b][n] = W_pred[n] · g + jb[n], n < J, with g the
 * new top-layer h (parity e[b]&1, width Hl). */
/* Rows the predictor kernels take at once, at most (1, 2, 4 or 8; default CU_PRED_ROWS_DEFAULT; the
 * results do not depend on it). Process-wide: a benchmark knob (RNNT_CUDA_PRED_ROWS), set by each
 * runner's creation. */
#define CU_PRED_ROWS_DEFAULT 4
void cu_pred_set_rows_at_once(int rows);

rnnt_status cu_pred_proj(cudaStream_t stream, cu_dtype dt, int max_rows, const int *emit, const int *count,
                         const int *e, const void *h, size_t hpar, int ldh, int Hl, const void *w, int ldw,
                         const float *jb, int J, float *gp, int ldg, char *err, size_t errlen);

/* Start of a batch's decoding for slots b < nb: every slot gets t = 0, no tokens, e = 1, k = the start
 * symbol V, done = (t_enc[b] == 0), and is listed as an emitter (the start step of the predictor). */
rnnt_status cu_dec_init(cudaStream_t stream, int nb, const int *t_enc_src, int V, cu_dec_state st, char *err,
                        size_t errlen);

typedef struct {
    int V, blank, n_big, max_symbols, max_iters;
    int durations[RNNT_MAX_BIG_BLANKS];
} cu_dec_rule;

/* The greedy multi-blank rule (FORMAT.md stage 6) applied to every slot's k: emits, moves t, marks
 * done, rebuilds the emitter list; then sets the WHILE conditional `cond` (when use_cond) to
 * "some slot is still active", and writes the active count to counts[1] and to *active_host when not
 * NULL. One block. */
rnnt_status cu_dec_update(cudaStream_t stream, int nb, cu_dec_rule rule, cu_dec_state st, int use_cond,
                          cudaGraphConditionalHandle cond, int *active_host, char *err, size_t errlen);

/* Results of slots b < nb into out (host-mapped): slot b at out + b * CU_DEC_OUT_INTS(cap):
 * [n_tok, steps, skipped, status, t_final, 0, 0, 0, tokens[n_tok], frames[n_tok], probs[n_tok]]
 * (probs as float bits; 0 when st.probs is NULL), n_tok cut to cap. */
#define CU_DEC_OUT_INTS(cap) (8 + 3 * (size_t)(cap))
rnnt_status cu_dec_pack(cudaStream_t stream, int nb, cu_dec_state st, int *out, char *err, size_t errlen);

#endif
