/* cu_dec_fused.h — the greedy multi-blank decoding loop of a batch in one launch (after the predictor's
 * first step): block g owns the slots [g G, g G + G) and runs, step after step until all of them are
 * done, the joint + argmax of each live slot, the rule, the predictor layers and the joint's predictor
 * projection of the slots that emitted, with block barriers only: no slot of a batch depends on
 * another, so no grid-wide synchronisation and no per-step launch or conditional node. Every piece
 * computes the bits of the per-step kernels (the same device functions, cu_device.cuh), so the results
 * are identical to the WHILE-graph loop's. The weights are read from L2 by every block every step
 * (nothing kept on chip yet); so it suits small predictors (the shipped model) more than large ones.
 * Thread safety: a launcher only enqueues on the stream it is given; the decoder that owns the buffers
 * (cu_decoder.h) is used by one thread at a time. */
#ifndef RNNT_CU_DEC_FUSED_H
#define RNNT_CU_DEC_FUSED_H

#include "cu_kernels.h"

#define CU_DEC_FUSED_MAX_PRED 8

typedef struct {
    const void *w_ih, *w_hh; /* [4H][ld_ih], [4H][ld_hh] */
    const float *bias;       /* [4H] */
    int I, ld_ih, H, ld_hh;
    void *h;                 /* [2][slots][ldh] by parity of e */
    size_t hpar;
    int ldh;
    float *c;                /* [slots][ldc] */
    int ldc;
} cu_dec_fused_layer;

typedef struct {
    int n_pred;
    cu_dec_fused_layer L[CU_DEC_FUSED_MAX_PRED];
    const void *emb;         /* [V + 1][ld_emb]: layer 0's input row k */
    int ld_emb;
    const void *wp;          /* joint predictor projection [J][ldwp] */
    int ldwp;
    const float *jb;         /* [J] */
    int J;
    float *gp;               /* [slots][ldg] */
    int ldg;
    const void *wout;        /* joint output [n_out][ldw] */
    int ldw;
    const float *bout;       /* [n_out] */
    int n_out;
    const float *fproj;      /* [slot][*fstride_dev][ldf] */
    int ldf;
    const int *fstride_dev;
} cu_dec_fused_net;

/* Largest supported group (slots per block) of at most `group` for this net (1, 2, 4 or 8), or 0 when
 * none fits (the per-slot joint hidden vector, G x J floats, must fit in 48 KB of shared memory; at most
 * CU_DEC_FUSED_MAX_PRED predictor layers). */
int cu_dec_fused_group(const cu_dec_fused_net *net, int group);

rnnt_status cu_dec_fused(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb, int group,
                         cu_dec_rule rule, cu_dec_state st, const cu_dec_fused_net *net, char *err, size_t errlen);

/* The same loop with a thread-block cluster of C blocks (8, or 16 where the device allows it) per group
 * of G slots (issue 16 §3): the predictor's units and the joint projection's outputs are split across
 * the cluster's blocks, whose rows of the weights (and biases) stay in shared memory for the whole
 * loop (a net whose rows do not fit is not run: use 16 blocks, or the WHILE loop); block 0 runs the joint, argmax and rule of the group with the decoder state in shared memory
 * and tells the others which slots emitted; each block's new h (and gp) goes to the blocks that read it
 * through distributed shared memory, one cluster barrier per layer and one after the projection. Steps
 * without an emitter involve block 0 alone. Every sum in the per-step kernels' order (lstm_unit_dot,
 * joint_logit's order), so the bits of the WHILE loop. */
#define CU_DEC_CLUSTER_MAX_G 16
typedef struct {
    int C, G, clusters, W;                /* blocks per cluster, slots per cluster, clusters, warps per block */
    size_t smem;                          /* dynamic shared memory per block */
    size_t o_hid, o_gp, o_wout, o_bout, o_emb, o_proj, o_jb, o_stage; /* byte offsets in it */
    int ldgs;                             /* row stride of block 0's gp rows (floats, a multiple of 8) */
    size_t o_w[CU_DEC_FUSED_MAX_PRED], o_b[CU_DEC_FUSED_MAX_PRED], o_h[CU_DEC_FUSED_MAX_PRED], o_c[CU_DEC_FUSED_MAX_PRED];
    int U[CU_DEC_FUSED_MAX_PRED];         /* unit slots per block and layer (a multiple of the warps) */
    int P;                                /* projection rows per block */
    int V;                                /* embedding rows - 1 */
    long long *trace;                     /* NULL, or [2][16] device words: phase clocks of blocks 0 and 1 */
    int chain;                            /* lab (RNNT_CUDA_DEC_CLUSTER_CHAIN=1): the one-load-at-a-time dot products */
    int fcache;                           /* block 0 keeps each slot's joint input row f[t] and prefetches the next */
    size_t o_fa, o_fb;                    /* the rows in use and prefetched ([G][J] floats each), when fcache */
} cu_dec_cluster_plan;

/* The plan for nb slots with clusters of `cluster` blocks (8 or 16) of `warps` warps (8 or 16) and `slots` slots each (0: enough
 * clusters to cover the SMs, at most CU_DEC_CLUSTER_MAX_G slots each); 0 when this net or device cannot
 * run it (then *why says so). */
