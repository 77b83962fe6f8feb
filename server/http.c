/* http.c — routes, per-request state, body intake, suspend/resume around the scheduler, on top of
 * the transport (transport.h), which owns sockets, parsing, deadlines and connection caps. */
#include "http.h"

#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rnnt_audio.h"
#include "audio_body.h"
#include "eng_pcm.h"
#include "body.h"
#include "log.h"
#include "metrics.h"
#include "multipart.h"
#include "reply.h"
#include "transcriptions.h"
#include "workq.h"
#include "captions.h"
#include "streams.h"

#define RETRY_AFTER_S 1
/* A request to an endpoint that takes no body is answered after its body is read and dropped (the
 * connection stays usable) when the body is at most this long; a longer one is answered at once and
 * the connection closed. */
#define HTTP_DROP_BODY_MAX (64 * 1024)

typedef enum { PH_NEW = 0, PH_BODY, PH_PREP, PH_PREPARED, PH_QUEUED, PH_DONE, PH_REPLIED } req_phase;
/* CT_AUDIO: an audio type (audio_body.h); CT_OCTET: application/octet-stream, told apart by its magic bytes. */
typedef enum { CT_NONE = 0, CT_JSON, CT_NPY, CT_AUDIO, CT_OCTET, CT_MULTIPART } req_ctype;

/* Audio bodies are decoded and turned into features here, off the loop threads (audio_body.h). */
static workq *g_prep;

typedef struct {
    eng_job job; /* first member: the scheduler hands &job.sj back to job_done */
    srv *s;
    tp_conn *conn;
    metrics_endpoint ep;
    char method[12];
    char path[96];   /* logfmt-quoted */
    char id[72];
    double t0;
    req_ctype ct;
    char *body;
    size_t len, cap, limit;
    size_t reserved; /* bytes counted in s->pending_bytes */
    srv_err err;     /* a bad query parameter (body_query_param) */
    req_opts opts;
    eng *engine;     /* the generation this request is validated against (reference held) */
    float *features;
    size_t n_samples;      /* nonzero: features holds that many PCM samples (eng_pcm.h) */
    req_phase phase; /* PH_DONE is set by the worker before tp_resume, read on the loop after it */
    int counted_suspended; /* counted in s->suspended until answered or closed */
    int counted_in_flight; /* a transcription: counted in s->in_flight until it ends */
    srv_err early;   /* an answer decided at the head, given once the (short) body is dropped */
    const char *early_allow;
    unsigned status; /* what was sent; 0 = nothing */
    const char *code;
    long long bytes_in;
    int frames;
    double audio_s;
    /* Audio (PH_PREP on a g_prep thread, then PH_PREPARED back on the loop). */
    workq_item prep;
    const char *audio_data; /* inside body */
    size_t audio_len;
    char audio_name[80];
    double prep_ms;
    /* POST /v1/audio/transcriptions */
    int oai;
    char boundary[MP_BOUNDARY_MAX + 1];
    mp_part *parts;
    oai_request oreq;
} http_req;

/* ---- pending-bytes accounting ---- */

static int reserve(http_req *r, size_t n)
{
    srv *s = r->s;
    long long max = atomic_load(&s->max_pending_bytes);
    long long cur = atomic_load(&s->pending_bytes);
    do {
        if (cur + (long long)n > max) return -1;
    } while (!atomic_compare_exchange_weak(&s->pending_bytes, &cur, cur + (long long)n));
    r->reserved += n;
    return 0;
}

static void release(http_req *r, size_t n)
{
    if (n > r->reserved) n = r->reserved;
    atomic_fetch_sub(&r->s->pending_bytes, (long long)n);
    r->reserved -= n;
}

/* ---- replies ---- */

static int send_error(http_req *r, unsigned status, const char *code, int retry_after, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int send_err(http_req *r, const srv_err *e, int retry_after, const char *allow, int www_auth)
{
    reply_opts o = {0};
    o.request_id = r->id;
    o.retry_after_s = retry_after;
    o.allow = allow;
    o.www_authenticate = www_auth;
    o.close = atomic_load(&r->s->draining);
    r->status = e->status;
    r->code = e->code;
    r->phase = PH_REPLIED;
    return reply_error(r->conn, e, &o);
}

static int send_error(http_req *r, unsigned status, const char *code, int retry_after, const char *fmt, ...)
{
    srv_err e;
    e.status = status;
    e.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return send_err(r, &e, retry_after, NULL, 0);
}

static int send_json(http_req *r, unsigned status, json_t *doc)
{
    reply_opts o = {0};
    o.request_id = r->id;
    o.close = atomic_load(&r->s->draining);
    r->status = status;
    r->phase = PH_REPLIED;
    if (!doc) {
        srv_err e;
        srv_err_set(&e, 500, "internal", "could not build the response (out of memory?)");
        return send_err(r, &e, 0, NULL, 0);
    }
    return reply_json(r->conn, status, doc, &o);
}

/* ---- request state ---- */

static int id_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == ':';
}

static void make_id(http_req *r)
{
    const hp_request *q = tp_request(r->conn);
    const char *h = q ? hp_header_get(q, "X-Request-Id") : NULL;
    if (h) {
        size_t n = strlen(h);
        int ok = n >= 1 && n <= 64;
        for (size_t i = 0; ok && i < n; i++) ok = id_char_ok(h[i]);
        if (ok) {
            memcpy(r->id, h, n + 1);
            return;
        }
    }
    unsigned long long k = atomic_fetch_add(&r->s->next_id, 1) + 1;
    snprintf(r->id, sizeof r->id, "%s-%llu", r->s->id_prefix, k);
}

