/* cpu_ops.h — fp32 CPU compute primitives (internal): the CPU backend is built from them, and every
 * GPU kernel is checked against its twin here. Row-major everywhere.
 * Thread safety: no state of their own; each writes only the outputs and scratch it is given, so any
 * number of threads may call them on disjoint buffers.
 *
 * Batch invariance: OpenBLAS may pick a different kernel (and so a different summation order) for
 * different matrix shapes. Every product whose rows are utterances of a batch therefore runs through
 * rnnt_cpu_gemm_nt_rows (cpu_rows.c), where each output is a fixed expression of its own row alone, so
 * the arithmetic for one utterance is the same whatever else shares its batch. The products over one
 * utterance's own frames (encoder input projections, the joint's encoder projection) run through it
 * too: a frame's result then does not depend on how many frames are projected together, which makes a
 * stream fed in chunks of any size compute exactly what the whole utterance does (OpenBLAS does not
 * guarantee that: on this project's machine its 1- and 3-row sgemm give other bits for a row). */
#ifndef RNNT_CPU_OPS_H
#define RNNT_CPU_OPS_H

#include "cpu_rows.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* PyTorch's hardsigmoid / hardtanh; NaN propagates (FORMAT.md, NaN policy): a NaN fails both
 * comparisons and comes out as itself. No branch of its own, so loops over them vectorise. */
static inline float rnnt_hardsigmoid(float x)
{
    float y = x / 6.0f + 0.5f;
    return y <= 0.0f ? 0.0f : (y >= 1.0f ? 1.0f : y);
}
static inline float rnnt_hardtanh(float x) { return x <= -1.0f ? -1.0f : (x >= 1.0f ? 1.0f : x); }
float rnnt_sigmoidf(float x);

/* C[M,N] = A[M,K] · B[N,K]^T + beta·C, through cblas_sgemm, for any M (one-utterance shapes). */
void rnnt_cpu_gemm_nt(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc);
/* The same for rows that belong to different utterances: rnnt_cpu_gemm_nt_rows, cpu_rows.h. */

/* LSTM cell update for M rows: pre [M, 4H] holds the gate pre-activations (both biases included), gates
 * i f g o; h, c [M, H] are updated in place. */
void rnnt_cpu_lstm_pointwise(rnnt_lstm_act act, int M, int H, const float *pre, int ldpre, float *h,
                             int ldh, float *c, int ldc);

/* LayerNorm of M rows of N: y = (x - mean) / sqrt(var + 1e-5) * w + b, var the biased variance, the
 * sums in double (y may be x). The CPU twin of cu_layer_norm_step. */
void rnnt_cpu_layer_norm(int M, int N, const float *x, int ldx, const float *w, const float *b, float *y, int ldy);

/* One LSTM layer over one utterance from zero state: x [T, I] -> y [T, R] (R = rnnt_lstm_out: a
 * projection LSTM's output is P wide; a layer with LayerNorm gives its normalised output).
 * scratch: rnnt_cpu_lstm_sequence_scratch(L, T) floats. */
size_t rnnt_cpu_lstm_sequence_scratch(const rnnt_lstm_layer *L, int T);
void rnnt_cpu_lstm_sequence(const rnnt_lstm_layer *L, rnnt_lstm_act act, int T, const float *x,
                            float *y, float *scratch);

/* One LSTM step for M rows of different utterances: x [M, I] (row stride ldx), h, c [M, H] in place.
 * scratch: rnnt_cpu_lstm_step_scratch(L, M) floats. */
size_t rnnt_cpu_lstm_step_scratch(const rnnt_lstm_layer *L, int M);
void rnnt_cpu_lstm_step(const rnnt_lstm_layer *L, rnnt_lstm_act act, int M, const float *x, int ldx,
                        float *h, float *c, float *scratch);

/* rnnt_cpu_lstm_step in its two halves, bit for bit the same: the input product pre = W_ih x
 * ([M, 4H], row stride 4H; a row's bits depend only on its x row, so rows made once and kept, e.g.
 * one per predictor label, stand in for it), then pre += W_hh h, + bias, and the gates (pre is
 * overwritten). */
void rnnt_cpu_lstm_input_product(const rnnt_lstm_layer *L, int M, const float *x, int ldx, float *pre);
void rnnt_cpu_lstm_step_from_input(const rnnt_lstm_layer *L, rnnt_lstm_act act, int M, float *pre,
                                   float *h, float *c);

