/* cu_decoder.h — batched greedy multi-blank decoding on the GPU (FORMAT.md stage 6), each utterance
 * with its own frame index, the loop kept on the device: one CUDA graph per slot count holds the
 * predictor's start step and a WHILE conditional node whose body is one decoding step (fused
 * joint+argmax, the rule, the predictor step of the utterances that emitted, their joint projection);
 * the update kernel ends the loop when no utterance is active. Results are written by a pack kernel
 * straight into mapped pinned host memory: one transfer per batch, no host round trip per step.
 *
 * Modes: CU_DEC_WHILE (the above), CU_DEC_HOST (the same step kernels launched from the host, which
 * checks for the end every `poll` steps: the fallback when conditional nodes are unavailable), and
 * CU_DEC_PROFILE (host loop with events around each phase: the time split, at the cost of a sync per
 * step), CU_DEC_FUSED (the whole loop in one kernel, cu_dec_fused.h, built from the same device
 * functions), CU_DEC_CLUSTER (the whole loop in one kernel per cluster of blocks with the predictor's
 * weights in shared memory, cu_dec_cluster in cu_dec_fused.h), CU_DEC_GRID (the whole loop in one cooperative
 * launch over the device, the emitters' predictor spread over every block between grid barriers, cu_dec_grid), and
 * CU_DEC_AUTO (the default: the cluster loop with one slot per cluster of 16 blocks of 16 warps up to
 * CU_DEC_AUTO_CLUSTER16_MAX utterances, of 8 blocks up to CU_DEC_AUTO_CLUSTER_MAX, where it fits; the grid loop
 * above, where its f4 layout fits; the WHILE graph otherwise). All modes give the same results (fp32:
 * bitwise, label probabilities included; fp16: the same tokens). One thread at a time. */
#ifndef RNNT_CU_DECODER_H
#define RNNT_CU_DECODER_H

#include "cu_kernels.h"
#include "cu_weights.h"

typedef enum { CU_DEC_WHILE = 0, CU_DEC_HOST = 1, CU_DEC_PROFILE = 2, CU_DEC_FUSED = 3, CU_DEC_CLUSTER = 4,
               CU_DEC_AUTO = 5, CU_DEC_GRID = 6 } cu_dec_mode;
/* CU_DEC_AUTO's cluster-loop bounds, in utterances (the slots are rounded up to 8), from bench_engine's decode
 * loop on the shipped model (H100, fp16, 10 s utterances, tests/gpu/results/h100-2026-11-24-s3-decode2/), a slot
 * per cluster of 16 warps a block: 16 blocks a cluster 1.95 / 2.06 / 2.30 / 2.32 ms at B 1 / 2 / 4 / 6 but 3.75
 * at 8 (the eighth cluster of 16 waits for SMs); 8 blocks a cluster 2.91 at 7 and 8, 3.01 at 12, 4.97 at 16;
 * the WHILE graph 4.21 / 5.17 / 6.24 / 6.41 / 6.48 / 6.41 / 6.97 / 6.95 there, and ahead at 32 (7.6 against 7.9
 * with 2 slots per cluster of 8). */
#define CU_DEC_AUTO_CLUSTER16_MAX 6 /* up to this many slots: clusters of 16 blocks, else of 8 */
#define CU_DEC_AUTO_CLUSTER_MAX 15  /* above this many utterances: the grid loop (16 before; run 2 of
                                       tests/gpu/results/h100-2026-11-25-s2-decode5/, decode loop ms at B 8 / 12 / 13 / 14 /
                                       15 / 16: cluster loop 2.78 / 3.06 / 3.05 / 3.06 / 3.04 / 5.21, grid loop in slices
                                       3.69 / 4.36 / 4.36 / 4.37 / 4.36 / 4.36) */
