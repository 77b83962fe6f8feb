/* audio_body.h — an audio request body (or a multipart file part) to the model's features: decoded by
 * the engine (include/rnnt_audio.h: libsndfile, mono mix, libsoxr), turned into log-mel features by the
 * engine's frontend (rnnt.h), with every failure mapped to one srv_err:
 *   415 unsupported_audio   the bytes are not a container libsndfile reads (by magic)
 *   400 invalid_audio       a recognised container that is malformed, truncated, lies or is unsupported
 *   413 audio_too_long      more than limits.max_audio_s (from the header where it says, else while
 *                           decoding); 413 payload_too_large over the byte cap; 413 too_many_frames
 *   422 empty_utterance     no samples, or fewer than one frame's worth
 * CPU work proportional to the audio (about 1-2 ms per second of audio on one core here): run it off
 * the transport's loop threads (routes.c hands it to a workq). Thread-safe: no shared state. */
#ifndef SRV_AUDIO_BODY_H
#define SRV_AUDIO_BODY_H

#include <stddef.h>

#include "body.h"
#include "reply.h"
#include "rnnt.h"

typedef struct {
    size_t max_bytes;
    double max_audio_s;
    int max_frames;
} audio_body_limits;

/* Sets *features (frames x feature_dim, malloc'd; NULL when frames == 0), *frames and *audio_s (the
 * decoded duration). 0, or -1 with e set. name is used in messages ("body", the file name). */
int audio_body_features(const rnnt_model *m, const char *name, const void *data, size_t len, const audio_body_limits *lim,
                        body_feats *out, double *audio_s, srv_err *e);

/* As audio_body_features, without the features: *pcm gets the decoded samples at the model's rate
 * (pcm->data malloc'd, *n_samples of them, all finite) and pcm->frames the frame count the frontend
 * will make of them, with the same errors (for a runner that computes the features itself:
 * eng_pcm.h). */
int audio_body_pcm(const rnnt_model *m, const char *name, const void *data, size_t len, const audio_body_limits *lim,
                   body_feats *pcm, size_t *n_samples, double *audio_s, srv_err *e);

/* 1 when a media type (parameters ignored) is an audio type this server takes: audio/wav, audio/x-wav,
 * audio/wave, audio/vnd.wave, audio/flac, audio/x-flac, audio/mpeg, audio/mp3, audio/ogg, audio/opus,
 * audio/webm is NOT taken (libsndfile does not read WebM). */
int audio_body_is_audio_type(const char *content_type);

#endif
