/* cu_wave.h — a layer wavefront of persistent LSTM recurrences: n consecutive encoder layers in ONE
 * persistent kernel, layer l + 1 working on step t while layer l is already further on (issue 16, §1).
 *
 * Each layer's blocks are the blocks of cu_persist.cu (one per CU_PERSIST_U = 8 hidden units, the 32 gate
 * rows of W_hh as mma.sync fragments in registers, h from an L2 double buffer, one arrival counter per
 * layer and step); the layers of a group share the SMs (2 blocks per SM for 2 layers of 1024). The first
 * layer of a group takes its input projection from x (a cuBLAS GEMM over all steps, as before); every
 * later layer computes its own input projection, W_ih h_{l-1}, in chunks of `chunk` steps inside the
 * kernel (W_ih streamed from L2 once per chunk, not once per step), as soon as the layer before has
 * published those steps through a progress counter. Time stacking between the layers of a group works:
 * the stacked input row of step t is the s consecutive output rows t s .. t s + s - 1 of the layer before.
 *
 * Why not all five layers at once: with per-step input projections a wavefront needs W_ih on chip too
 * (5 x 1024 layers: 8 MiB W_hh + 4 x 8 MiB W_ih... 72 MiB in fp16, more than the H100's ~62 MiB of
 * registers and shared memory), and with chunked input projections the 40 MiB of W_hh alone need
 * 5 blocks of 64 KB per SM, more registers than an SM has (kernels/dev/NOTES.md, "Layer wavefront").
 *
 * Numerics: the recurrent product in cu_persist's fixed order (so a layer's result depends on its inputs
 * only, not on the batch); the input projection of the later layers summed in a fixed order (warp K
 * slices in mma order, then the 8 warp partials in order), rounded to fp16 like the cuBLAS path's xproj,
 * so it differs from the layer-by-layer path in rounding only. */
#ifndef RNNT_CU_WAVE_H
#define RNNT_CU_WAVE_H

#include "cu_common.h"

#define CU_WAVE_MAX_LAYERS 5
#define CU_WAVE_CHUNK_DEFAULT 16

typedef struct {
    const __half *w_hh; /* [4H][hp] */
    const __half *w_ih; /* layers after the group's first: [4H][in_w], in_w = stack_in * hp of the layer before */
    const float *bias;  /* [4H] */
    const __half *x;    /* the group's first layer: input projection rows at x + b * ldx_b + t * g4 (no bias) */
    size_t ldx_b;
    const int *len;     /* [nb] steps of each row in this layer (device) */
    __half *y;          /* h rows at y + b * ldy_b + t * hp (0 for t >= len[b] and in the pad columns) */
    size_t ldy_b;
    int T, H, hp, g4, in_w;
    int stack_in;       /* time stack between the layer before and this one (1: none) */
} cu_wave_layer;

/* Whether n layers of H hidden units and up to nb_max rows run as one wave on this device (same H in
 * every layer, every block co-resident). */
int cu_wave_fits(int n, int H, int nb_max);

/* Scratch bytes for n layers of up to nb_max rows and hp columns; zeroed once before its first use
 * (kernels leave it reusable). */
size_t cu_wave_scratch_bytes(int n, int nb_max, int hp);

/* The recurrences of layers[0..n) for rows b < nb. layers[0].x is the input projection; layer i > 0 reads
 * layers[i - 1].y. chunk: steps per in-kernel input projection (0: CU_WAVE_CHUNK_DEFAULT; cut to fit the
 * shared memory). Every layer must have the same H. */
rnnt_status cu_lstm_wave(cudaStream_t stream, rnnt_lstm_act act, int nb, int n, const cu_wave_layer *layers, int chunk,
                         void *scratch, size_t scratch_bytes, char *err, size_t errlen);

/* Every layer in ONE persistent kernel with the recurrent weights on chip (issue 16 §1; kernels/dev/NOTES.md,
 * "All layers in flight, W_hh on chip"): one block of 512 threads per SM owns 8 units of every layer,
 * W_hh of layers 0-1 in registers and of layers 2-4 in shared memory (64 KB per layer and block), one
 * grid barrier per wavefront step; layers >= 1 project their inputs in chunks of `chunk` steps in the
 * shadow of a barrier. Same H in every layer, H <= 1024, up to 8 rows (fewer where shared memory is
 * short: 3 rows for 5 layers). layers[0].x is the input projection (no bias); `stagger` delays each later
 * layer by that many extra steps so the layers' chunk projections fall on different steps (-1: chunk / 4).
 * stage: -1 the defaults; otherwise bits: 1 copies every layer's h rows into shared memory with cp.async
 * before the products (one L2 round trip per step instead of one per layer) where shared memory allows
 * (5 layers of 1024: 1 row; measured slower, never by default); CU_WAVE_CHIP_LEAN the projection one m-tile a
 * sweep (no W_hh fragment spilled; RNNT_CUDA_WAVE_CHIP_LEAN=1 with stage -1, or CU_WAVE_CHIP_LEAN_DEFAULT). Rows: n nb <= 16 (one warp per layer and row for the cell).
 * Every y row is written in full (zeros past len). */
int cu_wave_chip_fits(int n, int H, int nb);
/* fp16 runners of at most this many rows run every encoder layer this way by default (cu_encoder.cu): measured
 * on the H100, bench_encoder in the same process as cuDNN, 5 x 1024: B = 1 2.43-2.48 ms against 3.66 for layer by
 * layer (cuDNN 2.61-2.67); B = 2 / 3 (session 7) 2.85 / 3.31 ms against the persistent default's 3.74 / 3.83 (cuDNN
 * 3.74 / 3.81) (kernels/dev/NOTES.md, "All layers in flight" and "The on-chip wavefront, session 7") */
#define CU_WAVE_CHIP_AUTO_MAX_B 3
#define CU_WAVE_CHIP_LEAN 2
/* the lean projection (no W_hh fragment spilled) is off by default: measured no faster at B = 1 (2.42 vs 2.43 ms)
 * and slower at B = 2-3 (2.92 / 3.47 vs 2.85 / 3.31 ms) (session 7, kernels/dev/NOTES.md) */
#define CU_WAVE_CHIP_LEAN_DEFAULT 0
size_t cu_wave_chip_scratch_bytes(int n, int nb, int H, int hp, int chunk);
rnnt_status cu_lstm_wave_chip(cudaStream_t stream, rnnt_lstm_act act, int nb, int n, const cu_wave_layer *layers, int chunk,
                              int stagger, int stage, void *scratch, size_t scratch_bytes, char *err, size_t errlen);

#endif
