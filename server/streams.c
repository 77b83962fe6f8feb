/* streams.c — WebSocket streams and the sequence batcher (see streams.h).
 *
 * A stream (sess) has two sides. The loop side (the transport's loop thread): the WebSocket parser,
 * the configuration message, appending binary messages to `in`, writing the results the worker left
 * in the outbox, close frames, the idle deadline. The worker side: the rnnt_stream, feeding it from
 * `in`, advancing, turning results into messages. `mu` guards what they share: in, eof, gone, the
 * outbox. The outbox holds at most one partial (a newer one replaces it: a slow reader loses
 * partials, never finals) and the finals in order; more than STRM_MAX_FINALS unsent finals, or
 * output unread for server.connection_timeout_s, closes the connection (1008 / TCP close).
 * A sess is freed when both sides have let go (refs). This file holds the WebSocket side and the
 * service's life and metrics; stream_batch.c the workers (shared types: streams_int.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "streams_int.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "rnnt_words.h"
#include "ws.h"

void strm_hist_add(hist *h, const double *b, int nb, double v)
{
    int i = 0;
    while (i < nb && v > b[i]) i++;
    atomic_fetch_add(&h->count[i], 1);
    atomic_fetch_add(&h->n, 1);
    atomic_fetch_add(&h->sum_us, (long long)(v * 1e6));
}

double strm_now(void) { return sched_now(); }

/* ---- sessions ---- */

