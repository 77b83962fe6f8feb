/* body.h — what a transcription request sends, to features and options: its Content-Type, its query
 * string, and its body: JSON ({"features": [[F floats], ...], "timestamps": bool}) parsed in one pass
 * straight into the float array (no document tree), or .npy via the engine's reader. Everything a
 * client can send wrong maps to one
 * srv_err: 400 malformed, 413 too many frames, 422 wrong feature width or non-finite values.
 * Thread-safe: no shared state. */
#ifndef SRV_BODY_H
#define SRV_BODY_H

#include <stddef.h>

#include "reply.h"

#define BODY_MAX_JSON_DEPTH 8

/* Per-request options; they live in the request only, so nothing leaks into the next one. */
typedef struct {
    int timestamps; /* include per-token frames and times (default 1) */
} req_opts;

typedef struct {
    float *data;  /* frames x dim, malloc'd; NULL when frames == 0 */
    int frames;
} body_feats;

/* What a Content-Type (parameters ignored) says the body is. CT_AUDIO: an audio type (audio_body.h);
 * CT_OCTET: application/octet-stream, told apart later by its magic bytes. */
typedef enum { CT_NONE = 0, CT_JSON, CT_NPY, CT_AUDIO, CT_OCTET, CT_MULTIPART } req_ctype;
req_ctype body_media_type(const char *content_type);

void req_opts_default(req_opts *o);
/* The query string's parameters (percent-decoded, '+' as space), each through body_query_param; a
 * name without '=' has no value. 0, or -1 with e set (400). */
int body_parse_query(const char *query, req_opts *o, srv_err *e);
/* One query parameter (?timestamps=false); unknown names are errors. 0 or -1 with e set. */
int body_query_param(const char *key, const char *value, req_opts *o, srv_err *e);

int body_parse_json(const char *buf, size_t len, int feature_dim, int max_frames, body_feats *out,
                    req_opts *o, srv_err *e);
int body_parse_npy(const char *buf, size_t len, int feature_dim, int max_frames, body_feats *out,
                   srv_err *e);

#endif
