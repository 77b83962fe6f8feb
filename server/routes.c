/* routes.c — layer 2 (routes.h): the table from method + path to a handler, the transport callbacks
 * that dispatch through it, the per-request state, body intake and the transcription handlers. The
 * read-only endpoints are in info.c. Every limit and every piece of server state comes from the
 * service (svc.h); the answers' bytes from reply.h.
 * Thread-safety: see routes.h and routes_int.h. */
#include "routes.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rnnt_audio.h"
#include "audio_body.h"
#include "result_text.h"
#include "eng_pcm.h"
#include "log.h"
#include "routes_int.h"
#include "streams.h"

/* A request to an endpoint that takes no body is answered after its body is read and dropped (the
 * connection stays usable) when the body is at most this long; a longer one is answered at once and
 * the connection closed. */
#define ROUTE_DROP_BODY_MAX (64 * 1024)

/* Audio bodies are decoded and turned into features here, off the loop threads (audio_body.h). */
static workq *g_prep;

/* ---- the table ---- */

enum {
    R_AUTH = 1,       /* the bearer token is checked first: without it a client learns nothing */
    R_COUNTED = 2,    /* a transcription: counted in flight from its head to its end */
    R_AT_HEAD = 4,    /* the handler runs at the head (it reads the body itself, or upgrades) */
};
#define M_GET (1u << HP_GET)
#define M_HEAD (1u << HP_HEAD)
#define M_POST (1u << HP_POST)

typedef struct route {
    const char *pattern; /* exact path; "{name}" matches a segment (the rest, before a fixed tail); a
                          * final "*" matches any rest */
    unsigned methods;
    const char *allow;        /* the Allow header of a 405 */
    const char *wrong_method; /* the 405 message */
    metrics_endpoint ep;
    unsigned flags;
    void (*handler)(route_req *r, const hp_request *req); /* R_AT_HEAD: at the head; else at the body's end */
    int arg; /* the handler's own (info.c: which endpoint) */
} route;

static void begin_transcribe(route_req *r, const hp_request *req);
static void stream_upgrade(route_req *r, const hp_request *req);
/* The read-only endpoints: info.c, by the table's argument. */
static void info(route_req *r, const hp_request *req)
{
    (void)req;
    info_serve(r, (info_endpoint)r->route->arg);
}

#define GETS (M_GET | M_HEAD), "GET, HEAD", "use GET"
static const route g_routes[] = {
    /* Both transcription endpoints count as "transcribe" in the metrics. */
    {"/v1/transcribe", M_POST, "POST", "use POST for /v1/transcribe", EP_TRANSCRIBE, R_AUTH | R_COUNTED | R_AT_HEAD, begin_transcribe, 0},
    {"/v1/audio/transcriptions", M_POST, "POST", "use POST for /v1/audio/transcriptions", EP_TRANSCRIBE,
     R_AUTH | R_COUNTED | R_AT_HEAD, begin_transcribe, 0},
    {"/v1/stream", M_GET, "GET", "use GET (a WebSocket upgrade) for /v1/stream", EP_OTHER, R_AUTH | R_AT_HEAD, stream_upgrade, 0},
    {"/health", GETS, EP_HEALTH, 0, info, INFO_HEALTH},
    {"/health/live", GETS, EP_HEALTH, 0, info, INFO_LIVE},
    {"/health/ready", GETS, EP_HEALTH, 0, info, INFO_READY},
    {"/v2/health/live", GETS, EP_HEALTH, 0, info, INFO_V2_LIVE},
    {"/v2/health/ready", GETS, EP_HEALTH, 0, info, INFO_V2_READY},
    {"/v2/models/{name}/ready", GETS, EP_HEALTH, 0, info, INFO_V2_MODEL_READY},
    {"/v2/models/{name}", GETS, EP_HEALTH, 0, info, INFO_V2_MODEL},
    {"/v2/*", GETS, EP_HEALTH, 0, info, INFO_V2_UNKNOWN},
    {"/metrics", GETS, EP_METRICS, 0, info, INFO_METRICS},
    {"/captions", GETS, EP_OTHER, 0, info, INFO_CAPTIONS},
};

