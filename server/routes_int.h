/* routes_int.h — what routes.c and the read-only endpoints (info.c) share: the per-request state and
 * the answer helpers. Private to layer 2.
 * Thread-safety: a route_req belongs to the transport loop thread of its connection; a prep or
 * scheduler thread touches only the fields its phase hands over (marked), and only between
 * tp_suspend and tp_resume. */
#ifndef SRV_ROUTES_INT_H
#define SRV_ROUTES_INT_H

#include <stddef.h>

#include "body.h"
#include "metrics.h"
#include "multipart.h"
#include "reply.h"
#include "routes.h"
#include "srv.h"
#include "transcriptions.h"
#include "transport.h"
#include "workq.h"

typedef enum { PH_NEW = 0, PH_BODY, PH_PREP, PH_PREPARED, PH_QUEUED, PH_DONE, PH_REPLIED } req_phase;

#define ROUTE_PARAM_MAX 128

typedef struct route_req {
    eng_job job; /* first member: the scheduler hands &job.sj back */
    srv *s;
    tp_conn *conn;
    const struct route *route; /* NULL: no route matched (404) */
    char param[ROUTE_PARAM_MAX]; /* the {name} of a pattern route */
    metrics_endpoint ep;
    char method[12];
    char path[96];   /* logfmt-quoted */
    char id[72];
    double t0;
    req_ctype ct;
    char *body;
    size_t len, cap, limit;
    const char *limit_key; /* "json" or "body" (limits.max_KEY_bytes) */
    size_t reserved; /* bytes counted by svc_reserve */
    srv_err err;     /* a bad query parameter (body_query_param), or the prep's verdict */
    req_opts opts;
    eng *engine;     /* the generation this request is validated against (reference held) */
    float *features;
    size_t n_samples; /* nonzero: features holds that many PCM samples (eng_pcm.h) */
    req_phase phase; /* PH_DONE is set by the worker before tp_resume, read on the loop after it */
    int counted_suspended; /* counted by svc_suspend_begin until answered or closed */
    int counted_in_flight; /* a transcription: counted by svc_request_begin until it ends */
    srv_err early;   /* an answer decided at the head, given once the (short) body is dropped */
    const char *early_allow;
    unsigned status; /* what was sent; 0 = nothing */
    const char *code;
    long long bytes_in;
    int frames;
    double audio_s;
    /* Audio (PH_PREP on a prep thread, then PH_PREPARED back on the loop). */
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
} route_req;

/* Answers (each marks the request replied). */
int route_send_err(route_req *r, const srv_err *e, const char *allow, int www_auth);
int route_send_error(route_req *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int route_send_json(route_req *r, unsigned status, json_t *doc);
int route_send_text(route_req *r, const char *content_type, char *text, size_t len);

/* The read-only endpoints (info.c), by the routes table's argument. */
typedef enum {
    INFO_HEALTH = 0,
    INFO_LIVE,
    INFO_READY,
    INFO_V2_LIVE,
    INFO_V2_READY,
    INFO_V2_MODEL,       /* r->param: the model's name */
    INFO_V2_MODEL_READY, /* r->param: the model's name */
    INFO_V2_UNKNOWN,
    INFO_METRICS,
    INFO_CAPTIONS,
} info_endpoint;
void info_serve(route_req *r, info_endpoint which);

#endif
