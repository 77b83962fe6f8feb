/* http.c — routes, per-request state, body intake, suspend/resume around the scheduler. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "body.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"

#define HTTP_CONN_MEMORY (64 * 1024) /* per connection: request line + headers + read buffer */
#define RETRY_AFTER_S 1

typedef enum { PH_NEW = 0, PH_BODY, PH_QUEUED, PH_DONE, PH_REPLIED } req_phase;
typedef enum { CT_NONE = 0, CT_JSON, CT_NPY } req_ctype;

typedef struct {
    eng_job job; /* first member: the scheduler hands &job.sj back to job_done */
    srv *s;
    struct MHD_Connection *conn;
    metrics_endpoint ep;
    char method[12];
    char path[96];   /* logfmt-quoted */
    char id[72];
    double t0;
    req_ctype ct;
    char *body;
    size_t len, cap, limit;
    size_t discarded;
    int raw_replied; /* an error was written to the socket directly (see on_body) */
    size_t reserved; /* bytes counted in s->pending_bytes */
    srv_err err;     /* found while receiving; answered when the upload ends */
    req_opts opts;
    eng *engine;     /* the generation this request is validated against (reference held) */
    float *features;
    pthread_mutex_t mu;
    req_phase phase;
    int counted_suspended; /* counted in s->suspended until answered or closed */
    unsigned status; /* what was sent; 0 = nothing */
    const char *code;
    long long bytes_in;
    int frames;
    double audio_s;
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

static enum MHD_Result send_error(http_req *r, unsigned status, const char *code, int retry_after,
                                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static enum MHD_Result send_err(http_req *r, const srv_err *e, int retry_after, const char *allow,
                                int www_auth)
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

static enum MHD_Result send_error(http_req *r, unsigned status, const char *code, int retry_after,
                                  const char *fmt, ...)
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

static enum MHD_Result send_json(http_req *r, unsigned status, json_t *doc)
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
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
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

static http_req *req_new(srv *s, struct MHD_Connection *conn, const char *url, const char *method)
{
    http_req *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    r->conn = conn;
    r->t0 = sched_now();
    r->ep = EP_OTHER;
    pthread_mutex_init(&r->mu, NULL);
    snprintf(r->method, sizeof r->method, "%.11s", method);
    log_quote(r->path, sizeof r->path, url);
    req_opts_default(&r->opts);
    make_id(r);
    atomic_fetch_add(&s->in_flight, 1);
    return r;
}

static void uncount_suspended(http_req *r);

static void req_free(http_req *r)
{
    uncount_suspended(r);
    release(r, r->reserved);
    free(r->body);
    free(r->features);
    rnnt_result_clear(&r->job.result);
    if (r->engine) eng_unref(r->engine);
    pthread_mutex_destroy(&r->mu);
    atomic_fetch_sub(&r->s->in_flight, 1);
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

static enum MHD_Result serve_get(http_req *r, const char *url)
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
    if (e) eng_unref(e);
    if (!text) return send_error(r, 500, "internal", 0, "out of memory rendering metrics");
    reply_opts o = {0};
    o.request_id = r->id;
    r->status = 200;
    r->phase = PH_REPLIED;
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
    return CT_NONE;
}

typedef struct {
    http_req *r;
    int failed;
} query_ctx;

static enum MHD_Result on_query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    query_ctx *q = cls;
    if (body_query_param(key, value, &q->r->opts, &q->r->err)) {
        q->failed = 1;
        return MHD_NO;
    }
    return MHD_YES;
}

static int parse_length(const char *s, unsigned long long *out)
{
    if (!s || !*s) return -1;
    unsigned long long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (v > (~0ULL - 9) / 10) return -1;
        v = v * 10 + (unsigned)(*s - '0');
    }
    *out = v;
    return 0;
}