/* 1 when path matches pattern; a {name} is copied into param. A final {name} is one segment (no '/',
 * may be empty); one before a fixed tail is everything up to the tail (at least one byte). */
static int route_match(const char *pattern, const char *path, char *param, size_t cap)
{
    const char *brace = strstr(pattern, "{name}");
    size_t plen = strlen(pattern);
    if (!brace) {
        if (plen && pattern[plen - 1] == '*') return strncmp(path, pattern, plen - 1) == 0;
        return strcmp(path, pattern) == 0;
    }
    size_t pre = (size_t)(brace - pattern), n = strlen(path);
    const char *tail = brace + 6;
    size_t tl = strlen(tail);
    if (strncmp(path, pattern, pre) != 0 || n < pre + tl) return 0;
    size_t vlen = n - pre - tl;
    if (strcmp(path + n - tl, tail) != 0) return 0;
    if (tl ? vlen == 0 : memchr(path + pre, '/', vlen) != NULL) return 0;
    if (vlen >= cap) return 0;
    memcpy(param, path + pre, vlen);
    param[vlen] = '\0';
    return 1;
}

static const route *route_find(const char *path, char *param, size_t cap)
{
    for (size_t i = 0; i < sizeof g_routes / sizeof g_routes[0]; i++)
        if (route_match(g_routes[i].pattern, path, param, cap)) return &g_routes[i];
    return NULL;
}

/* ---- answers ---- */

int route_send_err(route_req *r, const srv_err *e, const char *allow, int www_auth)
{
    reply_opts o = {0};
    o.request_id = r->id;
    o.retry_after_s = e->retry_after_s;
    o.allow = allow;
    o.www_authenticate = www_auth;
    o.close = svc_draining(r->s);
    r->status = e->status;
    r->code = e->code;
    r->phase = PH_REPLIED;
    return reply_error(r->conn, e, &o);
}

int route_send_error(route_req *r, unsigned status, const char *code, const char *fmt, ...)
{
    srv_err e;
    srv_err_set(&e, status, code, "%s", "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return route_send_err(r, &e, NULL, 0);
}

int route_send_text(route_req *r, const char *content_type, char *text, size_t len)
{
    reply_opts o = {0};
    o.request_id = r->id;
    o.close = svc_draining(r->s);
    r->status = 200;
    r->phase = PH_REPLIED;
    return reply_text(r->conn, 200, content_type, text, len, &o);
}

int route_send_json(route_req *r, unsigned status, json_t *doc)
{
    if (!doc) return route_send_error(r, 500, "internal", "could not build the response (out of memory?)");
    reply_opts o = {0};
    o.request_id = r->id;
    o.close = svc_draining(r->s);
    r->status = status;
    r->phase = PH_REPLIED;
    return reply_json(r->conn, status, doc, &o);
}

/* ---- request state ---- */

static int id_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
           c == ':';
}

/* The client's X-Request-Id when it is 1-64 safe characters, else one of ours. */
static void make_id(route_req *r)
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
    svc_request_id(r->s, r->id, sizeof r->id);
}

