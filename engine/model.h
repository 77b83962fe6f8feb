/* model.h — the loaded model as the backends see it (internal to the engine and kernels).
 * All weights are fp32, contiguous, in one arena owned by the model; immutable after load.
 * Thread safety: read-only after rnnt_model_load, so every thread, runner and stream shares one. */
#ifndef RNNT_MODEL_H
#define RNNT_MODEL_H

#include "multiblank.h"
#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_MAX_BIG_BLANKS 8

typedef struct {
    int input, hidden, time_stack;
    int proj;          /* P of a projection LSTM (h = W_hr (o * phi(c))), 0 = none (encoder only) */
    const float *w_ih; /* [4H, I], gates i f g o */
    const float *w_hh; /* [4H, R], R = rnnt_lstm_out(layer) */
    const float *b_ih; /* [4H] */
    const float *b_hh; /* [4H] */
    const float *bias; /* [4H] = b_ih + b_hh, folded at load */
    const float *w_hr; /* [P, H] or NULL */
    const float *ln_w, *ln_b; /* [R] each: LayerNorm over the output (layer_norm: true), else NULL */
} rnnt_lstm_layer;

#define RNNT_LAYER_NORM_EPS 1e-5f

/* R: the width of a layer's output and of its recurrent h (P for a projection LSTM, else H). */
static inline int rnnt_lstm_out(const rnnt_lstm_layer *L) { return L->proj ? L->proj : L->hidden; }

/* A layer the persistent / wavefront / fused recurrence kernels do not implement. */
static inline int rnnt_lstm_layer_plain(const rnnt_lstm_layer *L) { return !L->proj && !L->ln_w; }

/* frontend.normalize */
enum { RNNT_NORM_NONE = 0, RNNT_NORM_GLOBAL = 1, RNNT_NORM_PER_FEATURE = 2, RNNT_NORM_PER_FEATURE_STACKED = 3 };

typedef struct {
    int sample_rate, win_length, hop_length, n_fft, n_mels, center;
    double preemphasis, dither, power, f_min, f_max, log_floor;
    char window[16], mel_scale[16], mel_norm[16];
    int normalize;        /* RNNT_NORM_*: global mean/std; per utterance over frames, or over stacked frames */
    int pad_reflect;      /* center: pad with the signal's reflection (1) or zeros (0) */
    int log_add;          /* log guard: ln(mel + log_floor) (1) or ln(max(mel, log_floor)) (0) */
    double spectrum_offset; /* added to |X|^power before the filterbank */
    int length_hop_ceil;  /* length: hop_ceil (the Jasper/MLPerf frame count rule) */
    int stacking;         /* the model's frame_stacking (hop_ceil counts stacked frames) */
} rnnt_frontend_cfg;

/* True when only the CPU frontend computes this model's features (options cu_frontend.cu lacks) or
 * when a decode needs the whole utterance's features before the first frame (per-utterance statistics). */
static inline int rnnt_frontend_cfg_cpu_only(const rnnt_frontend_cfg *c)
{
    return c->center || c->log_add || c->spectrum_offset != 0.0 || c->length_hop_ceil || c->normalize >= RNNT_NORM_PER_FEATURE;
}

struct rnnt_model {
    rnnt_model_info info;
    char name[72];
    rnnt_frontend_cfg fe;
    int feature_dim, stacking;
    int stacking_drop;      /* stacking_tail: drop: floor(T/k) stacked frames, the partial last group dropped */
    rnnt_lstm_act act;
    int n_enc;
    rnnt_lstm_layer *enc;
    int embed_dim;
    const float *embedding; /* [V + 1, E] */
    int n_pred;
    rnnt_lstm_layer *pred;
    int joint_dim;
    rnnt_joint_act joint_act;
    const float *joint_enc_w, *joint_enc_b;   /* [J, He], [J] */
    const float *joint_pred_w, *joint_pred_b; /* [J, Hp], [J] */
    const float *joint_out_w, *joint_out_b;   /* [n_out, J], [n_out] */
    int vocab;      /* V */
    int n_big;      /* n */
    int durations[RNNT_MAX_BIG_BLANKS];
    int n_out;      /* V + n + 1 */
    int blank;      /* V + n */
    int max_symbols;
    const float *fe_mean, *fe_std; /* [F] or NULL */
    char **tokens;  /* V strings */
    float *arena;   /* owns every weight above */
    size_t arena_floats;
};

/* Duration of joint output k when it is a big blank, else 0. */
static inline int rnnt_big_blank_duration(const struct rnnt_model *m, int k)
{
    if (k < m->vocab || k >= m->blank) return 0;
    return rnnt_mb_advance(k, m->vocab, m->blank, m->durations);
}

/* Frames after stacking `frames` frames by `s` (ceil, zero padded). */
static inline int rnnt_stacked_len(int frames, int s) { return (frames + s - 1) / s; }

#ifdef __cplusplus
}
#endif
#endif
