/* audio_body.c — audio bodies to features (audio_body.h). */
#include "audio_body.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rnnt_audio.h"

int audio_body_is_audio_type(const char *ct)
{
    static const char *const types[] = {"audio/wav",  "audio/x-wav", "audio/wave", "audio/vnd.wave", "audio/flac",
                                        "audio/x-flac", "audio/mpeg", "audio/mp3",  "audio/ogg",      "audio/opus", NULL};
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t') ct++;
    size_t n = strcspn(ct, "; \t");
    for (int i = 0; types[i]; i++)
        if (n == strlen(types[i]) && strncasecmp(ct, types[i], n) == 0) return 1;
    return 0;
}

/* The start of both entry points: out cleared (nothing to free after any error), then the body's samples at
 * the model's rate, mono (*x malloc'd, *n of them). 0, or -1 with e set. */
static int decode_body(const rnnt_model *m, const char *name, const void *data, size_t len, const audio_body_limits *lim,
                       body_feats *out, float **xo, size_t *no, double *audio_s, srv_err *e)
{
    const rnnt_model_info *info = rnnt_model_get_info(m);
    out->data = NULL;
    out->frames = 0;
    *xo = NULL;
    *no = 0;
    *audio_s = 0;
    if (len == 0) {
        srv_err_set(e, 422, "empty_utterance", "%s: empty: no audio", name);
        return -1;
    }
    if (!rnnt_audio_sniff(data, len)) {
        srv_err_set(e, 415, "unsupported_audio",
                    "%s: not audio this server reads (by its first bytes: WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF, AU, CAF, W64, RF64)", name);
        return -1;
    }
    rnnt_audio_limits al = {lim->max_bytes, lim->max_audio_s, 0};
    float *x = NULL;
    size_t n = 0;
    char msg[200];
    rnnt_status st = rnnt_audio_decode(name, data, len, info->sample_rate, &al, &x, &n, NULL, msg, sizeof msg);
    switch (st) {
    case RNNT_OK: break;
    case RNNT_ERR_TOO_LARGE:
        if (strstr(msg, " s of audio")) srv_err_set(e, 413, "audio_too_long", "%s (limits.max_audio_s)", msg);
        else srv_err_set(e, 413, "payload_too_large", "%s", msg);
        return -1;
    case RNNT_ERR_INVALID: srv_err_set(e, 422, "empty_utterance", "%s", msg); return -1;
    case RNNT_ERR_NOMEM: srv_err_set(e, 503, "out_of_memory", "%s", msg); return -1;
    default: srv_err_set(e, 400, "invalid_audio", "%s", msg); return -1;
    }
    *audio_s = (double)n / info->sample_rate;
    *xo = x;
    *no = n;
    return 0;
}

/* The frame count of n samples, with the errors audio_body_features gives. */
static int frames_of(const char *name, long long frames, double audio_s, const audio_body_limits *lim, srv_err *e)
{
    if (frames > lim->max_frames) {
        srv_err_set(e, 413, "too_many_frames", "%s: %.1f s of audio is more than limits.max_frames = %d frames", name, audio_s,
                    lim->max_frames);
        return -1;
    }
    if (frames == 0) {
        srv_err_set(e, 422, "empty_utterance", "%s: %.4f s of audio is shorter than one feature frame", name, audio_s);
        return -1;
    }
    return 0;
}

int audio_body_pcm(const rnnt_model *m, const char *name, const void *data, size_t len, const audio_body_limits *lim,
                   body_feats *out, size_t *n_samples, double *audio_s, srv_err *e)
{
    *n_samples = 0;
    float *x;
    size_t n;
    char msg[200];
    if (decode_body(m, name, data, len, lim, out, &x, &n, audio_s, e)) return -1;
    rnnt_frontend *fe = NULL;
    if (rnnt_frontend_create(m, &fe, msg, sizeof msg)) {
        free(x);
        srv_err_set(e, 500, "internal", "frontend: %s", msg);
        return -1;
    }
    long long frames = rnnt_frontend_frames(fe, (long long)n);
    rnnt_frontend_free(fe);
    if (frames_of(name, frames, *audio_s, lim, e)) {
        free(x);
        return -1;
    }
    out->data = x;
    out->frames = (int)frames;
    *n_samples = n;
    return 0;
}

int audio_body_features(const rnnt_model *m, const char *name, const void *data, size_t len, const audio_body_limits *lim,
                        body_feats *out, double *audio_s, srv_err *e)
{
    float *x;
    size_t n;
    char msg[200];
    if (decode_body(m, name, data, len, lim, out, &x, &n, audio_s, e)) return -1;
    rnnt_status st;
    rnnt_frontend *fe = NULL;
    st = rnnt_frontend_create(m, &fe, msg, sizeof msg);
    if (st == RNNT_OK)
        st = rnnt_frontend_compute_f32(fe, x, n, lim->max_frames, &out->data, &out->frames, msg, sizeof msg);
    rnnt_frontend_free(fe);
    free(x);
    switch (st) {
    case RNNT_OK: break;
    case RNNT_ERR_TOO_LARGE: return frames_of(name, (long long)lim->max_frames + 1, *audio_s, lim, e); /* over the cap */
    case RNNT_ERR_NOMEM: srv_err_set(e, 503, "out_of_memory", "%s", msg); return -1;
    case RNNT_ERR_INVALID: srv_err_set(e, 400, "invalid_audio", "%s: %s", name, msg); return -1;
    default: srv_err_set(e, 500, "internal", "frontend: %s", msg); return -1;
    }
    return frames_of(name, out->frames, *audio_s, lim, e);
}
