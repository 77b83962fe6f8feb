/* cu_persist.h — the recurrence of one LSTM layer over all time steps in ONE persistent kernel (fp16
 * storage, fp32 accumulation, tensor cores), for small batches where per-step GEMM launches are
 * latency-bound.
 *
 * Layout: one block (256 threads, one per SM) per CU_PERSIST_U = 8 hidden units; it owns their four gate
 * rows (32 rows of W_hh), held for the whole sequence as mma.sync m16n8k16 A-fragments in REGISTERS
 * (8 warps split K; a permutation of K inside each thread's slice makes every h load 16 bytes wide).
 * Per step each warp reads h_{t-1} of every row (its K slice, from L2) straight into B-fragments (batch
 * = N, 8 rows per n-tile), one fixed-order cross-warp reduction goes through shared memory, the cell
 * update keeps c in registers, and h_t goes to a global double buffer. Blocks synchronise per step
 * either through one arrival counter (red.release + ld.acquire spin: CU_PERSIST_SYNC_COUNTER) or with no
 * barrier at all: every h pair is stored as one 64-bit word {tag, h[k], h[k+1]} and readers retry until
 * the tags say "step t-1" (CU_PERSIST_SYNC_TAGGED, NCCL's LL idea).
 *
 * Numerics: the same gate order, activations and cell update as cu_lstm_pointwise ((x + b) + W h); the
 * recurrent product of a row is summed in a fixed order (each warp's K slice in mma order, then the 8
 * warp partials in order), independent of the batch and of the sync mode, so an utterance's result does
 * not depend on the others in the batch. It differs from the cuBLAS path in rounding only, so a runner
 * uses one path for every batch (chosen by max_batch at create).
 *
 * Steps past the longest row are not run (zero-filled), rows past their length are neither loaded nor
 * computed.
 *
 * Status (H100, kernels/dev/NOTES.md, v3): 2.06 us per layer-step at H = 1024, B = 1 in the lab (per-step
 * graph path 5.7, cuDNN ~1.7); faster than the graph path up to B = 32, slower at 64 (every block reads
 * all of h from L2 each step). AUTO sync: the counter at B <= 8 and B > 32, per-warp sync
 * (SYNC_WARP) at 9-32 rows; tagged h words measured slower everywhere. */
#ifndef RNNT_CU_PERSIST_H
#define RNNT_CU_PERSIST_H

#include "cu_common.h"

#define CU_PERSIST_U 8      /* hidden units per block */
#define CU_PERSIST_MAX_B 64 /* batch rows per launch */
#define CU_PERSIST_MAX_H 1024
/* Encoders of fp16 runners of up to this max_batch use the persistent kernel by default (cu_encoder.h):
 * where it measured faster than the per-step alternatives on the H100 (kernels/dev/NOTES.md: B = 16 5.9 ms vs
 * 6.2 on layer streams; at B = 24 / 32 layer streams win, 6.8 / 7.1 vs 8.4 / 9.9). */
#define CU_PERSIST_AUTO_MAX_B 16

/* COUNTER: one arrival per block (block barrier, red.release), thread 0 spins, block barrier; TAGGED:
 * tagged h words, no barrier; WARP: one arrival per warp on its own counter (no block barrier), every
 * warp spins on the 8 counters itself; WARP_BLOCK: per-warp arrivals, warp 0 spins, block barrier. */
enum {
    CU_PERSIST_SYNC_AUTO = -1,
    CU_PERSIST_SYNC_COUNTER = 0,
    CU_PERSIST_SYNC_TAGGED = 1,
    CU_PERSIST_SYNC_WARP = 2,
    CU_PERSIST_SYNC_WARP_BLOCK = 3
};

/* Whether a layer of H hidden units and up to nb_max rows can run persistently on this device
 * (H <= CU_PERSIST_MAX_H, one block per CU_PERSIST_U units co-resident); fills *blocks. */
int cu_persist_fits(int H, int nb_max, int *blocks);

/* Lab knob: nanoseconds to sleep between polls of the spin waits (0, the default: spin). */
void cu_persist_set_backoff(int ns);

/* Bytes of scratch for layers of up to nb_max rows and hp columns. The scratch must be zeroed once
 * before its first use; kernels leave it reusable (control words reset, tags monotonic). */
size_t cu_persist_scratch_bytes(int nb_max, int hp);

/* The recurrence for rows b < nb over T steps: x (fp16) rows at x + b * ldx_b + t * g4 hold the input
 * projection (no bias), y (fp16) rows at y + b * ldy_b + t * hp receive h (0 for t >= len[b] and in the
 * pad columns). scratch: scratch_bytes (>= cu_persist_scratch_bytes(nb, hp)) bytes, zeroed before its first
 * use. sync: CU_PERSIST_SYNC_* (AUTO: the faster one for nb, measured on the H100). */
rnnt_status cu_lstm_persist(cudaStream_t stream, rnnt_lstm_act act, int nb, int T, int H, int hp, int g4,
                            const __half *w_hh, const float *bias, const __half *x, size_t ldx_b, const int *len,
                            __half *y, size_t ldy_b, void *scratch, size_t scratch_bytes, int sync, char *err,
                            size_t errlen);

#endif
