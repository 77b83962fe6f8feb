/* stream.c — the public stream calls (rnnt.h, "Streams"): a stream's lifetime, its input, its
 * results; advancing goes to the runner's backend (rnnt_backend_ops.advance). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "stream.h"

rnnt_status rnnt_stream_create(const rnnt_model *m, rnnt_stream **out, char *err, size_t errlen)
{
    if (!out) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no place for the stream given");
    *out = NULL;
    if (!m) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no model given");
    /* Per-utterance statistics and centred frames need the end of the utterance before its first frame. */
    if (m->fe.normalize >= RNNT_NORM_PER_FEATURE || m->fe.center || m->fe.length_hop_ceil)
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "this model cannot be streamed: frontend.%s needs the whole utterance",
                            m->fe.normalize >= RNNT_NORM_PER_FEATURE ? "normalize: per_feature" : m->fe.center ? "center: true" : "length: hop_ceil");
    if (m->stacking_drop)
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "this model cannot be streamed: stacking_tail: drop needs the utterance's end");
    if (m->n_enc > RNNT_STREAM_MAX_LAYERS)
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "%d encoder layers, streams take at most %d", m->n_enc, RNNT_STREAM_MAX_LAYERS);
    /* One arena: per encoder layer h, c and the time-stacking remainder; predictor h, c; gp. */
    size_t HpA = rnnt_dec_pred_stride(m), floats = 0;
    for (int l = 0; l < m->n_enc; l++) {
        size_t H = ((size_t)m->enc[l].hidden + 15) & ~(size_t)15;
        floats += 2 * H + (size_t)(m->enc[l].time_stack - 1) * H;
    }
    floats += 2 * (size_t)m->n_pred * HpA + (size_t)m->joint_dim;
    rnnt_stream *s = calloc(1, sizeof *s);
    float *a = calloc(floats, sizeof(float));
    if (!s || !a) {
        free(s);
        free(a);
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for a stream");
    }
    s->m = m;
    s->arena = a;
    for (int l = 0; l < m->n_enc; l++) {
        size_t H = ((size_t)m->enc[l].hidden + 15) & ~(size_t)15;
        s->enc_h[l] = a;
        s->enc_c[l] = a + H;
        s->rem[l] = a + 2 * H;
        a += 2 * H + (size_t)(m->enc[l].time_stack - 1) * H;
    }
    s->dec.pred_h = a;
    s->dec.pred_c = a + (size_t)m->n_pred * HpA;
    s->dec.gp = a + 2 * (size_t)m->n_pred * HpA;
    s->dec.label = m->vocab; /* the predictor starts from the start symbol */
    s->dec.status = RNNT_OK;
    *out = s;
    return RNNT_OK;
}

void rnnt_stream_free(rnnt_stream *s)
{
    if (!s) return;
    if (s->dev.release) s->dev.release(s->dev.owner, s->dev.slot);
    rnnt_frontend_stream_free(s->fes);
    free(s->feats);
    free(s->dec.tokens);
    free(s->dec.probs);
    free(s->dec.frames);
    free(s->arena);
    free(s);
}

/* Room for `frames` more input frames (the pending limit included); nothing changes on failure. */
static rnnt_status stream_reserve_frames(rnnt_stream *s, long long frames, char *err, size_t errlen)
{
    const size_t F = (size_t)s->m->feature_dim;
    if (frames > RNNT_STREAM_MAX_PENDING - s->n_feats)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%lld input frames would wait unencoded, a stream holds at most %d",
                            s->n_feats + frames, RNNT_STREAM_MAX_PENDING);
    if (s->n_feats + frames > s->cap_feats) {
        int cap = s->cap_feats ? s->cap_feats : 64;
        while (cap < s->n_feats + frames) cap = cap > RNNT_STREAM_MAX_PENDING / 2 ? RNNT_STREAM_MAX_PENDING : cap * 2;
        float *p = realloc(s->feats, (size_t)cap * F * sizeof(float));
        if (!p) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for %d input frames", cap);
        s->feats = p;
        s->cap_feats = cap;
    }
    return RNNT_OK;
}

/* Appends frames that were checked: the one way features enter a stream (the audio path writes its
 * frames in place and counts them the same way). */
static rnnt_status stream_push_features(rnnt_stream *s, const float *x, int frames, char *err, size_t errlen)
{
    rnnt_status st = stream_reserve_frames(s, frames, err, errlen);
    if (st) return st;
    if (frames) memcpy(s->feats + (size_t)s->n_feats * s->m->feature_dim, x, (size_t)frames * s->m->feature_dim * sizeof(float));
    s->n_feats += frames;
    s->frames_in += frames;
    return RNNT_OK;
}

