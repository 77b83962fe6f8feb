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

#endif