static enum MHD_Result begin_transcribe(http_req *r)
{
    srv *s = r->s;
    if (atomic_load(&s->draining)) {
        metrics_reject_inc(REJECT_DRAINING);
        return send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server is shutting down");
    }
    const char *authz = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    pthread_mutex_lock(&s->mu);
    int authorised = auth_check(s->auth, authz);
    pthread_mutex_unlock(&s->mu);
    if (!authorised) {
        srv_err e;
        srv_err_set(&e, 401, "unauthorized",
                    authz ? "invalid bearer token" : "missing \"Authorization: Bearer <token>\"");
        return send_err(r, &e, 0, NULL, 1);
    }
    if (!atomic_load(&s->ready)) {
        metrics_reject_inc(REJECT_NOT_READY);
        return send_error(r, 503, "not_ready", RETRY_AFTER_S, "the model is still loading");
    }
    query_ctx q = {r, 0};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, on_query_arg, &q);
    if (q.failed) return send_err(r, &r->err, 0, NULL, 0);

    r->ct = media_type(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE));
    if (r->ct == CT_NONE)
        return send_error(r, 415, "unsupported_media_type", 0,
                          "Content-Type must be application/json or application/x-npy");
    long long max_body = atomic_load(&s->max_body_bytes), max_json = atomic_load(&s->max_json_bytes);
    r->limit = (size_t)(r->ct == CT_JSON && max_json < max_body ? max_json : max_body);

    const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    int chunked = te && strcasestr(te, "chunked") != NULL;
    if (!chunked) {
        unsigned long long len;
        if (!cl) return send_error(r, 411, "length_required", 0, "send Content-Length or a chunked body");
        if (parse_length(cl, &len)) return send_error(r, 400, "invalid_request", 0, "malformed Content-Length");
        if (len > r->limit)
            return send_error(r, 413, "payload_too_large", 0,
                              "body of %llu bytes, the limit is %zu (limits.max_%s_bytes)", len, r->limit,
                              r->ct == CT_JSON ? "json" : "body");
        if (len > 0) {
            if (reserve(r, (size_t)len)) {
                metrics_reject_inc(REJECT_MEMORY);
                return send_error(r, 503, "overloaded", RETRY_AFTER_S, "too many request bytes held in memory; retry");
            }
            r->body = malloc((size_t)len);
            if (!r->body) return send_error(r, 503, "out_of_memory", RETRY_AFTER_S, "no memory for the body");
            r->cap = (size_t)len;
        }
    }
    r->engine = srv_engine(s);
    if (!r->engine) return send_error(r, 503, "not_ready", RETRY_AFTER_S, "the model is still loading");
    r->phase = PH_BODY;
    return MHD_YES;
}

/* Writes a complete error response to the connection's socket, bypassing MHD (see on_body). */
static int raw_error(http_req *r, const srv_err *e)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char *body = reply_error_body(e);
    if (!ci || !body) {
        free(body);
        return -1;
    }
    char head[512];
    size_t blen = strlen(body);
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
                      "X-Request-Id: %s\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                      e->status,
                      e->status == 413   ? "Payload Too Large"
                      : e->status == 408 ? "Request Timeout"
                                         : "Service Unavailable",
                      r->id,
                      blen + 1);
    char msg[1024];
    int ok = hl > 0 && (size_t)hl + blen + 1 < sizeof msg;
    if (ok) {
        memcpy(msg, head, (size_t)hl);
        memcpy(msg + hl, body, blen);
        msg[(size_t)hl + blen] = '\n';
        size_t len = (size_t)hl + blen + 1;
        ok = send(ci->connect_fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len;
    }
    free(body);
    return ok ? 0 : -1;
}

static enum MHD_Result on_body(http_req *r, const char *data, size_t *size)
{
    size_t n = *size;
    *size = 0;
    r->bytes_in += (long long)n;
    if (r->err.status) {
        /* Already failed (cap crossed): drain what the client still sends, up to one more cap,
         * then give up on the connection rather than read without end. */
        r->discarded += n;
        return r->discarded > r->limit ? MHD_NO : MHD_YES;
    }
    if (sched_now() - r->t0 > (double)atomic_load(&r->s->request_timeout_s)) {
        srv_err_set(&r->err, 408, "request_timeout", "the upload took longer than server.request_timeout_s");
        free(r->body);
        r->body = NULL;
        release(r, r->reserved);
        r->len = r->cap = 0;
        r->discarded = r->limit + 1; /* close at the next piece */
        if (raw_error(r, &r->err) == 0) {
            r->status = r->err.status;
            r->code = r->err.code;
            r->raw_replied = 1;
        }
        return MHD_NO;
    }
    if (r->len + n > r->limit) {
        srv_err_set(&r->err, 413, "payload_too_large", "body larger than %zu bytes (limits.max_%s_bytes)",
                    r->limit, r->ct == CT_JSON ? "json" : "body");
        free(r->body);
        r->body = NULL;
        release(r, r->reserved);
        r->len = r->cap = 0;
        r->discarded = n;
        /* MHD 0.9.x refuses a response in the middle of an upload (it can only answer early, right
         * after the headers, as for a too large Content-Length). So the 413 goes straight to the
         * socket now, with Connection: close; MHD has written nothing for this request yet. The
         * rest of the upload is read and dropped (up to one more cap) so that a client that reads
         * only after sending still finds the answer, then the connection is closed. */
        if (send_err(r, &r->err, 0, NULL, 0) == MHD_YES) return MHD_YES;
        r->phase = PH_BODY;
        r->status = 0;
        if (raw_error(r, &r->err) == 0) {
            r->status = r->err.status;
            r->code = r->err.code;
            r->raw_replied = 1;
        }
        return MHD_YES;
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
            srv_err_set(&r->err, 503, "overloaded", "too many request bytes held in memory; retry");
            free(r->body);
            r->body = NULL;
            release(r, r->reserved);
            r->len = r->cap = 0;
            r->discarded = n;
            return MHD_YES;
        }
        r->body = nb;
        r->cap = nc;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    return MHD_YES;
}