/* What every input call checks first: the stream exists, takes input, and of this kind. */
static rnnt_status stream_check_input(rnnt_stream *s, int kind, char *err, size_t errlen)
{
    if (!s) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no stream given");
    if (s->finished) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s after the end of input", kind == 1 ? "features" : "audio");
    if (s->dec.status != RNNT_OK)
        return rnnt_set_err(err, errlen, s->dec.status, "the stream has stopped: %s at frame %d", rnnt_status_str(s->dec.status), s->dec.t);
    if (s->input_kind && s->input_kind != kind)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s into a stream fed with %s", kind == 1 ? "features" : "audio",
                            kind == 1 ? "audio" : "features");
    return RNNT_OK;
}

/* Samples through the stream's frontend (f32 or s16), frames straight into the pending input. */
static rnnt_status stream_accept_audio(rnnt_stream *s, const rnnt_frontend *fe, const float *xf, const int16_t *xs, size_t n, char *err,
                                       size_t errlen)
{
    rnnt_status st = stream_check_input(s, 2, err, errlen);
    if (st) return st;
    if (!fe) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no frontend given");
    if (n && !xf && !xs) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no samples given for %zu samples", n);
    if (s->fe && s->fe != fe) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "another frontend than the stream's first samples went through");
    if (rnnt_frontend_dim(fe) != s->m->feature_dim)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "the frontend makes %d features per frame, the model expects %d", rnnt_frontend_dim(fe),
                            s->m->feature_dim);
    if (!s->fes) {
        /* Dither seed 0, as rnnt_frontend_compute_f32: a stream's features are the whole utterance's. */
        if ((st = rnnt_frontend_stream_create(fe, 0, &s->fes, err, errlen))) return st;
        s->fe = fe;
        s->input_kind = 2;
    }
    long long frames = rnnt_frontend_stream_frames_after(s->fes, n);
    if ((st = stream_reserve_frames(s, frames, err, errlen))) return st;
    float *out = s->feats + (size_t)s->n_feats * s->m->feature_dim;
    int made = 0;
    st = xf ? rnnt_frontend_feed_f32(s->fes, xf, n, out, frames, &made, err, errlen)
            : rnnt_frontend_feed_s16(s->fes, xs, n, out, frames, &made, err, errlen);
    if (st) return st; /* the frontend consumed nothing */
    s->n_feats += made;
    s->frames_in += made;
    return RNNT_OK;
}

rnnt_status rnnt_stream_accept_audio_f32(rnnt_stream *s, const rnnt_frontend *fe, const float *samples, size_t n, char *err, size_t errlen)
{
    return stream_accept_audio(s, fe, samples, NULL, n, err, errlen);
}

rnnt_status rnnt_stream_accept_audio_s16(rnnt_stream *s, const rnnt_frontend *fe, const int16_t *samples, size_t n, char *err, size_t errlen)
{
    return stream_accept_audio(s, fe, NULL, samples, n, err, errlen);
}

rnnt_status rnnt_stream_accept_features(rnnt_stream *s, const float *features, int frames, int feature_dim, int finite_checked, char *err,
                                        size_t errlen)
{
    rnnt_status st = stream_check_input(s, 1, err, errlen);
    if (st) return st;
    if (feature_dim != s->m->feature_dim)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%d features per frame, the model expects %d", feature_dim, s->m->feature_dim);
    if (frames < 0) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "negative frame count %d", frames);
    if (frames && !features) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no features given for %d frames", frames);
    if (!finite_checked)
        for (size_t i = 0, count = (size_t)frames * feature_dim; i < count; i++)
            if (!isfinite(features[i]))
                return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "non-finite feature at frame %lld, feature %zu",
                                    s->frames_in + (long long)(i / (size_t)feature_dim), i % (size_t)feature_dim);
    if ((st = stream_push_features(s, features, frames, err, errlen))) return st;
    if (frames) s->input_kind = 1;
    return RNNT_OK;
}

rnnt_status rnnt_stream_input_finished(rnnt_stream *s, char *err, size_t errlen)
{
    if (!s) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no stream given");
    s->finished = 1;
    return RNNT_OK;
}

int rnnt_stream_ready(const rnnt_stream *s)
{
    if (!s || s->flushed || s->dec.status != RNNT_OK) return 0;
    return s->finished || s->n_feats >= s->m->stacking;
}

int rnnt_stream_is_final(const rnnt_stream *s) { return s && (s->flushed || s->dec.status != RNNT_OK); }

int rnnt_stream_pending_frames(const rnnt_stream *s) { return s ? s->n_feats : 0; }

long long rnnt_stream_frames_in(const rnnt_stream *s) { return s ? s->frames_in : 0; }