/* Above CU_DEC_AUTO_CLUSTER_MAX, CU_DEC_AUTO takes the grid loop (cu_dec_grid) with its f4 layout (tile 3) where
 * that fits in shared memory (the shipped model: yes; the MLPerf-shaped predictor 2 x 320: no), else the WHILE
 * graph: run 2 of tests/gpu/results/h100-2026-11-24-s4-decode3/ (shipped model, fp16), decode loop ms f4 grid /
 * WHILE: B 24 6.01 / 7.2-7.4, 32 6.18-6.25 / 7.43, 64 7.73 / 10.2, 128 10.47-10.64 / 13.70, 256 14.84-14.88 / 18.43;
 * the cluster loop stays ahead up to 16 (B 16: 5.00 against 5.79). */

typedef struct cu_decoder cu_decoder;

/* mapped = 0: the pack kernel writes a device buffer that one copy brings back (for tools such as
 * compute-sanitizer's racecheck, which crashed on kernel writes to mapped host memory). */
rnnt_status cu_decoder_create(const cu_weights *w, cudaStream_t stream, int max_batch, int t_enc_max, int mapped,
                              cu_decoder **out, char *err, size_t errlen);
void cu_decoder_free(cu_decoder *d);

typedef struct {
    double pred_ms, joint_ms, update_ms; /* CU_DEC_PROFILE only */
    int iterations;                      /* CU_DEC_HOST / PROFILE: steps launched */
} cu_dec_profile;

/* Enqueue the decoding of slots b < nb over fproj ([slot][*fstride_dev][jp], fp32) with t_enc_dev[b]
 * encoder frames each; the first n_live slots hold utterances (CU_DEC_AUTO's choice counts them). In CU_DEC_WHILE mode nothing waits; the host modes synchronise. When the
 * WHILE graph cannot be built the decoder switches to CU_DEC_HOST for good (see cu_decoder_mode). */
rnnt_status cu_decoder_run(cu_decoder *d, cu_dec_mode mode, int nb, int n_live, const int *t_enc_dev,
                           const int *fstride_dev, const float *fproj, cu_dec_profile *prof, char *err,
                           size_t errlen);
cu_dec_mode cu_decoder_mode(const cu_decoder *d, const char **note);

/* Decoding steps per iteration of the WHILE graph's body (1..CU_DEC_MAX_UNROLL; default
 * CU_DEC_UNROLL_DEFAULT): the condition is tested once per iteration, so the conditional node's cost
 * (~4.5 us per iteration on the H100) is paid once per `unroll` steps; the up to unroll - 1 steps after
 * the last utterance ends change nothing (as the host loop's steps between polls). Drops cached graphs. */
#define CU_DEC_MAX_UNROLL 8
#define CU_DEC_UNROLL_DEFAULT 4
void cu_decoder_set_unroll(cu_decoder *d, int unroll);
/* Slots per block of CU_DEC_FUSED (1, 2, 4 or 8; default CU_DEC_GROUP_DEFAULT; cut to what fits). */
#define CU_DEC_GROUP_DEFAULT 4
void cu_decoder_set_group(cu_decoder *d, int group);
/* Blocks per cluster of CU_DEC_CLUSTER (8, the default, or 16), warps per block (8, the default, or 16)
 * and slots per cluster (0: as many as spread the batch over the device's SMs; else at most
 * CU_DEC_CLUSTER_MAX_G). */
void cu_decoder_set_cluster(cu_decoder *d, int cluster, int warps, int slots);
/* Blocks per SM of CU_DEC_GRID (0, the default: as many as fit) and its work split (tile 1: a block per group of
 * units and slice of the emitters; 2: the same with its weights in shared memory where they fit; 3, the default: the
 * same with the dot products on fp32 quadruples where they fit (cu_dec_grid_plan.f4); 0: units spread one by one). */