static route_req *req_new(srv *s, tp_conn *conn, const char *url, const char *method)
{
    route_req *r = calloc(1, sizeof *r);
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

/* A suspended request leaves the count when its answer is queued, or when it ends without one. */
static void uncount_suspended(route_req *r)
{
    if (r->counted_suspended) {
        r->counted_suspended = 0;
        svc_suspend_end(r->s);
    }
}

static void suspend(route_req *r, req_phase phase)
{
    r->phase = phase;
    r->counted_suspended = 1;
    svc_suspend_begin(r->s);
    tp_suspend(r->conn);
}

static void drop_body(route_req *r)
{
    free(r->body);
    r->body = NULL;
    svc_release(r->s, &r->reserved, r->reserved);
    r->len = r->cap = 0;
    r->audio_data = NULL;
    r->audio_len = 0;
}

static void req_free(route_req *r)
{
    uncount_suspended(r);
    drop_body(r);
    free(r->features);
    free(r->parts);
    rnnt_result_clear(&r->job.result);
    if (r->engine) eng_unref(r->engine);
    if (r->counted_in_flight) svc_request_end(r->s);
    free(r);
}

/* ---- POST /v1/transcribe and /v1/audio/transcriptions ---- */

/* At the head of a transcription: everything that can be refused before the body. */
static void begin_transcribe(route_req *r, const hp_request *req)
{
    srv *s = r->s;
    srv_err e = {0};
    if (svc_admit(s, &e)) {
        route_send_err(r, &e, NULL, 0);
        return;
    }
    if (body_parse_query(req->query, &r->opts, &r->err)) {
        route_send_err(r, &r->err, NULL, 0);
        return;
    }
    r->oai = strcmp(req->path, "/v1/audio/transcriptions") == 0;
    const char *ctype = hp_header_get(req, "Content-Type");
    r->ct = body_media_type(ctype);
    if (r->oai) {
        char why[160];
        if (r->ct != CT_MULTIPART) {
            route_send_error(r, 415, "unsupported_media_type", "Content-Type must be multipart/form-data (with the audio in field 'file')");
            return;
        }
        if (mp_boundary(ctype, r->boundary, why, sizeof why)) {
            route_send_error(r, 400, "invalid_multipart", "%s", why);
            return;
        }
    } else if (r->ct == CT_NONE || r->ct == CT_MULTIPART) {
        route_send_error(r, 415, "unsupported_media_type",
                         "Content-Type must be application/json, application/x-npy, an audio type (audio/wav, audio/flac, audio/mpeg, "
                         "audio/ogg) or application/octet-stream; multipart/form-data goes to /v1/audio/transcriptions");
        return;
    }
    r->limit = svc_body_limit(s, r->ct == CT_JSON, &r->limit_key);
    if (!req->chunked) {
        /* The transport has checked the framing (one well-formed Content-Length, or chunked). */
        if (!req->has_length) {
            route_send_error(r, 411, "length_required", "send Content-Length or a chunked body");
            return;
        }
        unsigned long long len = req->content_length;
        if (len > r->limit) {
            route_send_error(r, 413, "payload_too_large", "body of %llu bytes, the limit is %zu (limits.max_%s_bytes)", len,
                             r->limit, r->limit_key);
            return;
        }
        if (len > 0) {
            if (svc_reserve(s, &r->reserved, (size_t)len, &e)) {
                route_send_err(r, &e, NULL, 0);
                return;
            }
            r->body = malloc((size_t)len);
            if (!r->body) {
                route_send_error(r, 503, "out_of_memory", "no memory for the body");
                return;
            }
            r->cap = (size_t)len;
        }
    }
    r->engine = svc_engine(s);
    if (!r->engine) {
        route_send_error(r, 503, "not_ready", "the model is still loading");
        return;
    }
    r->phase = PH_BODY;
}

/* A piece of the body: appended within the cap; crossing it answers 413 at once (the transport
 * closes the connection after the answer and drops the rest of the upload). */
static void body_piece(route_req *r, const char *data, size_t n)
{
    r->bytes_in += (long long)n;
    if (r->phase != PH_BODY) return;
    if (r->body && data == r->body + r->len && r->len + n <= r->cap) {
        r->len += n; /* received in place (body_room): nothing to copy */
        return;
    }
    if (r->len + n > r->limit) {
        drop_body(r);
        route_send_error(r, 413, "payload_too_large", "body larger than %zu bytes (limits.max_%s_bytes)", r->limit, r->limit_key);
        return;
    }
    if (r->len + n > r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64 * 1024;
        if (nc < r->len + n) nc = r->len + n;
        if (nc > r->limit) nc = r->limit;
        char *nb = NULL;
        srv_err e = {0};
        if (svc_reserve(r->s, &r->reserved, nc - r->cap, &e) == 0) {
            nb = realloc(r->body, nc);
            if (!nb) svc_release(r->s, &r->reserved, nc - r->cap);
        }
        if (!nb) {
            drop_body(r);
            if (!e.status) metrics_reject_inc(REJECT_MEMORY); /* realloc failed; svc_reserve counts its own */
            route_send_error(r, 503, "overloaded", "too many request bytes held in memory; retry");
            return;
        }
        r->body = nb;
        r->cap = nc;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
}

/* On a worker thread: the batch holding this request ran (or was cancelled). */
static void job_done(sched_job *sj, void *user)
{
    (void)sj;
    route_req *r = user;
    r->phase = PH_DONE; /* published to the loop thread by tp_resume's lock */
    tp_resume(r->conn);
}

/* RNNTD_REPLY_TEXT=0 writes every result through jansson (A/B runs). */
static int result_text_wanted(void)
{
    static _Atomic int wanted = -1; /* every loop thread computes the same value */
    int w = atomic_load(&wanted);
    if (w < 0) {
        const char *env = getenv("RNNTD_REPLY_TEXT");
        w = !(env && !strcmp(env, "0"));
        atomic_store(&wanted, w);
    }
    return w;
}

/* Back on the loop after job_done: the answer. */
static void finish_transcribe(route_req *r)
{
    eng_job *j = &r->job;
    uncount_suspended(r);
    srv_err e = {0};
    if (svc_finish(r->s, j, r->audio_s, r->bytes_in, r->id, &e)) {
        route_send_err(r, &e, NULL, 0);
        return;
    }
    if (r->oai) {
        char *text = NULL;
        size_t len = 0;
        const char *ctype = NULL;
        if (oai_render(&r->oreq, eng_model(r->engine), &j->result, r->audio_s, &text, &len, &ctype, &e)) {
            route_send_err(r, &e, NULL, 0);
            return;
        }
        route_send_text(r, ctype, text, len);
        return;
    }
    reply_result_info ri = {r->id, r->audio_s, r->frames, j->sj.batch_size, j->sj.t_start - j->sj.t_submit, j->compute_s,
                            sched_now() - r->t0, r->prep_ms, r->opts.timestamps};
    size_t len = 0;
    char *text = result_text_wanted() ? result_text(eng_model(r->engine), &j->result, &ri, &len) : NULL;
    if (text) {
        /* The same bytes as the jansson document below, written without building it. */
        reply_opts o = {0};
        o.request_id = r->id;
        o.close = svc_draining(r->s);
        r->status = 200;
        r->phase = PH_REPLIED;
        reply_text(r->conn, 200, "application/json", text, len, &o);
        return;
    }
    route_send_json(r, 200, reply_result_json(eng_model(r->engine), &j->result, &ri));
}

/* Features are in r->features (r->frames of them): hold their bytes and queue them (the connection is
 * suspended until job_done). */
static void submit_features(route_req *r)
{
    if (r->frames == 0) {
        /* Nothing to transcribe is the client's mistake, not an empty transcript. */
        route_send_error(r, 422, "empty_utterance", "the utterance has no frames");
        return;
    }
    srv_err e = {0};
    size_t fbytes = (r->n_samples ? r->n_samples : (size_t)r->frames * (size_t)eng_info(r->engine)->feature_dim) * sizeof(float);
    if (svc_reserve(r->s, &r->reserved, fbytes, &e)) {
        route_send_err(r, &e, NULL, 0);
        return;
    }
    r->job.features = r->features;
    r->job.frames = r->frames;
    r->job.n_samples = r->n_samples;
    /* Suspend first: job_done may run on a worker before svc_submit returns; its tp_resume is
     * handled by this loop thread only after this callback returns. */
    suspend(r, PH_QUEUED);
    if (svc_submit(r->s, r->engine, &r->job, job_done, r, &e) == 0) return;
    r->phase = PH_BODY;
    uncount_suspended(r);
    route_send_err(r, &e, NULL, 0);
}

/* On a prep thread: decode r->audio_data and compute its features (CPU work proportional to the
 * audio, kept off the loop). */
static void prep_audio(workq_item *it)
{
    route_req *r = (route_req *)((char *)it - offsetof(route_req, prep));
    double t0 = sched_now();
    audio_body_limits lim = svc_audio_limits(r->s, r->engine);
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

/* Hands the audio at r->audio_data to a prep thread; the connection waits suspended (counted, so a
 * drain waits for it too). */
static void start_audio(route_req *r)
{
    suspend(r, PH_PREP);
    r->prep.run = prep_audio;
    workq_submit(g_prep, &r->prep);
}

/* Back on the loop after prep_audio. */
static void audio_prepared(route_req *r)
{
    uncount_suspended(r);
    drop_body(r);
    if (r->err.status) {
        route_send_err(r, &r->err, NULL, 0);
        return;
    }
    submit_features(r);
}

/* POST /v1/audio/transcriptions: the form, then its file as audio. */
static void upload_complete_oai(route_req *r)
{
    char why[200];
    int n = 0;
    r->parts = calloc(OAI_MAX_PARTS, sizeof *r->parts);
    if (!r->parts) {
        route_send_error(r, 503, "out_of_memory", "no memory for the form");
        return;
    }
    if (mp_parse(r->body, r->len, r->boundary, r->parts, OAI_MAX_PARTS, &n, why, sizeof why)) {
        drop_body(r);
        route_send_error(r, 400, "invalid_multipart", "%s", why);
        return;
    }
    srv_err e = {0};
    if (oai_parse_form(r->parts, n, eng_info(r->engine)->name, &r->oreq, &e)) {
        drop_body(r);
        route_send_err(r, &e, NULL, 0);
        return;
    }
    r->audio_data = r->oreq.file->data;
    r->audio_len = r->oreq.file->len;
    snprintf(r->audio_name, sizeof r->audio_name, "file '%.64s'", r->oreq.file->has_filename ? r->oreq.file->filename : "file");
    start_audio(r);
}

/* The whole body is in: parse, validate, queue (audio goes through a prep thread first). */
static void upload_complete(route_req *r)
{
    const rnnt_model_info *info = eng_info(r->engine);
    int dim = info->feature_dim, max_frames = eng_max_frames(r->engine);
    body_feats f = {0};
    srv_err e = {0};
    int rc;
    if (r->len == 0) {
        if (r->ct == CT_AUDIO) route_send_error(r, 422, "empty_utterance", "the audio body is empty");
        else route_send_error(r, 400, "empty_body", "the request body is empty");
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
            route_send_error(r, 415, "unsupported_media_type",
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
    if (ct == CT_JSON) rc = body_parse_json(r->body, r->len, dim, max_frames, &f, &r->opts, &e);
    else rc = body_parse_npy(r->body, r->len, dim, max_frames, &f, &e);
    drop_body(r);
    if (rc) {
        route_send_err(r, &e, NULL, 0);
        return;
    }
    r->features = f.data;
    r->frames = f.frames;
    r->audio_s = (double)f.frames * info->hop_length / (info->sample_rate > 0 ? info->sample_rate : 1);
    submit_features(r);
}

/* ---- GET /v1/stream ---- */

/* The WebSocket upgrade (streams.c), or the reason it is refused. On success the request ends inside
 * strm_upgrade (on_done frees r). */
static void stream_upgrade(route_req *r, const hp_request *req)
{
    const char *code = NULL, *msg = NULL, *hdrs = NULL;
    r->status = 101;
    unsigned st = strm_upgrade(r->s, r->conn, req, &code, &msg, &hdrs);
    if (!st) return;
    srv_err e;
    srv_err_set(&e, st, code, "%s", msg);
    if (!hdrs) {
        route_send_err(r, &e, NULL, 0);
        return;
    }
    char *body = reply_error_body(&e);
    char h[160];
    snprintf(h, sizeof h, "Content-Type: application/json\r\nX-Request-Id: %s\r\n%s", r->id, hdrs);
    r->status = st;
    r->code = code;
    r->phase = PH_REPLIED;
    tp_respond(r->conn, st, h, body ? body : "", body ? strlen(body) : 0, 1);
    free(body);
}

/* ---- transport callbacks: dispatch through the table ---- */

static void on_head(void *ctx, tp_conn *c, const hp_request *req)
{
    srv *s = ctx;
    route_req *r = req_new(s, c, req->path, req->method);
    if (!r) {
        tp_respond(c, 503, "Content-Type: application/json\r\nRetry-After: 1\r\n", NULL, 0, 1);
        return;
    }
    tp_set_user(c, r);
    const route *rt = route_find(req->path, r->param, sizeof r->param);
    r->route = rt;
    if (!rt) {
        srv_err_set(&r->early, 404, "not_found", "no such endpoint (see /health, /metrics, POST /v1/transcribe)");
    } else {
        r->ep = rt->ep;
        if (rt->flags & R_COUNTED) {
            r->counted_in_flight = 1;
            svc_request_begin(s);
        }
        if (rt->flags & R_AUTH) {
            const char *authz = hp_header_get(req, "Authorization");
            if (svc_authorised(s, authz)) {
                srv_err e;
                srv_err_set(&e, 401, "unauthorized", authz ? "invalid bearer token" : "missing \"Authorization: Bearer <token>\"");
                route_send_err(r, &e, NULL, 1);
                return;
            }
        }
        if (!(rt->methods & (1u << req->method_id))) {
            srv_err_set(&r->early, 405, "method_not_allowed", "%s", rt->wrong_method);
            r->early_allow = rt->allow;
        } else if (rt->flags & R_AT_HEAD) {
            rt->handler(r, req);
            return;
        }
    }
    /* No body is read here: a short one is dropped and the answer given after it (keeping the
     * connection), a long one is not waited for. */
    if (req->chunked || req->content_length > ROUTE_DROP_BODY_MAX) {
        if (r->early.status) route_send_err(r, &r->early, r->early_allow, 0);
        else rt->handler(r, req);
    }
}

static void on_body(void *ctx, tp_conn *c, const char *data, size_t len)
{
    (void)ctx;
    route_req *r = tp_user(c);
    if (r->ep == EP_TRANSCRIBE && !r->early.status) body_piece(r, data, len);
    else r->bytes_in += (long long)len;
}

/* The transport may receive a Content-Length transcription body straight into the buffer sized at
 * the head (begin_transcribe), within its cap. */
static char *body_room(void *ctx, tp_conn *c, size_t *room)
{
    (void)ctx;
    route_req *r = tp_user(c);
    if (!r || r->ep != EP_TRANSCRIBE || r->early.status || r->phase != PH_BODY || !r->body || r->len >= r->cap) return NULL;
    *room = r->cap - r->len;
    return r->body + r->len;
}

static void on_body_end(void *ctx, tp_conn *c)
{
    (void)ctx;
    route_req *r = tp_user(c);
    if (r->early.status) route_send_err(r, &r->early, r->early_allow, 0);
    else if (r->ep == EP_TRANSCRIBE) upload_complete(r);
    else r->route->handler(r, tp_request(c));
}

static void on_resume(void *ctx, tp_conn *c)
{
    (void)ctx;
    route_req *r = tp_user(c);
    if (r->phase == PH_DONE) finish_transcribe(r);
    else if (r->phase == PH_PREPARED) audio_prepared(r);
}

/* The transport refused a request (malformed head or framing, a deadline, a connection over the
 * cap): the same error shape, logged and counted like any other answer. */
static void on_error(void *ctx, tp_conn *c, const hp_error *he)
{
    srv *s = ctx;
    route_req *r = tp_user(c);
    if (!r) {
        const hp_request *req = tp_request(c);
        r = req_new(s, c, req ? req->path : "-", req ? req->method : "-");
        if (!r) {
            tp_respond(c, he->status, "Content-Type: application/json\r\n", NULL, 0, 1);
            return;
        }
        tp_set_user(c, r);
    }
    if (r->phase == PH_BODY) drop_body(r);
    srv_err e;
    srv_err_set(&e, he->status, he->code, "%s", he->message);
    reply_opts o = {0};
    o.request_id = r->id;
    o.retry_after_s = e.retry_after_s;
    o.close = 1;
    r->status = e.status;
    r->code = e.code;
    r->phase = PH_REPLIED;
    reply_error(c, &e, &o);
}

static void on_done(void *ctx, tp_conn *c, tp_outcome outcome)
{
    (void)ctx;
    route_req *r = tp_user(c);
    double total = sched_now() - r->t0;
    const char *outcome_s = outcome == TP_OK              ? "ok"
                            : outcome == TP_TIMEOUT        ? "timeout"
                            : outcome == TP_CLIENT_ABORT   ? "client_abort"
                            : outcome == TP_SHUTDOWN       ? "shutdown"
                                                           : "error";
    metrics_request(r->ep, r->status, total);
    log_level lv = r->status >= 500 ? LOG_WARN : LOG_INFO;
    if ((svc_log_requests(r->s) || lv == LOG_WARN) && log_enabled(lv)) {
        const char *remote = tp_peer(c);
        if (r->ep == EP_TRANSCRIBE && r->job.sj.batch_size > 0)
            log_msg(lv,
                    "msg=request id=%s method=%s path=%s status=%u code=%s outcome=%s bytes_in=%lld "
                    "frames=%d input=%s audio_s=%.3f audio_ms=%.2f batch=%d queue_ms=%.2f compute_ms=%.2f total_ms=%.2f remote=%s",
                    r->id, r->method, r->path, r->status, r->code ? r->code : "-", outcome_s, r->bytes_in, r->frames,
                    r->n_samples ? "pcm" : "features", r->audio_s,
                    r->prep_ms, r->job.sj.batch_size, (r->job.sj.t_start - r->job.sj.t_submit) * 1e3, r->job.compute_s * 1e3,
                    total * 1e3, remote);
        else
            log_msg(lv,
                    "msg=request id=%s method=%s path=%s status=%u code=%s outcome=%s bytes_in=%lld "
                    "total_ms=%.2f remote=%s",
                    r->id, r->method, r->path, r->status, r->code ? r->code : "-", outcome_s, r->bytes_in, total * 1e3, remote);
    }
    tp_set_user(c, NULL);
    req_free(r);
}

int routes_start(srv *s, char *err, size_t errlen)
{
    static const tp_handlers h = {on_head, on_body, on_body_end, on_resume, on_error, on_done, body_room};
    tp_config tc = {0};
    tc.listen = s->c.listen;
    tc.port = (unsigned)s->c.port;
    tc.threads = (int)s->c.http_threads;
    tc.max_connections = s->c.max_connections;
    tc.max_per_ip = s->c.max_connections_per_ip;
    tc.head_timeout_s = s->c.head_timeout_s;
    tc.idle_timeout_s = s->c.connection_timeout_s;
    tc.body_timeout_s = &s->request_timeout_s; /* server.request_timeout_s, kept current by svc's hook */
    if (!g_prep) {
        /* Audio decoding threads: as many as engine workers (each audio second costs ~1-2 ms of CPU). */
        int n = svc_workers(s); /* every device's */
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

long long routes_max_connections(srv *s) { return s->tp ? tp_max_connections(s->tp) : 0; }

void routes_quiesce(srv *s) { tp_quiesce(s->tp); }

long long routes_connections(srv *s) { return tp_connections(s->tp); }
int routes_http_loops(srv *s) { return tp_loop_count(s->tp); }
long long routes_loop_connections(srv *s, int i) { return tp_loop_connections(s->tp, i); }

void routes_stop(srv *s)
{
    /* First: an audio request still being decoded (a drain that timed out) resumes its connection
     * while the transport still exists; workq_free runs what is queued and joins. */
    workq_free(g_prep);
    g_prep = NULL;
    tp_stop(s->tp);
    s->tp = NULL;
}
