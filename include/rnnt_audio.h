/* rnnt_audio.h — audio files and bodies to mono float samples at the model's rate: libsndfile decodes (WAV
 * PCM 8/16/24/32-bit and float, FLAC, Ogg Vorbis/Opus, MP3, AIFF, ...) from memory, channels are
 * averaged to mono, other rates are resampled with libsoxr (high quality). Caps on bytes, seconds and
 * channels are checked from the header before the body is decoded, and again while decoding (for
 * formats whose header does not say or lies). Every failure is a status and a one-line message.
 * Thread-safe: no shared state (libsndfile's message for a body it cannot open comes from its global
 * error slot, so two concurrent failures may swap messages; the status is exact). */
#ifndef RNNT_AUDIO_H
#define RNNT_AUDIO_H

#include <stddef.h>

#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t max_bytes;   /* the encoded body; 0 = 256 MiB */
    double max_seconds; /* audio duration; 0 = 3600 */
    int max_channels;   /* 0 = 64 */
} rnnt_audio_limits;

typedef struct {
    const char *container;  /* from the magic bytes: "wav", "flac", "ogg", "mp3", ... (static) */
    char codec[48];         /* libsndfile's name of the sample format, e.g. "Signed 16 bit PCM" */
    int channels;
    int sample_rate;        /* of the body, before resampling */
    long long frames;       /* decoded frames per channel, before resampling */
    double duration_s;      /* frames / sample_rate */
    int resampled;          /* 1 when libsoxr converted the rate */
} rnnt_audio_info;

/* The container named by the first bytes ("wav", "flac", "ogg", "mp3", "aiff", "au", "caf", "w64",
 * "rf64"), or NULL when they are not one libsndfile reads. Needs at most 12 bytes. */
RNNT_API const char *rnnt_audio_sniff(const void *data, size_t len);
/* 1 when the bytes start like a NumPy .npy file. */
RNNT_API int rnnt_audio_is_npy(const void *data, size_t len);

/* Decode an in-memory body to mono float samples at target_rate (in [-1, 1] for integer formats:
 * 16-bit PCM / 32768 exactly, as training scaled them). *samples is malloc'd (free()), *n its length.
 * name is used in messages. limits may be NULL (the defaults). info may be NULL.
 * RNNT_ERR_TOO_LARGE: over a cap; RNNT_ERR_FORMAT: not audio, malformed, unsupported or non-finite;
 * RNNT_ERR_INVALID: no samples; RNNT_ERR_NOMEM. */
RNNT_API rnnt_status rnnt_audio_decode(const char *name, const void *data, size_t len, int target_rate, const rnnt_audio_limits *limits,
                                       float **samples, size_t *n, rnnt_audio_info *info, char *err, size_t errlen);
/* Read a file (at most limits->max_bytes) and decode it as above. */
RNNT_API rnnt_status rnnt_audio_load_file(const char *path, int target_rate, const rnnt_audio_limits *limits, float **samples, size_t *n,
                                          rnnt_audio_info *info, char *err, size_t errlen);
/* The libsndfile version string, e.g. "libsndfile-1.2.0". */
RNNT_API const char *rnnt_audio_library_version(void);

#ifdef __cplusplus
}
#endif
#endif