static http_req *req_new(srv *s, tp_conn *conn, const char *url, const char *method)
{
    http_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    r->conn = conn;
    r->t0 = sched_now();
    r->ep = EP_OTHER;
    snprintf(r->method, sizeof r->method, "%.11s", method);
    log_quote(r->path, sizeof r->path, url);
    req_opts_default(&r->opts);
    make_id(r);
    return r;
}

static void uncount_suspended(http_req *r);

static void req_free(http_req *r)
{
    uncount_suspended(r);
    release(r, r->reserved);
    free(r->body);
    free(r->features);
    free(r->parts);
    rnnt_result_clear(&r->job.result);
    if (r->engine) eng_unref(r->engine);
    if (r->counted_in_flight) atomic_fetch_sub(&r->s->in_flight, 1);
    free(r);
}

/* ---- GET endpoints ---- */

static json_t *health_json(srv *s)
{
    metrics_summary m;
    metrics_summarise(&m);
    eng *e = srv_engine(s);
    int ready = atomic_load(&s->ready), draining = atomic_load(&s->draining);
    const char *status = draining ? "draining" : ready ? "ok" : "loading";
    json_t *model = json_null();
    if (e) {
        const rnnt_model_info *i = eng_info(e);
        model = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:I}", "name", i->name, "path",
                          eng_path(e), "feature_dim", i->feature_dim, "vocab_size", i->vocab_size,
                          "sample_rate", i->sample_rate, "hop_length", i->hop_length,
                          "frame_shift_s", i->frame_shift_s, "parameters", (json_int_t)i->n_parameters);
    }
    json_t *doc = json_pack(
        "{s:s, s:b, s:s, s:o*, s:s, s:s, s:f, "
        "s:{s:I, s:I, s:I}, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I}",
        "status", status, "ready", ready && !draining, "version", RNNT_VERSION, "model", model,
        "backend", e ? eng_backend(e) : "none", "device", e ? eng_device(e) : "none", "uptime_s",
        sched_now() - s->t_start_mono, "requests", "ok", (json_int_t)m.requests_ok, "failed",
        (json_int_t)m.requests_failed, "in_flight", (json_int_t)atomic_load(&s->in_flight),
        "queue_depth", (json_int_t)(s->sched ? sched_queue_depth(s->sched) : 0), "workers_busy",
        (json_int_t)(s->sched ? sched_busy_workers(s->sched) : 0), "batches", (json_int_t)m.batches,
        "mean_batch_size", m.batches ? (double)m.batch_items / (double)m.batches : 0.0,
        "audio_seconds", m.audio_s, "compute_seconds", m.compute_s, "real_time_factor",
        m.real_time_factor, "max_batch", (json_int_t)(e ? eng_max_batch(e) : 0), "max_frames",
        (json_int_t)(e ? eng_max_frames(e) : 0));
    if (e) eng_unref(e);
    return doc;
}

/* KServe v2 / Triton names, thin aliases: /v2/health/live, /v2/health/ready, /v2/models/{name} (metadata)
 * and /v2/models/{name}/ready; 404 for another model name or path. */
static int serve_v2(http_req *r, const char *url)
{
    srv *s = r->s;
    if (!strcmp(url, "/v2/health/live")) return send_json(r, 200, json_pack("{s:b}", "live", 1));
    int model_ready = !strncmp(url, "/v2/models/", 11) && strlen(url) > 17 && !strcmp(url + strlen(url) - 6, "/ready");
    if (!strcmp(url, "/v2/health/ready") || model_ready) {
        eng *e = srv_engine(s);
        if (model_ready) {
            size_t n = strlen(url) - 11 - 6;
            int same = e && strlen(eng_info(e)->name) == n && !strncmp(url + 11, eng_info(e)->name, n);
            if (!same) {
                if (e) eng_unref(e);
                return send_error(r, 404, "model_not_found", 0, "no model of that name is loaded");
            }
        }
        if (e) eng_unref(e);
        if (atomic_load(&s->draining))
            return send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server is shutting down");
        if (!atomic_load(&s->ready))
            return send_error(r, 503, "not_ready", RETRY_AFTER_S, "the model is still loading");
        return send_json(r, 200, json_pack("{s:b}", "ready", 1));
    }
    if (!strncmp(url, "/v2/models/", 11) && !strchr(url + 11, '/')) {
        eng *e = srv_engine(s);
        if (!e || strcmp(url + 11, eng_info(e)->name) != 0) {
            if (e) eng_unref(e);
            return send_error(r, 404, "model_not_found", 0, "no model of that name is loaded");
        }
        const rnnt_model_info *i = eng_info(e);
        json_t *doc = json_pack("{s:s, s:[s], s:s, s:[{s:s, s:s, s:[i, i]}], s:[{s:s, s:s, s:[i]}]}", "name", i->name,
                                "versions", "1", "platform", "rnntd", "inputs", "name", "features", "datatype", "FP32", "shape",
                                -1, i->feature_dim, "outputs", "name", "text", "datatype", "BYTES", "shape", 1);
        eng_unref(e);
        return send_json(r, 200, doc);
    }
    return send_error(r, 404, "not_found", 0, "no such endpoint (KServe v2: /v2/health/live, /v2/health/ready, /v2/models/NAME, /v2/models/NAME/ready)");
}

