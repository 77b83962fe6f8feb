/* stream.h — what an rnnt_stream carries from one chunk to the next (internal to the engine), and the
 * greedy decoder's per-utterance state, which the whole-utterance decode uses too (one decode rule).
 * The public calls are in rnnt.h (section "Streams"); backends advance streams through
 * rnnt_backend_ops.advance.
 * Thread safety: a stream is used by one thread at a time (the caller serialises feeding, advancing
 * and reading it); streams share nothing but the read-only model and frontend. */
#ifndef RNNT_STREAM_H
#define RNNT_STREAM_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_STREAM_MAX_LAYERS 32
/* Input frames a stream holds before they are encoded (an hour at a 10 ms hop): feeding more without
 * advancing is refused with RNNT_ERR_TOO_LARGE, so a stream's memory stays bounded. */
#define RNNT_STREAM_MAX_PENDING 360000

/* Greedy multi-blank decoding of one utterance (FORMAT.md, stage 6), between joint evaluations. */
typedef struct {
    int t;             /* encoder frame the decoder stands on; past the frames that exist after a big
                          blank that skips beyond them (the skip carries into the next chunk) */
    int here;          /* labels emitted on frame t (the max_symbols rule) */
    int label;         /* label the predictor takes before the next joint evaluation: V (the start
                          symbol) at first, -1 when the predictor is up to date */
    rnnt_status status; /* RNNT_OK, or RNNT_ERR_NUMERIC: decoding stopped */
    int *tokens, *frames; /* room for every label the frames given to the decoder can produce */
    float *probs;      /* the same room, or NULL: softmax probability of each emitted label */
    int n_tokens;
    int skipped;       /* sum of (d - 1) over the big blanks taken; the part of the last skip beyond
                          the last frame is taken off once the frame count is final */
    int steps;         /* joint evaluations */
    float *pred_h, *pred_c; /* predictor state, layer l at + l * rnnt_dec_pred_stride(m) */
    float *gp;         /* [J] joint predictor projection of the current label state */
} rnnt_dec_state;

/* Floats between two predictor layers' states in rnnt_dec_state (the widest layer, 64-byte multiple). */
static inline size_t rnnt_dec_pred_stride(const struct rnnt_model *m)
{
    int H = 0;
    for (int l = 0; l < m->n_pred; l++)
        if (m->pred[l].hidden > H) H = m->pred[l].hidden;
    return ((size_t)H + 15) & ~(size_t)15;
}

/* frames_skipped as FORMAT.md counts it, once T_enc is final. */
static inline int rnnt_dec_frames_skipped(const rnnt_dec_state *d, int T_enc)
{
    return d->skipped - rnnt_mb_past_end(d->t, T_enc);
}

struct rnnt_stream {
    const struct rnnt_model *m;
    /* Input: raw (unnormalised) feature frames not yet encoded, [n_feats, F]. A frame-stacking
     * remainder (fewer than k frames) waits here until more input or the end of input. */
    float *feats;
    int n_feats, cap_feats;
    long long frames_in; /* input frames accepted so far */
    int finished;        /* no more input (rnnt_stream_input_finished) */
    int flushed;         /* the encoder has taken all input, the zero-padded last groups included:
                            enc_frames is final */
    /* Audio input: the stream's own frontend state (made on the first samples from the shared
     * rnnt_frontend fe), whose frames are appended to feats. A stream takes features or audio, not
     * both (input_kind). */
    const rnnt_frontend *fe;
    rnnt_frontend_stream *fes;
    int input_kind; /* 0 nothing yet, 1 features, 2 audio */
    /* Encoder: each layer's state, and each time-stacked layer's outputs that do not yet make a full
     * group of time_stack rows (at most time_stack - 1 rows, [rem_rows[l], H_l]). */
    float *enc_h[RNNT_STREAM_MAX_LAYERS], *enc_c[RNNT_STREAM_MAX_LAYERS];
    float *rem[RNNT_STREAM_MAX_LAYERS];
    int rem_rows[RNNT_STREAM_MAX_LAYERS];
    int enc_frames;      /* encoder frames produced (and decoded) so far */
    /* Decoder. */
    rnnt_dec_state dec;
    int tok_cap;
    float *arena;        /* owns enc_h, enc_c, rem, dec.pred_h, dec.pred_c, dec.gp */
    /* A backend that keeps the state on its device (the CUDA backend: a slot of a runner's pool,
     * kernels/cu_stream.h) binds the stream on its first advance: enc_h, enc_c, rem and the predictor
     * state above then stay unused (rem_rows, enc_frames and dec's counters and tokens are kept), no
     * other backend or runner takes the stream, and rnnt_stream_free gives the slot back. */
    struct {
        const void *ops; /* the rnnt_backend_ops that bound it, NULL while none has */
        void *owner;
        int slot;
        void (*release)(void *owner, int slot);
    } dev;
};

/* Room for `more` labels after dec.n_tokens; RNNT_ERR_NOMEM (nothing changed) when it cannot grow. */
rnnt_status rnnt_stream_reserve_tokens(struct rnnt_stream *s, size_t more);
/* Take the first `frames` input frames off the stream (they were encoded). */
void rnnt_stream_drop_frames(struct rnnt_stream *s, int frames);

/* A stream's next chunk at every level, the one rule both backends advance by: *take input frames
 * (at most max_frames, at least one stacked frame; whole groups of the frame stacking unless the end of
 * input is in the chunk), *flush whether it is (the last partial groups are then zero-padded, as the
 * whole utterance pads them), rows[0] stacked input rows, rows[l] input rows of encoder layer l,
 * rows[n_enc] new encoder frames. All zero for a flushed or stopped stream. */
void rnnt_stream_plan_chunk(const struct rnnt_model *m, const struct rnnt_stream *s, int max_frames, int *take, int *flush,
                            int rows[RNNT_STREAM_MAX_LAYERS + 1]);
/* Rows of time-stacked layer l's output left for the next chunk after one of `rows` (as planned):
 * what does not make a whole group of the next layer's input. */
static inline int rnnt_stream_rem_after(const struct rnnt_model *m, const struct rnnt_stream *s, const int *rows, int l)
{
    int have = s->rem_rows[l] + rows[l], whole = rows[l + 1] * m->enc[l].time_stack;
    return have > whole ? have - whole : 0;
}

#ifdef __cplusplus
}
#endif
#endif