void strm_sess_unref(sess *q)
{
    pthread_mutex_lock(&q->mu);
    int left = --q->refs;
    pthread_mutex_unlock(&q->mu);
    if (left) return;
    ws_parser_free(&q->parser);
    free(q->in);
    free(q->partial);
    while (q->finals) {
        out_msg *m = q->finals;
        q->finals = m->next;
        free(m->text);
        free(m);
    }
    rnnt_stream_free(q->st);
    if (q->e) eng_unref(q->e);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* ---- the loop side: writing ---- */

static void send_frame(tp_conn *c, int opcode, const void *data, size_t len)
{
    unsigned char h[10];
    size_t hl = ws_frame_header(h, opcode, len);
    if (tp_raw_send(c, h, hl) == 0 && len) tp_raw_send(c, data, len);
}

static void send_close(sess *q, unsigned code, const char *reason)
{
    if (q->closing || !q->conn) return;
    unsigned char b[125];
    size_t rl = strlen(reason);
    if (rl > 120) rl = 120;
    b[0] = (unsigned char)(code >> 8);
    b[1] = (unsigned char)code;
    memcpy(b + 2, reason, rl);
    send_frame(q->conn, WS_OP_CLOSE, b, 2 + rl);
    q->closing = 1;
    tp_raw_close(q->conn);
}

static void send_json_text(sess *q, json_t *doc)
{
    if (!doc || q->closing || !q->conn) {
        json_decref(doc);
        return;
    }
    char *t = json_dumps(doc, REPLY_JSON_FLAGS);
    json_decref(doc);
    if (!t) return;
    send_frame(q->conn, WS_OP_TEXT, t, strlen(t));
    free(t);
}

/* An error the loop side found: a JSON message, then the close frame. */
static void fail_stream(sess *q, unsigned close_code, const char *code, const char *message)
{
    strm_service *svc = q->s->streams;
    atomic_fetch_add(&svc->errors, 1);
    send_json_text(q, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code", code, "message", message));
    send_close(q, close_code, code);
}

/* Writes what the worker left (on the loop thread, after a kick or a sweep). */
static void flush_outbox(sess *q)
{
    strm_service *svc = q->s->streams;
    if (!q->conn || q->closing) return;
    pthread_mutex_lock(&q->mu);
    out_msg *finals = q->finals;
    q->finals = NULL;
    q->finals_tail = &q->finals;
    q->n_finals = 0;
    char *partial = NULL;
    size_t plen = 0;
    double pt = 0;
    if (q->partial && (finals || tp_raw_unsent(q->conn) < STRM_OUT_HIGH)) {
        partial = q->partial;
        plen = q->partial_len;
        pt = q->partial_t_in;
        q->partial = NULL;
    }
    unsigned close_code = q->close_code;
    char reason[100];
    memcpy(reason, q->close_reason, sizeof reason);
    q->close_code = 0;
    pthread_mutex_unlock(&q->mu);
    if (partial) {
        /* A partial made before a final in the same batch belongs before it. */
        send_frame(q->conn, WS_OP_TEXT, partial, plen);
        strm_hist_add(&svc->lat_hist, lat_bounds, 11, strm_now() - pt);
        atomic_fetch_add(&svc->partials, 1);
        free(partial);
    }
    while (finals) {
        out_msg *m = finals;
        finals = m->next;
        send_frame(q->conn, WS_OP_TEXT, m->text, m->len);
        free(m->text);
        free(m);
    }
    if (close_code) send_close(q, close_code, reason);
}

/* ---- the loop side: reading ---- */

static int parse_config(sess *q, const unsigned char *data, size_t len)
{
    json_error_t je;
    json_t *doc = json_loadb((const char *)data, len, 0, &je);
    if (!doc || !json_is_object(doc)) {
        json_decref(doc);
        fail_stream(q, WS_CLOSE_INVALID_DATA, "invalid_config", "the first message must be a JSON object configuring the stream");
        return -1;
    }
    eng *e = svc_engine(q->s);
    const rnnt_model_info *info = e ? eng_info(e) : NULL;
    const char *why = NULL, *code = "invalid_config";
    unsigned cc = WS_CLOSE_INVALID_DATA;
    json_t *v;
    const char *enc = "pcm_s16le";
    int rate = info ? info->sample_rate : 0;
    int partials = 1, endpointing = 0;
    if (!e || !atomic_load(&q->s->ready)) {
        why = "the model is not loaded yet; try again", code = "not_ready", cc = WS_CLOSE_TRY_AGAIN;
        goto out;
    }
    const char *key;
    json_object_foreach(doc, key, v)
    {
        if (!strcmp(key, "type")) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "config")) {
                why = "\"type\" of the first message must be \"config\"";
                goto out;
            }
        } else if (!strcmp(key, "encoding")) {
            if (!json_is_string(v)) {
                why = "\"encoding\" must be a string: pcm_s16le, f32le or features";
                goto out;
            }
            enc = json_string_value(v);
        } else if (!strcmp(key, "sample_rate")) {
            if (!json_is_integer(v)) {
                why = "\"sample_rate\" must be an integer";
                goto out;
            }
            rate = (int)json_integer_value(v);
        } else if (!strcmp(key, "partials")) {
            if (!json_is_boolean(v)) {
                why = "\"partials\" must be true or false";
                goto out;
            }
            partials = json_is_true(v);
        } else if (!strcmp(key, "endpointing")) {
            if (!json_is_boolean(v)) {
                why = "\"endpointing\" must be true or false";
                goto out;
            }
            endpointing = json_is_true(v);
        } else {
            why = "unknown key in the config message (type, encoding, sample_rate, partials, endpointing)";
            goto out;
        }
    }
    if (!strcmp(enc, "pcm_s16le")) q->enc = ENC_S16;
    else if (!strcmp(enc, "f32le")) q->enc = ENC_F32;
    else if (!strcmp(enc, "features")) q->enc = ENC_FEATURES;
    else {
        why = "unsupported encoding: pcm_s16le, f32le or features", code = "unsupported_encoding", cc = WS_CLOSE_UNSUPPORTED;
        goto out;
    }
    if (q->enc != ENC_FEATURES && rate != info->sample_rate) {
        why = "unsupported sample_rate: send audio at the model's rate (see the ready message)", code = "unsupported_sample_rate",
        cc = WS_CLOSE_UNSUPPORTED;
        goto out;
    }
out:
    json_decref(doc);
    if (why) {
        if (e) eng_unref(e);
        fail_stream(q, cc, code, why);
        return -1;
    }
    q->e = e;
    q->partials = partials;
    q->endpointing = endpointing;
    q->configured = 1;
    /* Hand the stream to its worker. */
    strm_worker *w = q->w;
    pthread_mutex_lock(&q->mu);
    q->refs++;
    pthread_mutex_unlock(&q->mu);
    pthread_mutex_lock(&w->mu);
    q->wnext = w->incoming;
    w->incoming = q;
    pthread_mutex_unlock(&w->mu);
    atomic_fetch_add(&q->s->streams->started, 1);
    send_json_text(q, json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:f, s:b, s:b}", "type", "ready", "id", q->id, "model", info->name,
                                "encoding", q->enc == ENC_S16 ? "pcm_s16le" : q->enc == ENC_F32 ? "f32le" : "features", "sample_rate",
                                info->sample_rate, "feature_dim", info->feature_dim, "frame_shift_s", info->frame_shift_s, "partials",
                                partials, "endpointing", endpointing));
    return 0;
}