static int serve_get(http_req *r, const char *url)
{
    srv *s = r->s;
    if (strcmp(url, "/health/live") == 0)
        return send_json(r, 200, json_pack("{s:s}", "status", "alive"));
    if (strcmp(url, "/health/ready") == 0) {
        if (atomic_load(&s->draining))
            return send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server is shutting down");
        if (!atomic_load(&s->ready))
            return send_error(r, 503, "not_ready", RETRY_AFTER_S, "the model is still loading");
        return send_json(r, 200, json_pack("{s:s}", "status", "ready"));
    }
    if (strcmp(url, "/health") == 0) return send_json(r, 200, health_json(s));
    if (strncmp(url, "/v2/", 4) == 0) return serve_v2(r, url);
    if (strcmp(url, "/captions") == 0) {
        size_t n;
        const char *page = captions_page(&n);
        char *copy = malloc(n);
        if (!copy) return send_error(r, 500, "internal", 0, "out of memory");
        memcpy(copy, page, n);
        reply_opts o = {0};
        o.request_id = r->id;
        o.close = atomic_load(&s->draining);
        r->status = 200;
        r->phase = PH_REPLIED;
        return reply_text(r->conn, 200, "text/html; charset=utf-8", copy, n, &o);
    }
    /* /metrics */
    metrics_gauges g = {0};
    eng *e = srv_engine(s);
    g.ready = atomic_load(&s->ready);
    g.draining = atomic_load(&s->draining);
    g.in_flight = atomic_load(&s->in_flight);
    g.queue_depth = s->sched ? sched_queue_depth(s->sched) : 0;
    g.workers_busy = s->sched ? sched_busy_workers(s->sched) : 0;
    g.workers = s->c.workers;
    g.connections = http_connections(s);
    g.pending_bytes = atomic_load(&s->pending_bytes);
    g.uptime_s = sched_now() - s->t_start_mono;
    g.start_time_s = s->t_start_unix;
    g.version = RNNT_VERSION;
    g.model = e ? eng_info(e)->name : "";
    g.backend = e ? eng_backend(e) : "";
    g.device = e ? eng_device(e) : "";
    g.reloads_ok = atomic_load(&s->reloads_ok);
    g.reloads_failed = atomic_load(&s->reloads_failed);
    size_t len = 0;
    char *text = metrics_render(&g, &len);
    if (text) text = strm_metrics_append(s, text, &len);
    if (e) eng_unref(e);
    if (!text) return send_error(r, 500, "internal", 0, "out of memory rendering metrics");
    reply_opts o = {0};
    o.request_id = r->id;
    r->status = 200;
    r->phase = PH_REPLIED;
    o.close = atomic_load(&s->draining);
    return reply_text(r->conn, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, &o);
}

/* ---- POST /v1/transcribe ---- */

static req_ctype media_type(const char *ct)
{
    if (!ct) return CT_NONE;
    while (*ct == ' ') ct++;
    size_t n = strcspn(ct, "; \t");
    if (n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0) return CT_JSON;
    if (n == strlen("application/x-npy") && strncasecmp(ct, "application/x-npy", n) == 0) return CT_NPY;
    if (n == strlen("application/octet-stream") && strncasecmp(ct, "application/octet-stream", n) == 0) return CT_OCTET;
    if (n == strlen("multipart/form-data") && strncasecmp(ct, "multipart/form-data", n) == 0) return CT_MULTIPART;
    if (audio_body_is_audio_type(ct)) return CT_AUDIO;
    return CT_NONE;
}

/* Percent-decodes src[0..n) into dst (at least n + 1 bytes), '+' as space; -1 on a bad escape. */
static int url_decode(char *dst, const char *src, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = src[i];
        if (ch == '+') {
            ch = ' ';
        } else if (ch == '%') {
            int v = 0;
            for (int j = 1; j <= 2; j++) {
                char h = i + (size_t)j < n ? src[i + (size_t)j] : '\0';
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0) return -1;
                v = v * 16 + d;
            }
            if (v == 0) return -1;
            ch = (char)v;
            i += 2;
        }
        dst[k++] = ch;
    }
    dst[k] = '\0';
    return 0;
}

/* The query string's parameters, each through body_query_param (a name without '=' has no value). */
static int parse_query(http_req *r, const char *query)
{
    const char *p = query;
    while (*p) {
        size_t n = strcspn(p, "&");
        if (n > 0) {
            char key[128], val[256];
            size_t kn = strcspn(p, "=");
            int has_val = kn < n;
            if (!has_val) kn = n;
            size_t vn = has_val ? n - kn - 1 : 0;
            if (kn >= sizeof key || vn >= sizeof val || url_decode(key, p, kn) ||
                (has_val && url_decode(val, p + kn + 1, vn))) {
                srv_err_set(&r->err, 400, "invalid_parameter", "malformed query string");
                return -1;
            }
            if (body_query_param(key, has_val ? val : NULL, &r->opts, &r->err)) return -1;
        }
        p += n;
        if (*p == '&') p++;
    }
    return 0;
}