#define CU_DEC_GRID_TILE_DEFAULT 3
void cu_decoder_set_grid(cu_decoder *d, int blocks_per_sm, int tile);
/* Its f4 staging: vst 1 (the default) 16 bytes a thread and the cell state loaded before the dot products; 0 element by
 * element (cu_dec_grid_plan.vst); cnt 1: per-slot counters instead of the grid barriers after the last predictor layer
 * and the projection (cu_dec_grid_plan.cnt; with vst only), 0 the barriers, -1 (the default) counters up to
 * CU_DEC_GRID_CNT_AUTO_MAX utterances; occ 1 or 2: the kernel built for that many blocks an SM (-1, the default: 1 up
 * to CU_DEC_GRID_OCC1_AUTO_MAX utterances, 2 above). The rule from tests/gpu/results/h100-2026-11-25-s1-decode4 (decode
 * loop ms, shipped model): counters win at 24-64 in either build; one block an SM (~195 registers) wins to 128, two
 * (128) at 256; only combinations the large-batch test ran at their sizes (2 an SM with counters at 128-256 measured
 * 3% faster still, not yet tested there: kernels/dev/NOTES.md). */
#define CU_DEC_GRID_VST_DEFAULT 1
#define CU_DEC_GRID_CNT_AUTO_MAX 64
#define CU_DEC_GRID_OCC1_AUTO_MAX 192
/* With slices (the default since tests/gpu/results/h100-2026-11-25-s2-decode5, run 1; decode loop ms, shipped model,
 * slices / counters / two blocks an SM): counters won at every size (128: 7.91 against 8.24-8.30 without; 256: 10.11
 * against 10.87-10.89) and two blocks an SM from 128 (7.15 against 7.91; 64: 5.52 against 5.39), so the bounds above
 * apply without slices only, and these with them (run 2, B 80 / 96 / 112: one block an SM 5.79 / 6.38 / 7.08, two 6.17 /
 * 6.45 / 6.92). */
#define CU_DEC_GRID_SL_CNT_AUTO_MAX 1000000
#define CU_DEC_GRID_SL_OCC1_AUTO_MAX 96
void cu_decoder_set_grid_staging(cu_decoder *d, int vst, int cnt, int occ);
/* Its slices (cu_dec_grid_plan.slices): 0 one loop over every block with grid barriers; n >= 1 up to n independent
 * slices of the blocks, each owning its slots, with barriers of its own (as many as fit: cu_dec_grid_slices_fit); -1
 * (the default): CU_DEC_GRID_MAX_SLICES (as many as fit) from CU_DEC_GRID_SLICES_AUTO_MIN utterances up (0: never).
 * Run 1 of tests/gpu/results/h100-2026-11-25-s2-decode5 (decode loop ms, the other settings by their rules): B 32 4.69-4.76
 * against 4.82-4.84, 64 5.43-5.49 / 5.51, 128 8.24-8.30 / 8.24, 256 10.87-10.89 / 11.09-11.14, and more with counters at
 * every size (CU_DEC_GRID_SL_*). */
#define CU_DEC_GRID_SLICES_AUTO_MIN 1
void cu_decoder_set_grid_slices(cu_decoder *d, int slices);
/* Its layers' f4 dot products two groups of 4 emitters a pass (cu_dec_grid_plan.pair; 1 on, 0 off, -1 the default:
 * CU_DEC_GRID_PAIR_DEFAULT 1 = on with one block an SM, where its 32 accumulators fit in registers: run 1 of
 * tests/gpu/results/h100-2026-11-25-s2-decode5, with slices, B 32 4.62 against 4.76, 64 5.23 / 5.39; with two blocks an
 * SM (128 registers) it lost: 128 7.35 / 7.15, 256 10.31 / 10.16). */
#define CU_DEC_GRID_PAIR_DEFAULT 1
void cu_decoder_set_grid_pair(cu_decoder *d, int pair);
int cu_decoder_unroll(const cu_decoder *d);

/* Results of slot b after the stream has been synchronised (see cu_dec_pack for the layout):
 * status 0 = ok, 1 = non-finite joint output, 2 = loop overran its bound (a bug). */
typedef struct {
    int n_tok, steps, skipped, status, t_final;
    const int *tokens, *frames;
    const float *probs; /* the joint's softmax probability of each token (cu_dec_state.p) */
} cu_dec_result;
cu_dec_result cu_decoder_result(const cu_decoder *d, int b);
size_t cu_decoder_device_bytes(const cu_decoder *d);

#endif