static int on_message(void *user, int opcode, const unsigned char *data, size_t len)
{
    sess *q = user;
    strm_service *svc = q->s->streams;
    if (q->closing) return 1;
    if (!q->configured) {
        if (opcode != WS_OP_TEXT) {
            fail_stream(q, WS_CLOSE_POLICY, "config_first", "the first message must be the JSON config (text), not binary");
            return 1;
        }
        return parse_config(q, data, len) ? 1 : 0;
    }
    if (opcode == WS_OP_TEXT) {
        json_t *doc = json_loadb((const char *)data, len, 0, NULL);
        json_t *t = doc ? json_object_get(doc, "type") : NULL;
        int eof = t && json_is_string(t) && !strcmp(json_string_value(t), "eof");
        json_decref(doc);
        if (!eof) {
            fail_stream(q, WS_CLOSE_INVALID_DATA, "invalid_message", "text messages after the config: only {\"type\":\"eof\"}");
            return 1;
        }
        pthread_mutex_lock(&q->mu);
        q->eof = 1;
        pthread_mutex_unlock(&q->mu);
        tp_raw_pause_reading(q->conn, 1); /* nothing more is read; the close frame follows the final */
        return 1;
    }
    size_t unit = q->enc == ENC_S16 ? 2 : q->enc == ENC_F32 ? 4 : (size_t)eng_info(q->e)->feature_dim * 4;
    if (len % unit) {
        char m[160];
        snprintf(m, sizeof m, "a binary message of %zu bytes is not a whole number of %s (%zu bytes each)", len,
                 q->enc == ENC_FEATURES ? "feature frames" : "samples", unit);
        fail_stream(q, WS_CLOSE_INVALID_DATA, "partial_sample", m);
        return 1;
    }
    pthread_mutex_lock(&q->mu);
    int eof = q->eof;
    if (!eof && q->in_len + len > q->in_cap) {
        size_t cap = q->in_cap ? q->in_cap : 8192;
        while (cap < q->in_len + len) cap *= 2;
        unsigned char *p = realloc(q->in, cap);
        if (!p) {
            pthread_mutex_unlock(&q->mu);
            fail_stream(q, WS_CLOSE_INTERNAL, "out_of_memory", "out of memory for the stream's input");
            return 1;
        }
        q->in = p;
        q->in_cap = cap;
    }
    if (!eof) {
        if (q->in_len == 0) q->t_in = strm_now();
        memcpy(q->in + q->in_len, data, len);
        q->in_len += len;
    }
    /* Backpressure: a client far ahead of decoding is not read until the worker catches up. */
    const rnnt_model_info *info = eng_info(q->e);
    double bytes_per_s = q->enc == ENC_FEATURES ? (double)unit / (info->frame_shift_s / info->subsampling)
                                                : (double)unit * info->sample_rate;
    int pause = (double)q->in_len > svc->max_pending_s * bytes_per_s;
    pthread_mutex_unlock(&q->mu);
    if (pause) tp_raw_pause_reading(q->conn, 1);
    return 0;
}

static int on_control(void *user, int opcode, const unsigned char *data, size_t len)
{
    sess *q = user;
    if (opcode == WS_OP_PING) {
        if (!q->closing) send_frame(q->conn, WS_OP_PONG, data, len);
        return 0;
    }
    if (opcode == WS_OP_PONG) return 0;
    /* Close: echo the code (RFC 6455 §5.5.1) and close; a stream whose input had not ended is
     * abandoned (no final: the client left). */
    unsigned code = len >= 2 ? (unsigned)data[0] << 8 | data[1] : WS_CLOSE_NORMAL;
    if (code < 1000 || code == 1004 || code == 1005 || code == 1006 || (code > 1014 && code < 3000) || code >= 5000) {
        send_close(q, WS_CLOSE_PROTOCOL, "invalid close code");
        return 1;
    }
    send_close(q, code == WS_CLOSE_NORMAL ? WS_CLOSE_NORMAL : code, "");
    return 1;
}

