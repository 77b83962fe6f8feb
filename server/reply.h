/* reply.h — the one place that turns results and errors into HTTP responses. Owns: the error shape
 * and its Retry-After rule, the JSON writing rule, and the JSON of a transcription result (the native
 * answer's document and the word list both transcription endpoints share), so that a change of the
 * engine's result API touches this file only.
 * Every error body is {"error": {"code": "...", "message": "..."}} with a real 4xx/5xx status;
 * nothing here ever sends an error with 200. Thread-safe (no shared state); the reply_* senders
 * must be called from the transport loop thread that owns the connection (inside a tp_handlers
 * callback); the builders (reply_*_json) from any thread. */
#ifndef SRV_REPLY_H
#define SRV_REPLY_H

#include <jansson.h>

#include "rnnt.h"
#include "transport.h"

/* Seconds a 503 tells the client to wait (Retry-After) unless the error says otherwise. */
#define REPLY_RETRY_AFTER_S 1

/* How every JSON document the server sends is written (HTTP answers, WebSocket messages): compact,
 * reals with 7 significant digits (times in seconds stay 1.9, not 1.9000000000000001). */
#define REPLY_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(7))

/* An error found while handling a request: status, stable machine code, one-line message. */
typedef struct {
    unsigned status;   /* 0: no error */
    const char *code;  /* static string, e.g. "invalid_json" */
    char message[256];
    int retry_after_s; /* > 0: Retry-After; srv_err_set gives every 503 REPLY_RETRY_AFTER_S */
} srv_err;

void srv_err_set(srv_err *e, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Extra headers; zero-initialise and set what applies. */
typedef struct {
    const char *request_id;  /* X-Request-Id */
    int retry_after_s;       /* > 0: Retry-After */
    const char *allow;       /* Allow (405) */
    int www_authenticate;    /* WWW-Authenticate: Bearer (401) */
    int close;               /* Connection: close */
} reply_opts;

/* Sends body (reference stolen, freed here) as JSON. 0, or -1 (see tp_respond). */
int reply_json(tp_conn *c, unsigned status, json_t *body, const reply_opts *o);
/* Sends the error shape for e. */
int reply_error(tp_conn *c, const srv_err *e, const reply_opts *o);
/* Sends text (taken over, free()d here) with the given Content-Type. */
int reply_text(tp_conn *c, unsigned status, const char *content_type, char *text, size_t len, const reply_opts *o);
/* [{word, start, end, confidence}] of a result (confidence null without probabilities); NULL when out of
 * memory. */
json_t *reply_words_json(const rnnt_model *m, const rnnt_result *res);

/* What the native answer of POST /v1/transcribe shows beside the result. */
typedef struct {
    const char *request_id;
    double audio_s;   /* duration_s */
    int frames;
    int batch_size;
    double queue_s, compute_s, total_s, audio_prep_ms; /* timings; audio_prep_ms 0: not audio */
    int timestamps;   /* per-token frame and time_s, and the words */
} reply_result_info;
/* {id, model, text, tokens [{id, token[, frame, time_s]}], duration_s, frames, batch_size, timings
 * {queue_ms, compute_ms, total_ms[, audio_ms]}[, words]}; NULL when out of memory. */
json_t *reply_result_json(const rnnt_model *m, const rnnt_result *res, const reply_result_info *ri);

/* The error document for e as compact JSON text (malloc'd), used by reply_error and tests. */
char *reply_error_body(const srv_err *e);

#endif