/* A resumed connection leaves the count when its answer is queued, or when MHD closes it without
 * asking for one (the client went away while its batch ran). */
static void uncount_suspended(http_req *r)
{
    if (r->counted_suspended) {
        r->counted_suspended = 0;
        atomic_fetch_sub(&r->s->suspended, 1);
    }
}

static void job_done(sched_job *sj, void *user)
{
    (void)sj;
    http_req *r = user;
    pthread_mutex_lock(&r->mu);
    r->phase = PH_DONE;
    pthread_mutex_unlock(&r->mu);
    /* The connection stays suspended until this call, so r cannot be freed before it. */
    MHD_resume_connection(r->conn);
}

static json_t *result_json(http_req *r, const rnnt_result *res, double queue_s, double compute_s,
                           int batch_size)
{
    const rnnt_model *m = eng_model(r->engine);
    const rnnt_model_info *info = eng_info(r->engine);
    json_t *toks = json_array();
    if (!toks) return NULL;
    for (int i = 0; res && i < res->n_tokens; i++) {
        const char *t = rnnt_model_token(m, res->tokens[i]);
        json_t *o = r->opts.timestamps
                        ? json_pack("{s:i, s:s, s:i, s:f}", "id", res->tokens[i], "token", t ? t : "",
                                    "frame", res->frames[i], "time_s", res->frames[i] * info->frame_shift_s)
                        : json_pack("{s:i, s:s}", "id", res->tokens[i], "token", t ? t : "");
        if (!o || json_array_append_new(toks, o)) {
            json_decref(toks);
            return NULL;
        }
    }
    double total_s = sched_now() - r->t0;
    return json_pack("{s:s, s:s, s:s, s:o, s:f, s:i, s:i, s:{s:f, s:f, s:f}}", "id", r->id, "model",
                     info->name, "text", res && res->text ? res->text : "", "tokens", toks,
                     "duration_s", r->audio_s, "frames", r->frames, "batch_size", batch_size,
                     "timings", "queue_ms", queue_s * 1e3, "compute_ms", compute_s * 1e3, "total_ms",
                     total_s * 1e3);
}

static enum MHD_Result finish_transcribe(http_req *r)
{
    eng_job *j = &r->job;
    uncount_suspended(r);
    if (j->sj.outcome == SCHED_CANCELLED)
        return send_error(r, 503, "shutting_down", RETRY_AFTER_S,
                          "the server shut down before this request was decoded");
    double queue_s = j->sj.t_start - j->sj.t_submit;
    switch (j->status) {
    case RNNT_OK: {
        metrics_transcription(r->audio_s, queue_s, j->compute_s, r->bytes_in);
        return send_json(r, 200, result_json(r, &j->result, queue_s, j->compute_s, j->sj.batch_size));
    }
    case RNNT_ERR_NUMERIC:
        return send_error(r, 422, "numeric_error", 0, "%s", j->err);
    case RNNT_ERR_NOMEM:
        return send_error(r, 503, "out_of_memory", RETRY_AFTER_S, "%s", j->err);
    default:
        log_msg(LOG_ERROR, "msg=\"engine error\" id=%s status=%d", r->id, (int)j->status);
        return send_error(r, 500, "internal", 0, "engine error: %s", j->err);
    }
}