int cu_dec_cluster_plan_make(const cu_dec_fused_net *net, cu_dtype dt, int V, int nb, int cluster, int warps,
                             int slots, cu_dec_cluster_plan *pl, const char **why);
rnnt_status cu_dec_cluster(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb,
                           const cu_dec_cluster_plan *pl, cu_dec_rule rule, cu_dec_state st, const cu_dec_fused_net *net,
                           char *err, size_t errlen);

/* The loop of a large batch in one cooperative launch over the whole device (cu_dec_grid, issue 16 §3):
 * each step, every block runs the joint, argmax and rule of its slots (slot b on block b % blocks), a grid
 * barrier, then the predictor layers and the joint projection of the step's emitters spread over every
 * block (unit j / output o on block j % blocks, groups of 4 emitters per warp task), a grid barrier after
 * each. The sums are the per-step kernels' (the cluster loop's dot products, k_joint_argmax's warp groups
 * for the label probability), so the bits are the WHILE graph's. */
typedef struct {
    int blocks;   /* all co-resident: blocks per SM x SMs */
    size_t smem;  /* dynamic shared memory per block */
    int tile;     /* 1: a block takes kWarps units (outputs) and a slice of the emitters, so its warps share the
                     emitters' inputs in L1; 0: units spread one by one over the blocks */
    int wsm;      /* with tile: the block's unit and projection rows and the joint's output layer in shared memory */
    int f4;       /* with wsm: the unit rows as fp32 gate quadruples and the emitters' inputs staged as fp32 emitter
                     quadruples (16-byte loads, 16 FMAs each, no conversions), the sums reduced in warp_sum's tree */
    int vst;      /* with f4: the emitters' inputs staged 16 bytes a thread and the cell state loaded before the dot
                     products (issue 16 §3, session 5; 0: element by element, the c load after the sums) */
    int cnt;      /* with vst: no grid barrier after the last predictor layer and after the projection; per-slot counters
                     instead (each unit / output group raises a slot's after writing its part, the projection and the
                     slot's next joint wait for theirs): one grid barrier a step for a one-layer predictor */
    int slices;   /* 0: one loop over every block, grid barriers (grid.sync); n >= 1: n independent loops of blocks / n
                     blocks each, slice s owning slots [nb s / n, nb (s + 1) / n), with barriers of their own
                     (cu_dec_grid_slices_fit says how many fit; issue 16 §3, session 7) */
    int pair;     /* with f4 (lab): the layers' f4 dot products two groups of 4 emitters a pass (32 sums a lane) */
    int occ2;     /* the kernel compiled for two blocks an SM (at most 128 registers a thread; else as many as it needs:
                     ~195 with vst, so one block an SM) */
    long long *trace; /* NULL, or 11 device words: block 0's phase clocks (lab) */
} cu_dec_grid_plan;
/* blocks_per_sm: at most this many (0: as many as fit); wsm: 1 the weights in shared memory where they fit, 2 the
 * f4 layout where it fits (else as 1); occ2: the build of the kernel for two blocks an SM (cu_dec_grid_plan.occ2). 0 when it cannot run here (*why says why). */
int cu_dec_grid_plan_make(const cu_dec_fused_net *net, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb,
                          int blocks_per_sm, int wsm, int occ2, cu_dec_grid_plan *pl, const char **why);
/* Whether the tiled splits (tile) fit: each group of 8 units of every layer, and of the projection's outputs, needs a
 * block of its own (a predictor above 1,056 units at one block an SM on the H100 does not fit; units would be left
 * uncomputed). */
int cu_dec_grid_tiles_fit(const cu_dec_fused_net *net, const cu_dec_grid_plan *pl);
/* The number of slices (cu_dec_grid_plan.slices) up to `want` that fit plan pl for nb slots: each slice needs a block for
 * every group of 8 units of each layer and of the projection's outputs, at least one slot, and room for its slots in
 * its blocks; at most CU_DEC_GRID_MAX_SLICES. 0 when none fits (or want < 1). */
#define CU_DEC_GRID_MAX_SLICES 64
int cu_dec_grid_slices_fit(const cu_dec_fused_net *net, const cu_dec_grid_plan *pl, int nb, int want);
/* flags: device ints [2][nb][2] (16-byte aligned), then [2][nb] (cnt), then with slices from 6 nb rounded up to 32:
 * [slices][32] (the slices' barrier counters); the caller allocates CU_DEC_GRID_FLAG_INTS(nb). */
#define CU_DEC_GRID_FLAG_INTS(nb) (6 * (size_t)(nb) + 32 + 32 * (size_t)CU_DEC_GRID_MAX_SLICES)
rnnt_status cu_dec_grid(cudaStream_t stream, cu_dtype dt, rnnt_lstm_act act, rnnt_joint_act jact, int nb,
                        const cu_dec_grid_plan *pl, cu_dec_rule rule, cu_dec_state st, const cu_dec_fused_net *net,
                        int *flags, char *err, size_t errlen);

#endif
