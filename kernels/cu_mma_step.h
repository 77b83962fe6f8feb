/* cu_mma_step.h — one recurrent LSTM step for larger batches as ONE tensor-core kernel: the GEMM
 * h_{t-1} · W_hh^T (mma.sync m16n8k16, fp16 in, fp32 accumulate, cp.async pipeline) with the gate
 * activations and the cell update in its epilogue, so the fp32 gates never reach memory and a step is
 * one graph node instead of two (issue 16 §2; the per-step path otherwise runs a cuBLAS GEMM and
 * cu_lstm_pointwise).
 *
 * Tiling: a block owns `units` hidden units (their 4 x units gate rows of W_hh, so the cell's four gates
 * meet in the block) and `rows` batch rows; 8 warps. Its W_hh rows (all of K, up to CU_MMA_MAX_HP) are
 * loaded into shared memory first, with the cell's x and bias, before the block waits for the previous
 * step (programmatic dependent launch: griddepcontrol; RNNT_CUDA_MMA_PDL=0 launches plainly); then h_{t-1}
 * streams through a ring of cp.async chunks. Every output's dot product runs over K in one fixed
 * order (k16 steps in turn, the mma's own order inside), whatever the tile shape, the batch or the row's
 * place in it: results are batch-invariant and do not depend on the tile. They differ from the cuBLAS
 * path in rounding only, so a runner uses one path for all its batches (cu_encoder.h: mma_step).
 *
 * Numerics of the cell: a = (x + bias) + (W h), then lstm_cell, as cu_lstm_pointwise. fp16 only.
 *
 * Status (H100, kernels/dev/NOTES.md, "GEMM + cell in one kernel"): correct, but slower than cuBLAS +
 * the cell kernel at H = 1024 (B = 64 11.4 vs ~7.5 us per step; B = 256 20 vs 10.7): with one block of
 * 8 warps per SM the mma.sync / cp.async instruction stream is issue-latency-bound (ncu: 6.3 cycles
 * between issues per warp, 28% SM throughput). Faster at H = 512, B = 64 (bench_encoder 4 x 512: 3.00 vs
 * 3.22 ms). Opt-in: encoder param mma_step = 1 or RNNT_CUDA_MMA_STEP=1.
 * Thread safety: no state. */
#ifndef RNNT_CU_MMA_STEP_H
#define RNNT_CU_MMA_STEP_H

#include "cu_common.h"

/* Widest layer (hp) it takes: a block keeps its W_hh rows for all of K in shared memory. */
#define CU_MMA_MAX_HP 1024

/* Tile shapes: (units, rows) = (8, 64), (16, 64), (16, 128). */
typedef enum { CU_MMA_TILE_AUTO = 0, CU_MMA_TILE_8x64 = 1, CU_MMA_TILE_16x64 = 2, CU_MMA_TILE_16x128 = 3 } cu_mma_tile;

/* The tile used for nb rows (AUTO: by nb; RNNT_CUDA_MMA_TILE=1..3 overrides, a lab knob). */
cu_mma_tile cu_mma_step_tile(int nb, cu_mma_tile want);

/* Step t >= 1 for rows b < nb: gates of row b = x[b] + bias + W_hh h_in[b] (x row at x + b * ldx_b, gate
 * g of unit j at g * H + j; h_in / h_out rows of hp columns, ld hp; W_hh [4H][hp], pad columns zero);
 * then c (ld hp) updated in place, h to y (row at y + b * ldy_b) and to h_out (must not alias h_in: other
 * blocks still read it). Pad columns [H, hp) get 0. Rows with t >= len[b] (len may be NULL) only get
 * y = 0; their c and h_out are left alone. */
rnnt_status cu_lstm_mma_step(cudaStream_t stream, rnnt_lstm_act act, cu_mma_tile tile, int nb, int H, int hp,
                             const __half *w_hh, const __half *h_in, __half *h_out, const __half *x, size_t ldx_b,
                             const float *bias, float *c, __half *y, size_t ldy_b, const int *len, int t, char *err,
                             size_t errlen);

#endif