static size_t raw_data(void *user, tp_conn *c, const char *data, size_t len)
{
    sess *q = user;
    (void)c;
    static const ws_callbacks cb = {on_message, on_control};
    if (q->closing) return len;
    q->t_last_in = strm_now();
    size_t used = ws_parse(&q->parser, (const unsigned char *)data, len, &cb, q);
    if (q->parser.failed && !q->closing) {
        strm_service *svc = q->s->streams;
        atomic_fetch_add(&svc->errors, 1);
        const char *code = q->parser.close_code == WS_CLOSE_TOO_BIG      ? "message_too_big"
                           : q->parser.close_code == WS_CLOSE_INVALID_DATA ? "invalid_utf8"
                                                                           : "protocol_error";
        fail_stream(q, q->parser.close_code, code, q->parser.reason);
    }
    if (q->closing) return len; /* what follows a close is dropped */
    return used;
}

static void raw_kick(void *user, tp_conn *c)
{
    sess *q = user;
    flush_outbox(q);
    if (q->closing) return;
    pthread_mutex_lock(&q->mu);
    int eof = q->eof;
    double pend = (double)q->in_len;
    pthread_mutex_unlock(&q->mu);
    if (!eof && q->configured) {
        const rnnt_model_info *info = eng_info(q->e);
        size_t unit = q->enc == ENC_S16 ? 2 : q->enc == ENC_F32 ? 4 : (size_t)info->feature_dim * 4;
        double bytes_per_s = q->enc == ENC_FEATURES ? (double)unit / (info->frame_shift_s / info->subsampling)
                                                    : (double)unit * info->sample_rate;
        if (pend <= q->s->streams->max_pending_s * bytes_per_s / 2) tp_raw_pause_reading(c, 0);
    }
}

static void raw_sweep(void *user, tp_conn *c, double now)
{
    (void)c;
    sess *q = user;
    strm_service *svc = q->s->streams;
    (void)now;
    if (q->closing) return;
    if (!q->configured && atomic_load(&svc->draining)) {
        fail_stream(q, WS_CLOSE_GOING_AWAY, "shutting_down", "the server is shutting down");
        return;
    }
    pthread_mutex_lock(&q->mu);
    int eof = q->eof, waiting = q->in_len > 0;
    pthread_mutex_unlock(&q->mu);
    /* The idle deadline counts only while the server waits for the client. */
    if (!eof && !waiting && strm_now() - q->t_last_in > svc->idle_s)
        fail_stream(q, WS_CLOSE_POLICY, "idle_timeout", "nothing received for streaming.idle_timeout_s");
}

static void raw_close(void *user, tp_conn *c, tp_outcome outcome)
{
    (void)c;
    (void)outcome;
    sess *q = user;
    strm_service *svc = q->s->streams;
    pthread_mutex_lock(&q->mu);
    q->conn = NULL;
    q->gone = 1;
    pthread_mutex_unlock(&q->mu);
    atomic_fetch_sub(&svc->open, 1);
    strm_sess_unref(q);
}

static const tp_raw_handlers raw_handlers = {raw_data, raw_kick, raw_sweep, raw_close};

unsigned strm_upgrade(srv *s, tp_conn *c, const hp_request *req, const char **code, const char **msg, const char **extra_headers)
{
    strm_service *svc = s->streams;
    char accept[29];
    *extra_headers = NULL;
    unsigned st = ws_check_upgrade(req, accept, msg);
    if (st) {
        *code = st == 426 ? "upgrade_required" : "bad_upgrade";
        if (st == 426) *extra_headers = "Sec-WebSocket-Version: 13\r\n";
        return st;
    }
    if (!svc || atomic_load(&s->draining) || atomic_load(&svc->draining)) {
        *code = "shutting_down", *msg = "the server is shutting down";
        return 503;
    }
    if (!atomic_load(&s->ready)) {
        *code = "not_ready", *msg = "the model is not loaded yet";
        return 503;
    }
    long long n = atomic_fetch_add(&svc->open, 1) + 1;
    if (n > svc->max_streams) {
        atomic_fetch_sub(&svc->open, 1);
        *code = "too_many_streams", *msg = "streaming.max_streams streams are open; retry later";
        return 503;
    }
    sess *q = calloc(1, sizeof *q);
    if (!q) {
        atomic_fetch_sub(&svc->open, 1);
        *code = "out_of_memory", *msg = "out of memory for a stream";
        return 503;
    }
    q->s = s;
    q->conn = c;
    q->refs = 1;
    pthread_mutex_init(&q->mu, NULL);
    ws_parser_init(&q->parser, svc->max_message);
    q->finals_tail = &q->finals;
    q->t_last_in = strm_now();
    snprintf(q->id, sizeof q->id, "%s-s%llu", s->id_prefix, (unsigned long long)atomic_fetch_add(&s->next_id, 1) + 1);
    /* The least loaded worker on a device in rotation (stream worker i runs on device slot
     * i mod devices); the stream stays on it, and so on one device, to its end. */
    strm_worker *best = NULL;
    for (int i = 0; i < svc->n_workers; i++) {
        if (svc_device_failed(s, i % svc_devices(s))) continue;
        if (!best || svc->workers[i].n < best->n) best = &svc->workers[i];
    }
    if (!best) {
        atomic_fetch_sub(&svc->open, 1);
        strm_sess_unref(q);
        *code = "unavailable", *msg = "every device was taken out of rotation (see /health)";
        return 503;
    }
    q->w = best;
    pthread_mutex_lock(&best->mu);
    best->n++;
    pthread_mutex_unlock(&best->mu);
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                      accept);
    if (tp_upgrade(c, head, (size_t)hl, &raw_handlers, q)) {
        pthread_mutex_lock(&best->mu);
        best->n--;
        pthread_mutex_unlock(&best->mu);
        atomic_fetch_sub(&svc->open, 1);
        strm_sess_unref(q);
        *code = "out_of_memory", *msg = "could not switch protocols";
        return 503;
    }
    return 0;
}

