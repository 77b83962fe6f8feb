/* cu_weights.h — a model's weights on the device: one allocation carved into named tensors, in the
 * storage type of the runner (fp16 or fp32), laid out for the kernels. Immutable after upload; one
 * copy per runner (runners on one device could share it; not done yet).
 * Thread safety: created and freed by its runner's thread; only read (on the device) in between.
 *
 * Layout: row-major. Every matrix a GEMM reads has its leading dimension padded to CU_PAD elements
 * with zero columns. An LSTM layer's input columns follow the padded layout of what feeds it, so that
 * frame stacking and time stacking stay views: the input of encoder layer 0 is k slots of Fp columns
 * (slot s, feature f at column s*Fp + f), that of layer l > 0 is s_{l-1} slots of Hp_{l-1} columns. */
#ifndef RNNT_CU_WEIGHTS_H
#define RNNT_CU_WEIGHTS_H

#include "cu_common.h"

typedef struct {
    int input;      /* I: real input width */
    int in_w;       /* padded input width = leading dimension of w_ih */
    int hidden;     /* H */
    int hp;         /* round_up(H, CU_PAD): leading dimension of w_hh and of every h buffer */
    int g4;         /* round_up(4H, CU_PAD): leading dimension of gate pre-activation rows */
    int time_stack; /* s */
    int proj;       /* P of a projection LSTM, 0 = none (encoder only) */
    int out;        /* R = proj ? P : H: width of the output rows and of the recurrent h */
    int ow;         /* padded R: round_up(P, CU_PAD) for a projection LSTM, else hp; the leading
                       dimension of output rows (and of w_hh for a projection LSTM) */
    void *w_ih;     /* [4H][in_w] */
    void *w_hh;     /* [4H][hp], a projection LSTM's [4H][ow] */
    float *bias;    /* [4H], b_ih + b_hh */
    void *w_hr;     /* [P][hp] or NULL */
    float *ln_w, *ln_b; /* [R] LayerNorm of the output, or NULL */
} cu_lstm_w;

typedef struct {
    cu_dtype dt;
    rnnt_lstm_act act;
    rnnt_joint_act joint_act;
    int F, fp, k;            /* feature width, padded, frame stacking */
    const float *mean, *sd;  /* device [F] normalisation (x - mean) / sd, NULL when the model has none */
    int n_enc;
    cu_lstm_w *enc;          /* host array of device pointers */
    int E, ep;               /* embedding width, padded */
    void *emb;               /* [V + 1][ep] */
    int n_pred;
    cu_lstm_w *pred;
    int J, jp;
    int he, hep, hp_pred, hpp; /* last encoder / predictor hidden, padded */
    void *jenc_w;            /* [J][hep] */
    void *jpred_w;           /* [J][hpp] */
    float *jbias;            /* [J]: joint.enc.bias + joint.pred.bias, added with the predictor side */
    void *jout_w;            /* [n_out][jp] */
    float *jout_b;           /* [n_out] */
    int V, n_out, blank, n_big, max_symbols;
    int durations[RNNT_MAX_BIG_BLANKS];
    int subsampling;         /* k * prod(time_stack) */
    void *arena;
    size_t bytes;
} cu_weights;

/* Upload m in storage type dt. An fp16 upload fails with RNNT_ERR_UNSUPPORTED when a weight does not
 * fit in fp16 (the message says to use precision fp32). */
rnnt_status cu_weights_upload(const struct rnnt_model *m, cu_dtype dt, cu_weights *w, char *err,
                              size_t errlen);
void cu_weights_free(cu_weights *w);

#endif