static enum MHD_Result upload_complete(http_req *r)
{
    srv *s = r->s;
    if (r->raw_replied) return MHD_NO; /* answered on the socket already: close */
    if (r->err.status) return send_err(r, &r->err, r->err.status == 503 ? RETRY_AFTER_S : 0, NULL, 0);
    const rnnt_model_info *info = eng_info(r->engine);
    int dim = info->feature_dim, max_frames = eng_max_frames(r->engine);
    body_feats f = {0};
    srv_err e = {0};
    int rc;
    if (r->len == 0)
        rc = (srv_err_set(&e, 400, "empty_body", "the request body is empty"), -1);
    else if (r->ct == CT_JSON)
        rc = body_parse_json(r->body, r->len, dim, max_frames, &f, &r->opts, &e);
    else
        rc = body_parse_npy(r->body, r->len, dim, max_frames, &f, &e);
    free(r->body);
    r->body = NULL;
    release(r, r->reserved);
    r->len = r->cap = 0;
    if (rc) return send_err(r, &e, e.status == 503 ? RETRY_AFTER_S : 0, NULL, 0);
    r->features = f.data;
    r->frames = f.frames;
    r->audio_s = (double)f.frames * info->hop_length / (info->sample_rate > 0 ? info->sample_rate : 1);
    size_t fbytes = (size_t)f.frames * (size_t)dim * sizeof(float);
    if (fbytes && reserve(r, fbytes)) {
        metrics_reject_inc(REJECT_MEMORY);
        return send_error(r, 503, "overloaded", RETRY_AFTER_S, "too many request bytes held in memory; retry");
    }
    if (f.frames == 0) {
        /* No frames, no tokens (FORMAT.md); nothing for the engine to do. */
        metrics_transcription(0, 0, 0, r->bytes_in);
        return send_json(r, 200, result_json(r, NULL, 0, 0, 0));
    }
    eng_job *j = &r->job;
    j->features = r->features;
    j->frames = f.frames;
    j->sj.frames = f.frames;
    j->sj.batch_cap = eng_max_batch(r->engine);
    j->sj.group = r->engine;
    j->sj.done = job_done;
    j->sj.user = r;
    /* Submit and suspend under r->mu, so job_done (which takes it) resumes only a suspended
     * connection. */
    pthread_mutex_lock(&r->mu);
    sched_status st = sched_submit(s->sched, &j->sj);
    if (st == SCHED_OK) {
        r->phase = PH_QUEUED;
        r->counted_suspended = 1;
        atomic_fetch_add(&s->suspended, 1);
        MHD_suspend_connection(r->conn);
    }
    pthread_mutex_unlock(&r->mu);
    if (st == SCHED_OK) return MHD_YES;
    if (st == SCHED_FULL) {
        metrics_reject_inc(REJECT_QUEUE_FULL);
        return send_error(r, 503, "queue_full", sched_retry_after_s(s->sched),
                          "the request queue is full (batching.max_queue or max_queue_wait_ms); retry later");
    }
    if (st == SCHED_CLOSED) {
        metrics_reject_inc(REJECT_DRAINING);
        return send_error(r, 503, "shutting_down", RETRY_AFTER_S, "the server is shutting down");
    }
    if (st == SCHED_UNAVAILABLE)
        return send_error(r, 503, "unavailable", 30, "every engine worker is hung (batching.worker_deadline_s)");
    return send_error(r, 500, "internal", 0, "could not queue the request");
}