/* ---- the service ---- */

int strm_start(srv *s, char *err, size_t errlen)
{
    strm_service *svc = calloc(1, sizeof *svc);
    if (!svc) return snprintf(err, errlen, "out of memory"), -1;
    svc->s = s;
    svc->n_workers = (int)(s->c.stream_workers > 0 ? s->c.stream_workers : svc_workers(s));
    if (svc->n_workers < 1) svc->n_workers = 1;
    svc->max_streams = s->c.stream_max_streams;
    svc->tick_s = (double)s->c.stream_tick_ms / 1000.0;
    svc->max_batch = (int)s->c.stream_max_batch;
    svc->idle_s = (double)s->c.stream_idle_timeout_s;
    svc->max_message = (size_t)s->c.stream_max_message_bytes;
    svc->max_pending_s = (double)s->c.stream_max_pending_s;
    svc->ep_silence_s = (double)s->c.stream_endpoint_silence_ms / 1000.0;
    svc->ep_no_speech_s = (double)s->c.stream_endpoint_no_speech_ms / 1000.0;
    svc->ep_max_segment_s = (double)s->c.stream_endpoint_max_segment_ms / 1000.0;
    svc->workers = calloc((size_t)svc->n_workers, sizeof *svc->workers);
    if (!svc->workers) {
        free(svc);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    s->streams = svc;
    for (int i = 0; i < svc->n_workers; i++) {
        strm_worker *w = &svc->workers[i];
        w->s = s;
        w->idx = i;
        pthread_mutex_init(&w->mu, NULL);
        if (pthread_create(&w->th, NULL, strm_worker_main, w)) {
            atomic_store(&svc->stop, 1);
            for (int k = 0; k < i; k++) pthread_join(svc->workers[k].th, NULL);
            free(svc->workers);
            free(svc);
            s->streams = NULL;
            return snprintf(err, errlen, "cannot start stream worker threads"), -1;
        }
    }
    return 0;
}

long long strm_drain(srv *s, double timeout_s)
{
    strm_service *svc = s->streams;
    if (!svc) return 0;
    atomic_store(&svc->draining, 1);
    /* Every stream's input ends now: the workers finish them (final + close 1001). */
    for (int i = 0; i < svc->n_workers; i++) {
        strm_worker *w = &svc->workers[i];
        pthread_mutex_lock(&w->mu);
        for (sess *q = w->incoming; q; q = q->wnext) {
            pthread_mutex_lock(&q->mu);
            q->drain = 1;
            pthread_mutex_unlock(&q->mu);
        }
        pthread_mutex_unlock(&w->mu);
    }
    double deadline = strm_now() + timeout_s;
    /* w->list belongs to the worker: mark through a flag it reads each tick. */
    atomic_store(&svc->drain_all, 1);
    while (atomic_load(&svc->open) > 0 && strm_now() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&svc->open);
}

void strm_stop(srv *s)
{
    strm_service *svc = s->streams;
    if (!svc) return;
    atomic_store(&svc->stop, 1);
    for (int i = 0; i < svc->n_workers; i++) pthread_join(svc->workers[i].th, NULL);
    for (int i = 0; i < svc->n_workers; i++) {
        strm_worker *w = &svc->workers[i];
        /* The connections are closed (routes_stop ran): their loop-side references are gone. */
        while (w->incoming) {
            sess *q = w->incoming;
            w->incoming = q->wnext;
            strm_sess_unref(q);
        }
        while (w->list) {
            sess *q = w->list;
            w->list = q->wnext;
            strm_sess_unref(q);
        }
        while (w->models) {
            wmodel *m = w->models;
            w->models = m->next;
            rnnt_runner_free(m->r);
            rnnt_frontend_free(m->fe);
            eng_unref(m->e);
            free(m);
        }
        pthread_mutex_destroy(&w->mu);
    }
    free(svc->workers);
    free(svc);
    s->streams = NULL;
}

long long strm_open(srv *s)
{
    return s->streams ? atomic_load(&s->streams->open) : 0;
}

long long strm_device_streams(srv *s, int d)
{
    strm_service *svc = s->streams;
    long long n = 0;
    for (int i = 0; svc && i < svc->n_workers; i++) {
        if (i % svc_devices(s) != d) continue;
        pthread_mutex_lock(&svc->workers[i].mu);
        n += svc->workers[i].n;
        pthread_mutex_unlock(&svc->workers[i].mu);
    }
    return n;
}

static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (n < 0) return -1;
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return 0;
        }
        size_t nc = *cap * 2 + (size_t)n;
        char *b = realloc(*buf, nc);
        if (!b) return -1;
        *buf = b;
        *cap = nc;
    }
}

