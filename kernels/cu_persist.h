/* cu_persist.h — the recurrence of one LSTM layer over all time steps in ONE persistent kernel (fp16
 * storage, fp32 accumulation, tensor cores), for small batches where per-step GEMM launches are
 * latency-bound. Each block owns CU_PERSIST_U hidden units: their four gate rows of W_hh stay in shared
 * memory for the whole sequence, as does their cell state; per step a block reads h_{t-1} of every unit
 * (double-buffered in global memory), multiplies on the tensor cores (wmma 16x16x16), updates its
 * units and writes h_t; one grid-wide barrier per step (cooperative launch).
 *
 * Numerics: the same gate order, activations and cell update as cu_lstm_pointwise; the recurrent
 * product is summed in a fixed order (four k-quarters, then added), independent of the batch, so an
 * utterance's result does not depend on the others in the batch. It differs from the cuBLAS path in
 * rounding only, so a runner uses one path for every batch (chosen by max_batch at create).
 *
 * Status: correct (tests pass) but slower than the default per-step graph path on the H100 (7.2 vs 5.7
 * us per step at H=1024, B=1; see kernels/dev/NOTES.md): opt-in with RNNT_CUDA_PERSIST=1. */
#ifndef RNNT_CU_PERSIST_H
#define RNNT_CU_PERSIST_H

#include "cu_common.h"

#define CU_PERSIST_U 8      /* hidden units per block */
#define CU_PERSIST_MAX_B 64 /* batch rows per launch */

/* Whether a layer of H hidden units and up to nb_max rows can run persistently on this device
 * (enough SMs for one block per CU_PERSIST_U units, enough shared memory); fills *blocks. */
int cu_persist_fits(int H, int nb_max, int *blocks);

/* The recurrence for rows b < nb over T steps: x (fp16) rows at x + b * ldx_b + t * g4 hold the input
 * projection (no bias), y (fp16) rows at y + b * ldy_b + t * hp receive h (0 for t >= len[b] and in the
 * pad columns), hbuf is scratch of 2 * round_up(nb, 16) * hp halves. */
rnnt_status cu_lstm_persist(cudaStream_t stream, rnnt_lstm_act act, int nb, int T, int H, int hp, int g4,
                            const __half *w_hh, const float *bias, const __half *x, size_t ldx_b, const int *len,
                            __half *y, size_t ldy_b, __half *hbuf, char *err, size_t errlen);

#endif