static int check_auth(http_req *r, const hp_request *req)
{
    srv *s = r->s;
    const char *authz = hp_header_get(req, "Authorization");
    pthread_mutex_lock(&s->mu);
    int authorised = auth_check(s->auth, authz);
    pthread_mutex_unlock(&s->mu);
    if (authorised) return 0;
    srv_err e;
    srv_err_set(&e, 401, "unauthorized", authz ? "invalid bearer token" : "missing \"Authorization: Bearer <token>\"");
    send_err(r, &e, 0, NULL, 1);
    return -1;
}

/* At the head of POST /v1/transcribe: everything that can be refused before the body. */
static void begin_transcribe(http_req *r, const hp_request *req)
{
    srv *s = r->s;
    if (atomic_load(&s->draining)) {
        metrics_reject_inc(REJECT_DRAINING);
        send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server is shutting down");
        return;
    }
    if (!atomic_load(&s->ready)) {
        metrics_reject_inc(REJECT_NOT_READY);
        send_error(r, 503, "not_ready", RETRY_AFTER_S, "the model is still loading");
        return;
    }
    if (parse_query(r, req->query)) {
        send_err(r, &r->err, 0, NULL, 0);
        return;
    }
    const char *ctype = hp_header_get(req, "Content-Type");
    r->ct = media_type(ctype);
    if (r->oai) {
        char why[160];
        if (r->ct != CT_MULTIPART) {
            send_error(r, 415, "unsupported_media_type", 0, "Content-Type must be multipart/form-data (with the audio in field 'file')");
            return;
        }
        if (mp_boundary(ctype, r->boundary, why, sizeof why)) {
            send_error(r, 400, "invalid_multipart", 0, "%s", why);
            return;
        }
    } else if (r->ct == CT_NONE || r->ct == CT_MULTIPART) {
        send_error(r, 415, "unsupported_media_type", 0,
                   "Content-Type must be application/json, application/x-npy, an audio type (audio/wav, audio/flac, audio/mpeg, "
                   "audio/ogg) or application/octet-stream; multipart/form-data goes to /v1/audio/transcriptions");
        return;
    }
    long long max_body = atomic_load(&s->max_body_bytes), max_json = atomic_load(&s->max_json_bytes);
    r->limit = (size_t)(r->ct == CT_JSON && max_json < max_body ? max_json : max_body);
    if (!req->chunked) {
        /* The transport has checked the framing (one well-formed Content-Length, or chunked). */
        if (!req->has_length) {
            send_error(r, 411, "length_required", 0, "send Content-Length or a chunked body");
            return;
        }
        unsigned long long len = req->content_length;
        if (len > r->limit) {
            send_error(r, 413, "payload_too_large", 0, "body of %llu bytes, the limit is %zu (limits.max_%s_bytes)",
                       len, r->limit, r->ct == CT_JSON ? "json" : "body");
            return;
        }
        if (len > 0) {
            if (reserve(r, (size_t)len)) {
                metrics_reject_inc(REJECT_MEMORY);
                send_error(r, 503, "overloaded", RETRY_AFTER_S, "too many request bytes held in memory; retry");
                return;
            }
            r->body = malloc((size_t)len);
            if (!r->body) {
                send_error(r, 503, "out_of_memory", RETRY_AFTER_S, "no memory for the body");
                return;
            }
            r->cap = (size_t)len;
        }
    }
    r->engine = srv_engine(s);
    if (!r->engine) {
        send_error(r, 503, "not_ready", RETRY_AFTER_S, "the model is still loading");
        return;
    }
    r->phase = PH_BODY;
}

/* A piece of the body: appended within the cap; crossing it answers 413 at once (the transport
 * closes the connection after the answer and drops the rest of the upload). */