rnnt_status rnnt_stream_reserve_tokens(rnnt_stream *s, size_t more)
{
    size_t need = (size_t)s->dec.n_tokens + more;
    if (need <= (size_t)s->tok_cap) return RNNT_OK;
    if (need > INT32_MAX) return RNNT_ERR_NOMEM;
    size_t cap = s->tok_cap ? (size_t)s->tok_cap : 64;
    while (cap < need) cap *= 2;
    if (cap > INT32_MAX) cap = INT32_MAX;
    int *t = realloc(s->dec.tokens, cap * sizeof(int));
    if (!t) return RNNT_ERR_NOMEM;
    s->dec.tokens = t;
    int *f = realloc(s->dec.frames, cap * sizeof(int));
    if (!f) return RNNT_ERR_NOMEM; /* tokens grew, tok_cap not: still consistent */
    s->dec.frames = f;
    float *p = realloc(s->dec.probs, cap * sizeof(float));
    if (!p) return RNNT_ERR_NOMEM;
    s->dec.probs = p;
    s->tok_cap = (int)cap;
    return RNNT_OK;
}

void rnnt_stream_drop_frames(rnnt_stream *s, int frames)
{
    if (frames <= 0) return;
    const size_t F = (size_t)s->m->feature_dim;
    memmove(s->feats, s->feats + (size_t)frames * F, (size_t)(s->n_feats - frames) * F * sizeof(float));
    s->n_feats -= frames;
}

rnnt_status rnnt_runner_advance_streams(rnnt_runner *r, int n, rnnt_stream *const *streams, rnnt_timing *timing, char *err, size_t errlen)
{
    if (!r || !streams) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no runner or streams given");
    if (rnnt_runner_pending(r) > 0)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "batches submitted and not collected: collect first");
    const rnnt_runner_params *p = rnnt_runner_get_params(r);
    if (n < 1 || n > p->max_batch)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%d streams in one batch, the runner takes 1 to %d", n, p->max_batch);
    const struct rnnt_model *m;
    const rnnt_backend_ops *ops;
    void *state;
    rnnt_runner_backend(r, &m, &ops, &state);
    for (int i = 0; i < n; i++) {
        if (!streams[i]) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "stream %d is NULL", i);
        if (streams[i]->m != m) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "stream %d belongs to another model", i);
        for (int j = 0; j < i; j++)
            if (streams[j] == streams[i]) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "stream %d is also stream %d", i, j);
        if (streams[i]->dev.ops && streams[i]->dev.ops != (const void *)ops)
            return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "stream %d's state lives on another backend's device", i);
    }
    if (!ops->advance)
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "the %s backend does not advance streams yet", ops->name);
    return ops->advance(state, n, (struct rnnt_stream *const *)streams, timing, err, errlen);
}

rnnt_status rnnt_stream_get_result(const rnnt_stream *s, rnnt_result *res, char *err, size_t errlen)
{
    if (!s || !res) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no stream or result given");
    rnnt_result_clear(res);
    const rnnt_dec_state *d = &s->dec;
    size_t n = (size_t)d->n_tokens;
    res->tokens = malloc((n + 1) * sizeof(int));
    res->frames = malloc((n + 1) * sizeof(int));
    res->probs = malloc((n + 1) * sizeof(float));
    if (!res->tokens || !res->frames || !res->probs) goto nomem;
    if (n) {
        memcpy(res->tokens, d->tokens, n * sizeof(int));
        memcpy(res->frames, d->frames, n * sizeof(int));
        memcpy(res->probs, d->probs, n * sizeof(float));
    }
    res->n_tokens = d->n_tokens;
    res->status = d->status;
    res->encoder_frames = s->enc_frames;
    res->frames_skipped = rnnt_dec_frames_skipped(d, s->enc_frames);
    res->decode_steps = d->steps;
    if (d->status == RNNT_OK) {
        res->text = rnnt_model_detokenize(s->m, d->tokens, d->n_tokens);
        if (!res->text) goto nomem;
    }
    return RNNT_OK;
nomem:
    rnnt_result_clear(res);
    return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for a stream's result");
}

void rnnt_stream_plan_chunk(const struct rnnt_model *m, const struct rnnt_stream *s, int max_frames, int *take, int *flush,
                            int rows[RNNT_STREAM_MAX_LAYERS + 1])
{
    *take = *flush = 0;
    memset(rows, 0, sizeof(int) * (RNNT_STREAM_MAX_LAYERS + 1));
    if (s->flushed || s->dec.status != RNNT_OK) return;
    int k = m->stacking, limit = max_frames > k ? max_frames : k; /* at least one stacked frame */
    int n = s->n_feats < limit ? s->n_feats : limit;
    *flush = s->finished && n == s->n_feats;
    *take = *flush ? n : n / k * k;
    rows[0] = *flush ? rnnt_stacked_len(*take, k) : *take / k;
    for (int l = 0; l < m->n_enc - 1; l++) {
        int have = s->rem_rows[l] + rows[l], ts = m->enc[l].time_stack;
        rows[l + 1] = *flush ? rnnt_stacked_len(have, ts) : have / ts;
    }
    rows[m->n_enc] = rows[m->n_enc - 1];
}
