/* cu_layer_norm.h — the per-layer LayerNorm of an encoder layer's output (FORMAT.md, `layer_norm`,
 * NeMo's RNNEncoder), over every step of a batch after the layer's recurrence. Its CPU twin is
 * rnnt_cpu_layer_norm (engine/cpu_ops.h); tests/gpu/test_cuda_kernels.cu checks it against the twin.
 * Thread safety: no state; enqueues on `stream` (capturable into a CUDA graph). */
#ifndef RNNT_CU_LAYER_NORM_H
#define RNNT_CU_LAYER_NORM_H

#include "cu_common.h"

/* Rows (b, t), b < nb, t < T, at y + b * ldy_b + t * ld (elements of dt): for t < len[b] the first R
 * columns become (x - mean) / sqrt(var + 1e-5) * w + b (var biased; sums in double), in place; rows
 * with t >= len[b] become zero in all ld columns (what the next layer's time stacking reads). */
rnnt_status cu_layer_norm_rows(cudaStream_t stream, cu_dtype dt, int nb, int T, int R, int ld, void *y, size_t ldy_b,
                               const int *len, const float *w, const float *b, char *err, size_t errlen);

#endif