static int append_hist(char **buf, size_t *len, size_t *cap, const char *name, const char *help, hist *h, const double *b, int nb)
{
    if (append(buf, len, cap, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)) return -1;
    long long cum = 0;
    for (int i = 0; i < nb; i++) {
        cum += atomic_load(&h->count[i]);
        if (append(buf, len, cap, "%s_bucket{le=\"%g\"} %lld\n", name, b[i], cum)) return -1;
    }
    cum += atomic_load(&h->count[nb]);
    return append(buf, len, cap, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", name, cum, name,
                  (double)atomic_load(&h->sum_us) / 1e6, name, atomic_load(&h->n));
}

char *strm_metrics_append(srv *s, char *buf, size_t *len)
{
    strm_service *svc = s->streams;
    if (!svc) return buf;
    /* buf holds at least *len bytes; append grows it (and leaves b valid when it cannot). */
    size_t cap = *len;
    char *b = buf;
    int bad = append(&b, len, &cap,
                     "# HELP rnntd_streams_open WebSocket streams open now.\n# TYPE rnntd_streams_open gauge\nrnntd_streams_open %lld\n"
                     "# HELP rnntd_streams_total Streams configured, finished with a final result, ended by an error.\n"
                     "# TYPE rnntd_streams_total counter\nrnntd_streams_total{outcome=\"started\"} %lld\n"
                     "rnntd_streams_total{outcome=\"finished\"} %lld\nrnntd_streams_total{outcome=\"error\"} %lld\n"
                     "# HELP rnntd_stream_chunks_total Stream chunks advanced.\n# TYPE rnntd_stream_chunks_total counter\n"
                     "rnntd_stream_chunks_total %lld\n"
                     "# HELP rnntd_stream_messages_total Results sent (partials dropped: superseded before a slow reader took them).\n"
                     "# TYPE rnntd_stream_messages_total counter\nrnntd_stream_messages_total{type=\"partial\"} %lld\n"
                     "rnntd_stream_messages_total{type=\"partial_dropped\"} %lld\nrnntd_stream_messages_total{type=\"final\"} %lld\n",
                     atomic_load(&svc->open), atomic_load(&svc->started), atomic_load(&svc->finished), atomic_load(&svc->errors),
                     atomic_load(&svc->chunks), atomic_load(&svc->partials), atomic_load(&svc->partials_dropped),
                     atomic_load(&svc->finals));
    bad = bad || append_hist(&b, len, &cap, "rnntd_stream_batch_size", "Stream chunks per advance (one batch of a stream worker).",
                             &svc->batch_hist, batch_bounds, 9);
    bad = bad || append_hist(&b, len, &cap, "rnntd_stream_partial_latency_seconds",
                             "From the arrival of the oldest input a partial covers to the partial being written.", &svc->lat_hist,
                             lat_bounds, 11);
    bad = bad || append_hist(&b, len, &cap, "rnntd_stream_real_time_factor",
                             "Per finished stream: engine time (its share of each batch) / audio duration.", &svc->rtf_hist, rtf_bounds, 10);
    if (bad) {
        free(b);
        return NULL;
    }
    return b;
}