/* One LSTM layer over n utterances, each continuing from its own state: x[b] [rows[b], I] ->
 * y[b] [rows[b], R]; h[b] ([R]) and c[b] ([H]) carry the state in and out (zeros for a fresh
 * utterance). Projection LSTMs and the layer's LayerNorm (of y, not of the carried h) included.
 * pre[b]: rows[b] * 4H floats of scratch per utterance; work: rnnt_cpu_lstm_layer_batch_work(L, n)
 * floats. Every row of every product runs through rnnt_cpu_gemm_nt_rows, so an utterance's outputs
 * and final state depend neither on its batch nor on how its frames were split into calls. */
size_t rnnt_cpu_lstm_layer_batch_work(const rnnt_lstm_layer *L, int n);
void rnnt_cpu_lstm_layer_batch(const rnnt_lstm_layer *L, rnnt_lstm_act act, int n, const int *rows,
                               const float *const *x, float *const *y, float *const *h, float *const *c,
                               float *const *pre, float *work);

/* Normalisation + frame stacking of one utterance: feats [T, F] -> out [ceil(T/k), kF]. */
void rnnt_cpu_frontend(const struct rnnt_model *m, const float *feats, int T, float *out);

/* Encoder of n utterances as one batch, layer by layer through rnnt_cpu_lstm_layer_batch from zero
 * state (input projection of each utterance's frames, the recurrence over the utterances still running), time stacking
 * as a view of zero-padded outputs. out[b] receives [T_enc_b, He] (T_enc from
 * rnnt_model_encoder_frames). scratch: rnnt_cpu_encoder_scratch_batch(m, n, frames) floats.
 * hook, when not NULL, sees each layer's output of each utterance before time stacking. */
typedef void (*rnnt_layer_hook)(void *user, int layer, int utt, int T, int H, const float *y);
size_t rnnt_cpu_encoder_scratch_batch(const struct rnnt_model *m, int n, const int *frames);
void rnnt_cpu_encode_batch(const struct rnnt_model *m, int n, const rnnt_input *in, float *const *out,
                           float *scratch, rnnt_layer_hook hook, void *user);

/* The same for one utterance: feats [T, F] -> out [T_enc, He]; returns T_enc. layer_out, when not
 * NULL, receives a pointer to each layer's output before time stacking (inside scratch).
 * scratch: rnnt_cpu_encoder_scratch(m, T) floats. */
size_t rnnt_cpu_encoder_scratch(const struct rnnt_model *m, int T);
int rnnt_cpu_encode(const struct rnnt_model *m, const float *feats, int T, float *out, float *scratch,
                    const float **layer_out);

/* Joint encoder projection of T frames: f [T, He] -> fp [T, J] (joint.enc bias included). */
void rnnt_cpu_joint_enc_proj(const struct rnnt_model *m, int T, const float *f, float *fp);
/* Joint predictor projection of M rows: g [M, Hp] -> gp [M, J] (joint.pred bias included). */
void rnnt_cpu_joint_pred_proj(const struct rnnt_model *m, int M, const float *g, float *gp);
/* Full joint output of one (frame, label-state) pair: logits [n_out]. hidden: J floats of scratch. */
void rnnt_cpu_joint_logits(const struct rnnt_model *m, const float *fp_row, const float *gp_row,
                           float *logits, float *hidden);
/* Argmax of the joint for M pairs; fp_rows[i] / gp_rows[i] point at J floats each. Ties go to the lowest
 * index. Returns -1 for a pair whose outputs are not all finite. scratch: J + n_out floats. */
void rnnt_cpu_joint_argmax(const struct rnnt_model *m, int M, const float *const *fp_rows,
                           const float *const *gp_rows, int *argmax, float *scratch);
/* The same, and prob[i] (when prob is not NULL) = the softmax probability of the argmax,
 * 1 / sum_k exp(logit_k - logit_max): n_out exps per pair, next to the J x n_out product. */
void rnnt_cpu_joint_argmax_prob(const struct rnnt_model *m, int M, const float *const *fp_rows,
                                const float *const *gp_rows, int *argmax, float *prob, float *scratch);

#ifdef __cplusplus
}
#endif
#endif