/* ---- MHD callbacks ---- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    srv *s = cls;
    http_req *r = *req_cls;
    if (!r) {
        r = req_new(s, conn, url, method);
        if (!r) return MHD_NO;
        *req_cls = r;
        int is_get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        if (strcmp(url, "/v1/transcribe") == 0) {
            r->ep = EP_TRANSCRIBE;
            if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
                srv_err e;
                srv_err_set(&e, 405, "method_not_allowed", "use POST for /v1/transcribe");
                return send_err(r, &e, 0, "POST", 0);
            }
            return begin_transcribe(r);
        }
        if (!strcmp(url, "/health") || !strcmp(url, "/health/live") || !strcmp(url, "/health/ready"))
            r->ep = EP_HEALTH;
        else if (!strcmp(url, "/metrics"))
            r->ep = EP_METRICS;
        else
            return send_error(r, 404, "not_found", 0, "no such endpoint (see /health, /metrics, POST /v1/transcribe)");
        if (!is_get) {
            srv_err e;
            srv_err_set(&e, 405, "method_not_allowed", "use GET");
            return send_err(r, &e, 0, "GET, HEAD", 0);
        }
        /* Answer on the next call, once MHD has seen the (empty) body: a response queued right
         * after the headers makes MHD close the connection instead of keeping it alive. */
        r->phase = PH_BODY;
        return MHD_YES;
    }
    if (r->phase == PH_REPLIED) {
        /* A response is queued; whatever body follows is not ours to read. */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->ep != EP_TRANSCRIBE) {
        if (*upload_data_size) {
            /* A GET with a body: not ours to read; answer without it. */
            r->bytes_in += (long long)*upload_data_size;
            *upload_data_size = 0;
            return MHD_YES;
        }
        return serve_get(r, url);
    }
    if (*upload_data_size) return on_body(r, upload_data, upload_data_size);
    pthread_mutex_lock(&r->mu);
    req_phase ph = r->phase;
    pthread_mutex_unlock(&r->mu);
    if (ph == PH_DONE) return finish_transcribe(r);
    if (ph == PH_BODY) return upload_complete(r);
    return MHD_YES; /* PH_QUEUED: a spurious call while suspended; nothing to do */
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    http_req *r = *req_cls;
    if (!r) return;
    *req_cls = NULL;
    double total = sched_now() - r->t0;
    const char *outcome = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK     ? "ok"
                          : toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timeout"
                          : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT    ? "client_abort"
                          : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "shutdown"
                                                                          : "error";
    metrics_request(r->ep, r->status, total);
    log_level lv = r->status >= 500 ? LOG_WARN : LOG_INFO;
    if ((atomic_load(&r->s->log_requests) || lv == LOG_WARN) && log_enabled(lv)) {
        char remote[64] = "-";
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci && ci->client_addr) {
            char host[48] = "";
            unsigned port = 0;
            if (ci->client_addr->sa_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)ci->client_addr;
                inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
                port = ntohs(a->sin_port);
            } else if (ci->client_addr->sa_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ci->client_addr;
                inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
                port = ntohs(a->sin6_port);
            }
            snprintf(remote, sizeof remote, "%s%s%s:%u", ci->client_addr->sa_family == AF_INET6 ? "[" : "",
                     host, ci->client_addr->sa_family == AF_INET6 ? "]" : "", port);
        }
        if (r->ep == EP_TRANSCRIBE && r->job.sj.batch_size > 0)
            log_msg(lv,
                    "msg=request id=%s method=%s path=%s status=%u code=%s outcome=%s bytes_in=%lld "
                    "frames=%d audio_s=%.3f batch=%d queue_ms=%.2f compute_ms=%.2f total_ms=%.2f remote=%s",
                    r->id, r->method, r->path, r->status, r->code ? r->code : "-", outcome, r->bytes_in,
                    r->frames, r->audio_s, r->job.sj.batch_size,
                    (r->job.sj.t_start - r->job.sj.t_submit) * 1e3, r->job.compute_s * 1e3, total * 1e3, remote);
        else
            log_msg(lv,
                    "msg=request id=%s method=%s path=%s status=%u code=%s outcome=%s bytes_in=%lld "
                    "total_ms=%.2f remote=%s",
                    r->id, r->method, r->path, r->status, r->code ? r->code : "-", outcome, r->bytes_in,
                    total * 1e3, remote);
    }
    req_free(r);
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512], q[600];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
    log_quote(q, sizeof q, msg);
    /* While serving, libmicrohttpd reports what clients do (closed early, timed out, sent junk);
     * each request has its own line already, so these are info. "Application reported internal
     * error" follows every connection we close on purpose (a body past its cap): debug. */
    log_msg(strstr(msg, "Application reported internal error") ? LOG_DEBUG : LOG_INFO,
            "msg=libmicrohttpd detail=%s", q);
}

int http_start(srv *s, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    int fam = cfg_listen_addr(s->c.listen, &a4->sin_addr, &a6->sin6_addr);
    if (fam == 0) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)s->c.port);
    } else if (fam == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)s->c.port);
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "server.listen: \"%s\" is not an IPv4 or IPv6 address", s->c.listen);
        return -1;
    }
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)s->c.port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->c.http_threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)s->c.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->c.connection_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(err, errlen, "cannot listen on %s port %lld (address in use, or not allowed?)", s->c.listen,
                 s->c.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : (unsigned)s->c.port;
    return 0;
}

void http_quiesce(srv *s)
{
    if (!s->mhd) return;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

long long http_connections(srv *s)
{
    if (!s->mhd) return 0;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return di ? (long long)di->num_connections : 0;
}

void http_stop(srv *s)
{
    if (!s->mhd) return;
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}