static void on_body_piece(http_req *r, const char *data, size_t n)
{
    r->bytes_in += (long long)n;
    if (r->phase != PH_BODY) return;
    if (r->len + n > r->limit) {
        free(r->body);
        r->body = NULL;
        release(r, r->reserved);
        r->len = r->cap = 0;
        send_error(r, 413, "payload_too_large", 0, "body larger than %zu bytes (limits.max_%s_bytes)", r->limit,
                   r->ct == CT_JSON ? "json" : "body");
        return;
    }
    if (r->len + n > r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64 * 1024;
        if (nc < r->len + n) nc = r->len + n;
        if (nc > r->limit) nc = r->limit;
        char *nb = NULL;
        if (reserve(r, nc - r->cap) == 0) {
            nb = realloc(r->body, nc);
            if (!nb) release(r, nc - r->cap);
        }
        if (!nb) {
            metrics_reject_inc(REJECT_MEMORY);
            free(r->body);
            r->body = NULL;
            release(r, r->reserved);
            r->len = r->cap = 0;
            send_error(r, 503, "overloaded", RETRY_AFTER_S, "too many request bytes held in memory; retry");
            return;
        }
        r->body = nb;
        r->cap = nc;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
}

/* A resumed request leaves the count when its answer is queued, or when it ends without one. */
static void uncount_suspended(http_req *r)
{
    if (r->counted_suspended) {
        r->counted_suspended = 0;
        atomic_fetch_sub(&r->s->suspended, 1);
    }
}

/* On a worker thread: the batch holding this request ran (or was cancelled). */
static void job_done(sched_job *sj, void *user)
{
    (void)sj;
    http_req *r = user;
    r->phase = PH_DONE; /* published to the loop thread by tp_resume's lock */
    tp_resume(r->conn);
}

static json_t *result_json(http_req *r, const rnnt_result *res, double queue_s, double compute_s,
                           int batch_size)
{
    const rnnt_model *m = eng_model(r->engine);
    const rnnt_model_info *info = eng_info(r->engine);
    json_t *toks = json_array();
    if (!toks) return NULL;
    for (int i = 0; res && i < res->n_tokens; i++) {
        rnnt_token t; /* its text and time from the engine */
        json_t *o = rnnt_result_token(m, res, i, &t, NULL, 0) ? NULL
                    : r->opts.timestamps ? json_pack("{s:i, s:s, s:i, s:f}", "id", t.id, "token", t.text, "frame", t.frame, "time_s", t.time_s)
                                         : json_pack("{s:i, s:s}", "id", t.id, "token", t.text);
        if (!o || json_array_append_new(toks, o)) {
            json_decref(toks);
            return NULL;
        }
    }
    double total_s = sched_now() - r->t0;
    json_t *doc = json_pack("{s:s, s:s, s:s, s:o, s:f, s:i, s:i, s:{s:f, s:f, s:f}}", "id", r->id, "model",
                            info->name, "text", res && res->text ? res->text : "", "tokens", toks,
                            "duration_s", r->audio_s, "frames", r->frames, "batch_size", batch_size,
                            "timings", "queue_ms", queue_s * 1e3, "compute_ms", compute_s * 1e3, "total_ms",
                            total_s * 1e3);
    if (doc && r->opts.timestamps && res) {
        /* Words with start, end and confidence (transcriptions.h); with timestamps, as tokens' times. */
        json_t *words = oai_words_json(m, res);
        if (!words || json_object_set_new(doc, "words", words)) {
            json_decref(doc);
            return NULL;
        }
    }
    if (doc && r->prep_ms > 0 && json_object_set_new(json_object_get(doc, "timings"), "audio_ms", json_real(r->prep_ms))) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static void finish_transcribe(http_req *r)
{
    eng_job *j = &r->job;
    uncount_suspended(r);
    if (j->sj.outcome == SCHED_CANCELLED) {
        send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server shut down before this request was decoded");
        return;
    }
    double queue_s = j->sj.t_start - j->sj.t_submit;
    switch (j->status) {
    case RNNT_OK:
        metrics_transcription(r->audio_s, queue_s, j->compute_s, r->bytes_in);
        if (r->oai) {
            char *text = NULL;
            size_t len = 0;
            const char *ctype = NULL;
            srv_err e;
            if (oai_render(&r->oreq, eng_model(r->engine), &j->result, r->audio_s, &text, &len, &ctype, &e)) {
                send_err(r, &e, 0, NULL, 0);
                return;
            }
            reply_opts o = {0};
            o.request_id = r->id;
            o.close = atomic_load(&r->s->draining);
            r->status = 200;
            r->phase = PH_REPLIED;
            reply_text(r->conn, 200, ctype, text, len, &o);
            return;
        }
        send_json(r, 200, result_json(r, &j->result, queue_s, j->compute_s, j->sj.batch_size));
        return;
    case RNNT_ERR_NUMERIC:
        send_error(r, 422, "numeric_error", 0, "%s", j->err);
        return;
    case RNNT_ERR_NOMEM:
        send_error(r, 503, "out_of_memory", RETRY_AFTER_S, "%s", j->err);
        return;
    default:
        log_msg(LOG_ERROR, "msg=\"engine error\" id=%s status=%d", r->id, (int)j->status);
        send_error(r, 500, "internal", 0, "engine error: %s", j->err);
        return;
    }
}

static void drop_body(http_req *r)
{
    free(r->body);
    r->body = NULL;
    release(r, r->reserved);
    r->len = r->cap = 0;
    r->audio_data = NULL;
    r->audio_len = 0;
}

/* Features are in r->features (r->frames of them): validate and queue (the connection is suspended
 * until job_done). */
static void submit_features(http_req *r)
{
    srv *s = r->s;
    int dim = eng_info(r->engine)->feature_dim;
    if (r->frames == 0) {
        /* Nothing to transcribe is the client's mistake, not an empty transcript. */
        send_error(r, 422, "empty_utterance", 0, "the utterance has no frames");
        return;
    }
    size_t fbytes = (r->n_samples ? r->n_samples : (size_t)r->frames * (size_t)dim) * sizeof(float);
    if (reserve(r, fbytes)) {
        metrics_reject_inc(REJECT_MEMORY);
        send_error(r, 503, "overloaded", RETRY_AFTER_S, "too many request bytes held in memory; retry");
        return;
    }
    eng_job *j = &r->job;
    j->features = r->features;
    j->frames = r->frames;
    j->n_samples = r->n_samples;
    j->sj.frames = r->frames;
    j->sj.batch_cap = eng_max_batch(r->engine);
    j->sj.group = r->engine;
    j->sj.done = job_done;
    j->sj.user = r;
    /* Suspend first: job_done may run on a worker before sched_submit returns; its tp_resume is
     * handled by this loop thread only after this callback returns. */
    r->phase = PH_QUEUED;
    r->counted_suspended = 1;
    atomic_fetch_add(&s->suspended, 1);
    tp_suspend(r->conn);
    sched_status st = sched_submit(s->sched, &j->sj);
    if (st == SCHED_OK) return;
    r->phase = PH_BODY;
    uncount_suspended(r);
    if (st == SCHED_FULL) {
        metrics_reject_inc(REJECT_QUEUE_FULL);
        send_error(r, 503, "queue_full", sched_retry_after_s(s->sched),
                   "the request queue is full (batching.max_queue or max_queue_wait_ms); retry later");
    } else if (st == SCHED_CLOSED) {
        metrics_reject_inc(REJECT_DRAINING);
        send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server is shutting down");
    } else if (st == SCHED_UNAVAILABLE) {
        send_error(r, 503, "unavailable", 30, "every engine worker is hung (batching.worker_deadline_s)");
    } else {
        send_error(r, 500, "internal", 0, "could not queue the request");
    }
}

/* On a g_prep thread: decode r->audio_data and compute its features (CPU work proportional to the
 * audio, kept off the loop). */
static void prep_audio(workq_item *it)
{
    http_req *r = (http_req *)((char *)it - offsetof(http_req, prep));
    double t0 = sched_now();
    audio_body_limits lim = {(size_t)atomic_load(&r->s->max_body_bytes), (double)atomic_load(&r->s->max_audio_s),
                             eng_max_frames(r->engine)};
    body_feats f = {0};
    int pcm = eng_pcm_wanted(eng_backend(r->engine)); /* CUDA: the features are computed on the GPU */
    if ((pcm ? audio_body_pcm(eng_model(r->engine), r->audio_name, r->audio_data, r->audio_len, &lim, &f, &r->n_samples,
                              &r->audio_s, &r->err)
             : audio_body_features(eng_model(r->engine), r->audio_name, r->audio_data, r->audio_len, &lim, &f, &r->audio_s,
                                   &r->err)) == 0) {
        r->features = f.data;
        r->frames = f.frames;
    }
    r->prep_ms = (sched_now() - t0) * 1e3;
    r->phase = PH_PREPARED; /* published to the loop thread by tp_resume's lock */
    tp_resume(r->conn);
}

/* Hands the audio at r->audio_data to g_prep; the connection waits suspended (counted, so a drain
 * waits for it too). */
static void start_audio(http_req *r)
{
    r->phase = PH_PREP;
    r->counted_suspended = 1;
    atomic_fetch_add(&r->s->suspended, 1);
    tp_suspend(r->conn);
    r->prep.run = prep_audio;
    workq_submit(g_prep, &r->prep);
}

/* Back on the loop after prep_audio. */
static void audio_prepared(http_req *r)
{
    uncount_suspended(r);
    drop_body(r);
    if (r->err.status) {
        send_err(r, &r->err, r->err.status == 503 ? RETRY_AFTER_S : 0, NULL, 0);
        return;
    }
    submit_features(r);
}

/* POST /v1/audio/transcriptions: the form, then its file as audio. */
static void upload_complete_oai(http_req *r)
{
    char why[200];
    int n = 0;
    r->parts = calloc(OAI_MAX_PARTS, sizeof *r->parts);
    if (!r->parts) {
        send_error(r, 503, "out_of_memory", RETRY_AFTER_S, "no memory for the form");
        return;
    }
    if (mp_parse(r->body, r->len, r->boundary, r->parts, OAI_MAX_PARTS, &n, why, sizeof why)) {
        drop_body(r);
        send_error(r, 400, "invalid_multipart", 0, "%s", why);
        return;
    }
    srv_err e = {0};
    if (oai_parse_form(r->parts, n, eng_info(r->engine)->name, &r->oreq, &e)) {
        drop_body(r);
        send_err(r, &e, 0, NULL, 0);
        return;
    }
    r->audio_data = r->oreq.file->data;
    r->audio_len = r->oreq.file->len;
    snprintf(r->audio_name, sizeof r->audio_name, "file '%.64s'", r->oreq.file->has_filename ? r->oreq.file->filename : "file");
    start_audio(r);
}

/* The whole body is in: parse, validate, queue (audio goes through g_prep first). */
static void upload_complete(http_req *r)
{
    const rnnt_model_info *info = eng_info(r->engine);
    int dim = info->feature_dim, max_frames = eng_max_frames(r->engine);
    body_feats f = {0};
    srv_err e = {0};
    int rc;
    if (r->len == 0) {
        if (r->ct == CT_AUDIO) send_error(r, 422, "empty_utterance", 0, "the audio body is empty");
        else send_error(r, 400, "empty_body", 0, "the request body is empty");
        return;
    }
    if (r->oai) {
        upload_complete_oai(r);
        return;
    }
    req_ctype ct = r->ct;
    if (ct == CT_OCTET) {
        /* By its magic bytes: a .npy array or audio; anything else is not taken. */
        if (rnnt_audio_is_npy(r->body, r->len)) ct = CT_NPY;
        else if (rnnt_audio_sniff(r->body, r->len)) ct = CT_AUDIO;
        else {
            drop_body(r);
            send_error(r, 415, "unsupported_media_type", 0,
                       "application/octet-stream body is neither a .npy array nor audio this server reads (by its first bytes)");
            return;
        }
    }
    if (ct == CT_AUDIO) {
        r->audio_data = r->body;
        r->audio_len = r->len;
        snprintf(r->audio_name, sizeof r->audio_name, "body");
        start_audio(r);
        return;
    }
    if (ct == CT_JSON)
        rc = body_parse_json(r->body, r->len, dim, max_frames, &f, &r->opts, &e);
    else
        rc = body_parse_npy(r->body, r->len, dim, max_frames, &f, &e);
    drop_body(r);
    if (rc) {
        send_err(r, &e, e.status == 503 ? RETRY_AFTER_S : 0, NULL, 0);
        return;
    }
    r->features = f.data;
    r->frames = f.frames;
    r->audio_s = (double)f.frames * info->hop_length / (info->sample_rate > 0 ? info->sample_rate : 1);
    submit_features(r);
}

/* ---- transport callbacks ---- */

/* GET /v1/stream: the WebSocket upgrade (streams.c), or the reason it is refused. On success the
 * request ends inside strm_upgrade (on_done frees r). */
static void serve_stream_upgrade(http_req *r, tp_conn *c, const hp_request *req)
{
    const char *code = NULL, *msg = NULL, *hdrs = NULL;
    r->status = 101;
    unsigned st = strm_upgrade(r->s, c, req, &code, &msg, &hdrs);
    if (!st) return;
    srv_err e;
    srv_err_set(&e, st, code, "%s", msg);
    if (!hdrs) {
        send_err(r, &e, st == 503 ? RETRY_AFTER_S : 0, NULL, 0);
        return;
    }
    char *body = reply_error_body(&e);
    char h[160];
    snprintf(h, sizeof h, "Content-Type: application/json\r\nX-Request-Id: %s\r\n%s", r->id, hdrs);
    r->status = st;
    r->code = code;
    r->phase = PH_REPLIED;
    tp_respond(c, st, h, body ? body : "", body ? strlen(body) : 0, 1);
    free(body);
}

static void on_head(void *ctx, tp_conn *c, const hp_request *req)
{
    srv *s = ctx;
    http_req *r = req_new(s, c, req->path, req->method);
    if (!r) {
        tp_respond(c, 503, "Content-Type: application/json\r\nRetry-After: 1\r\n", NULL, 0, 1);
        return;
    }
    tp_set_user(c, r);
    const char *url = req->path;
    int is_get = req->method_id == HP_GET || req->method_id == HP_HEAD;
    r->oai = strcmp(url, "/v1/audio/transcriptions") == 0;
    if (strcmp(url, "/v1/transcribe") == 0 || r->oai) {
        r->ep = EP_TRANSCRIBE; /* both transcription endpoints count as "transcribe" in the metrics */
        r->counted_in_flight = 1;
        atomic_fetch_add(&s->in_flight, 1);
        /* Authentication first: without a token a client learns nothing, not even which methods exist. */
        if (check_auth(r, req)) return;
        if (req->method_id != HP_POST) {
            srv_err_set(&r->early, 405, "method_not_allowed", "use POST for %s", r->oai ? "/v1/audio/transcriptions" : "/v1/transcribe");
            r->early_allow = "POST";
        } else {
            begin_transcribe(r, req);
            return;
        }
    } else if (!strcmp(url, "/health") || !strcmp(url, "/health/live") || !strcmp(url, "/health/ready") ||
               !strncmp(url, "/v2/", 4)) {
        r->ep = EP_HEALTH; /* /v2/...: the KServe v2 / Triton health and model names (serve_v2) */
    } else if (!strcmp(url, "/v1/stream")) {
        if (check_auth(r, req)) return;
        if (req->method_id != HP_GET) {
            srv_err_set(&r->early, 405, "method_not_allowed", "use GET (a WebSocket upgrade) for /v1/stream");
            r->early_allow = "GET";
        } else {
            serve_stream_upgrade(r, c, req);
            return;
        }
    } else if (!strcmp(url, "/metrics")) {
        r->ep = EP_METRICS;
    } else if (!strcmp(url, "/captions")) {
        r->ep = EP_OTHER;
    } else {
        srv_err_set(&r->early, 404, "not_found", "no such endpoint (see /health, /metrics, POST /v1/transcribe)");
    }
    if (!r->early.status && !is_get) {
        srv_err_set(&r->early, 405, "method_not_allowed", "use GET");
        r->early_allow = "GET, HEAD";
    }
    /* No body is read here: a short one is dropped and the answer given after it (keeping the
     * connection), a long one is not waited for. */
    if (req->chunked || req->content_length > HTTP_DROP_BODY_MAX) {
        if (r->early.status) send_err(r, &r->early, 0, r->early_allow, 0);
        else serve_get(r, url);
    }
}

static void on_body(void *ctx, tp_conn *c, const char *data, size_t len)
{
    (void)ctx;
    http_req *r = tp_user(c);
    if (r->ep == EP_TRANSCRIBE && !r->early.status) on_body_piece(r, data, len);
    else r->bytes_in += (long long)len;
}

static void on_body_end(void *ctx, tp_conn *c)
{
    (void)ctx;
    http_req *r = tp_user(c);
    if (r->early.status) send_err(r, &r->early, 0, r->early_allow, 0);
    else if (r->ep == EP_TRANSCRIBE) upload_complete(r);
    else serve_get(r, tp_request(c)->path);
}

static void on_resume(void *ctx, tp_conn *c)
{
    (void)ctx;
    http_req *r = tp_user(c);
    if (r->phase == PH_DONE) finish_transcribe(r);
    else if (r->phase == PH_PREPARED) audio_prepared(r);
}

/* The transport refused a request (malformed head or framing, a deadline, a connection over the
 * cap): the same error shape, logged and counted like any other answer. */
static void on_error(void *ctx, tp_conn *c, const hp_error *he)
{
    srv *s = ctx;
    http_req *r = tp_user(c);
    if (!r) {
        const hp_request *req = tp_request(c);
        r = req_new(s, c, req ? req->path : "-", req ? req->method : "-");
        if (!r) {
            tp_respond(c, he->status, "Content-Type: application/json\r\n", NULL, 0, 1);
            return;
        }
        tp_set_user(c, r);
    }
    if (r->phase == PH_BODY) {
        free(r->body);
        r->body = NULL;
        release(r, r->reserved);
        r->len = r->cap = 0;
    }
    srv_err e;
    srv_err_set(&e, he->status, he->code, "%s", he->message);
    reply_opts o = {0};
    o.request_id = r->id;
    o.retry_after_s = he->status == 503 ? RETRY_AFTER_S : 0;
    o.close = 1;
    r->status = e.status;
    r->code = e.code;
    r->phase = PH_REPLIED;
    reply_error(c, &e, &o);
}

static void on_done(void *ctx, tp_conn *c, tp_outcome outcome)
{
    (void)ctx;
    http_req *r = tp_user(c);
    double total = sched_now() - r->t0;
    const char *outcome_s = outcome == TP_OK              ? "ok"
                            : outcome == TP_TIMEOUT        ? "timeout"
                            : outcome == TP_CLIENT_ABORT   ? "client_abort"
                            : outcome == TP_SHUTDOWN       ? "shutdown"
                                                           : "error";
    metrics_request(r->ep, r->status, total);
    log_level lv = r->status >= 500 ? LOG_WARN : LOG_INFO;
    if ((atomic_load(&r->s->log_requests) || lv == LOG_WARN) && log_enabled(lv)) {
        const char *remote = tp_peer(c);
        if (r->ep == EP_TRANSCRIBE && r->job.sj.batch_size > 0)
            log_msg(lv,
                    "msg=request id=%s method=%s path=%s status=%u code=%s outcome=%s bytes_in=%lld "
                    "frames=%d input=%s audio_s=%.3f audio_ms=%.2f batch=%d queue_ms=%.2f compute_ms=%.2f total_ms=%.2f remote=%s",
                    r->id, r->method, r->path, r->status, r->code ? r->code : "-", outcome_s, r->bytes_in,
                    r->frames, r->n_samples ? "pcm" : "features", r->audio_s, r->prep_ms, r->job.sj.batch_size,
                    (r->job.sj.t_start - r->job.sj.t_submit) * 1e3, r->job.compute_s * 1e3, total * 1e3, remote);
        else
            log_msg(lv,
                    "msg=request id=%s method=%s path=%s status=%u code=%s outcome=%s bytes_in=%lld "
                    "total_ms=%.2f remote=%s",
                    r->id, r->method, r->path, r->status, r->code ? r->code : "-", outcome_s, r->bytes_in,
                    total * 1e3, remote);
    }
    tp_set_user(c, NULL);
    req_free(r);
}

int http_start(srv *s, char *err, size_t errlen)
{
    static const tp_handlers h = {on_head, on_body, on_body_end, on_resume, on_error, on_done};
    tp_config tc = {0};
    tc.listen = s->c.listen;
    tc.port = (unsigned)s->c.port;
    tc.threads = (int)s->c.http_threads;
    tc.max_connections = s->c.max_connections;
    tc.max_per_ip = s->c.max_connections_per_ip;
    tc.head_timeout_s = s->c.head_timeout_s;
    tc.idle_timeout_s = s->c.connection_timeout_s;
    tc.body_timeout_s = &s->request_timeout_s;
    if (!g_prep) {
        /* Audio decoding threads: as many as engine workers (each audio second costs ~1-2 ms of CPU). */
        int n = (int)s->c.workers;
        if (workq_create(n < 1 ? 1 : n > 8 ? 8 : n, &g_prep)) {
            snprintf(err, errlen, "cannot start the audio decoding threads");
            return -1;
        }
    }
    if (tp_start(&tc, &h, s, &s->tp, err, errlen)) return -1;
    s->port = tp_port(s->tp);
    if (tp_max_connections(s->tp) < s->c.max_connections)
        log_msg(LOG_WARN,
                "msg=\"the open-file limit (RLIMIT_NOFILE) allows fewer connections than server.max_connections\" "
                "max_connections=%lld allowed=%lld",
                s->c.max_connections, tp_max_connections(s->tp));
    return 0;
}

long long http_max_connections(srv *s)
{
    return s->tp ? tp_max_connections(s->tp) : 0;
}

void http_quiesce(srv *s)
{
    tp_quiesce(s->tp);
}

long long http_connections(srv *s)
{
    return tp_connections(s->tp);
}

void http_stop(srv *s)
{
    /* First: an audio request still being decoded (a drain that timed out) resumes its connection
     * while the transport still exists; workq_free runs what is queued and joins. */
    workq_free(g_prep);
    g_prep = NULL;
    tp_stop(s->tp);
    s->tp = NULL;
}
