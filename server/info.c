/* info.c — the read-only endpoints of the routes table (routes.c): /health, /health/live,
 * /health/ready, the KServe v2 / Triton names (/v2/health/live, /v2/health/ready, /v2/models/{name},
 * /v2/models/{name}/ready), /metrics and the /captions page. Each builds its answer from one state
 * snapshot of the service (svc_snapshot_get); none reads server state of its own.
 * Thread-safety: each handler runs on the loop thread that owns the request's connection. */
#include <stdlib.h>
#include <string.h>

#include "captions.h"
#include "routes_int.h"
#include "streams.h"

/* model.devices, one object per slot: where it runs, whether it serves, its load and its errors. */
static json_t *devices_json(const svc_snapshot *st)
{
    json_t *a = json_array();
    for (int d = 0; a && d < st->n_devices; d++) {
        const struct svc_device_snapshot *v = &st->devices[d];
        json_t *o = json_pack("{s:i, s:o, s:s, s:s, s:o, s:i, s:i, s:I, s:I, s:I, s:f, s:f, s:f, s:o, s:o}", "index", d,
                              "ordinal", v->ordinal >= 0 ? json_integer(v->ordinal) : json_null(), "name", v->name,
                              "status", v->failed ? "failed" : "ok", "error",
                              v->failed && v->error[0] ? json_string(v->error) : json_null(), "workers", v->workers,
                              "workers_busy", v->busy, "batches", (json_int_t)v->batches, "errors", (json_int_t)v->errors, "streams", (json_int_t)v->streams,
                              "busy_fraction", v->busy_fraction, "busy_seconds", v->busy_s, "running_frames",
                              v->running_frames, "memory_used_bytes",
                              v->mem_used >= 0 ? json_integer(v->mem_used) : json_null(), "memory_total_bytes",
                              v->mem_total >= 0 ? json_integer(v->mem_total) : json_null());
        if (o) json_array_append_new(a, o);
    }
    return a ? a : json_null();
}

static json_t *health_json(const svc_snapshot *st)
{
    metrics_summary m;
    metrics_summarise(&m);
    eng *e = st->engine;
    const char *status = st->draining              ? "draining"
                         : !st->ready                ? "loading"
                         : st->devices_up == 0       ? "unavailable"
                         : st->devices_up < st->n_devices ? "degraded"
                                                     : "ok";
    json_t *model = json_null();
    if (e) {
        const rnnt_model_info *i = eng_info(e);
        model = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:f, s:I}", "name", i->name, "path", eng_path(e), "feature_dim",
                          i->feature_dim, "vocab_size", i->vocab_size, "sample_rate", i->sample_rate, "hop_length",
                          i->hop_length, "frame_shift_s", i->frame_shift_s, "parameters", (json_int_t)i->n_parameters);
    }
    json_t *doc = json_pack("{s:s, s:b, s:s, s:o*, s:s, s:s, s:f, "
                     "s:{s:I, s:I, s:I}, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I}",
                     "status", status, "ready", st->ready && !st->draining && st->devices_up > 0, "version", RNNT_VERSION, "model", model,
                     "backend", e ? eng_backend(e) : "none", "device", e ? eng_device(e) : "none", "uptime_s", st->uptime_s,
                     "requests", "ok", (json_int_t)m.requests_ok, "failed", (json_int_t)m.requests_failed, "in_flight",
                     (json_int_t)st->in_flight, "queue_depth", (json_int_t)st->queue_depth, "workers_busy",
                     (json_int_t)st->workers_busy, "batches", (json_int_t)m.batches, "mean_batch_size",
                     m.batches ? (double)m.batch_items / (double)m.batches : 0.0, "audio_seconds", m.audio_s,
                     "compute_seconds", m.compute_s, "real_time_factor", m.real_time_factor, "max_batch",
                     (json_int_t)(e ? eng_max_batch(e) : 0), "max_frames", (json_int_t)(e ? eng_max_frames(e) : 0));
    if (doc) json_object_set_new(doc, "devices", devices_json(st));
    return doc;
}

static void health(route_req *r)
{
    svc_snapshot st;
    svc_snapshot_get(r->s, &st);
    route_send_json(r, 200, health_json(&st));
    if (st.engine) eng_unref(st.engine);
}

static void live(route_req *r) { route_send_json(r, 200, json_pack("{s:s}", "status", "alive")); }

/* 0 when ready; otherwise the 503 is sent. */
static int ready_or_503(route_req *r)
{
    svc_snapshot st;
    svc_snapshot_get(r->s, &st);
    if (st.engine) eng_unref(st.engine);
    if (st.draining) return route_send_error(r, 503, "shutting_down", "the server is shutting down"), -1;
    if (!st.ready) return route_send_error(r, 503, "not_ready", "the model is still loading"), -1;
    if (st.devices_up == 0 && st.n_devices > 0)
        return route_send_error(r, 503, "unavailable", "every device was taken out of rotation (see /health)"), -1;
    return 0;
}

static void ready(route_req *r)
{
    if (!ready_or_503(r)) route_send_json(r, 200, json_pack("{s:s}", "status", "ready"));
}

static void v2_live(route_req *r) { route_send_json(r, 200, json_pack("{s:b}", "live", 1)); }

static void v2_ready(route_req *r)
{
    if (!ready_or_503(r)) route_send_json(r, 200, json_pack("{s:b}", "ready", 1));
}

/* The loaded generation when its model is named r->param (a reference), else NULL with 404 sent. */
static eng *named_model(route_req *r)
{
    eng *e = svc_engine(r->s);
    if (e && strcmp(r->param, eng_info(e)->name) == 0) return e;
    if (e) eng_unref(e);
    route_send_error(r, 404, "model_not_found", "no model of that name is loaded");
    return NULL;
}

static void v2_model_ready(route_req *r)
{
    eng *e = named_model(r);
    if (!e) return;
    eng_unref(e);
    v2_ready(r);
}

static void v2_model(route_req *r)
{
    eng *e = named_model(r);
    if (!e) return;
    const rnnt_model_info *i = eng_info(e);
    json_t *doc = json_pack("{s:s, s:[s], s:s, s:[{s:s, s:s, s:[i, i]}], s:[{s:s, s:s, s:[i]}]}", "name", i->name, "versions",
                            "1", "platform", "rnntd", "inputs", "name", "features", "datatype", "FP32", "shape", -1,
                            i->feature_dim, "outputs", "name", "text", "datatype", "BYTES", "shape", 1);
    eng_unref(e);
    route_send_json(r, 200, doc);
}

static void v2_unknown(route_req *r)
{
    route_send_error(r, 404, "not_found",
                     "no such endpoint (KServe v2: /v2/health/live, /v2/health/ready, /v2/models/NAME, /v2/models/NAME/ready)");
}

static void captions(route_req *r)
{
    size_t n;
    const char *page = captions_page(&n);
    char *copy = malloc(n);
    if (!copy) {
        route_send_error(r, 500, "internal", "out of memory");
        return;
    }
    memcpy(copy, page, n);
    route_send_text(r, "text/html; charset=utf-8", copy, n);
}

static void metrics(route_req *r)
{
    srv *s = r->s;
    svc_snapshot st;
    svc_snapshot_get(s, &st);
    eng *e = st.engine;
    metrics_gauges g = {0};
    g.ready = st.ready;
    g.draining = st.draining;
    g.in_flight = st.in_flight;
    g.queue_depth = st.queue_depth;
    g.workers_busy = st.workers_busy;
    g.workers = st.workers;
    g.connections = routes_connections(s);
    long long loop_conns[64]; /* server.http_threads is at most 64 */
    g.n_loops = routes_http_loops(s);
    if (g.n_loops > 64) g.n_loops = 64;
    for (int i = 0; i < g.n_loops; i++) loop_conns[i] = routes_loop_connections(s, i);
    g.loop_connections = loop_conns;
    g.pending_bytes = st.pending_bytes;
    g.uptime_s = st.uptime_s;
    g.start_time_s = st.start_time_s;
    g.version = RNNT_VERSION;
    g.model = e ? eng_info(e)->name : "";
    g.backend = e ? eng_backend(e) : "";
    g.device = e ? eng_device(e) : "";
    g.reloads_ok = st.reloads_ok;
    g.reloads_failed = st.reloads_failed;
    struct metrics_device devs[DEV_MAX];
    for (int d = 0; d < st.n_devices; d++) {
        const struct svc_device_snapshot *v = &st.devices[d];
        devs[d] = (struct metrics_device){v->name, v->ordinal, !v->failed, v->workers, v->busy, v->batches, v->errors,
                                          v->mem_used, v->mem_total, v->busy_s, v->busy_fraction, v->running_frames};
    }
    g.n_devices = st.n_devices;
    g.devices = devs;
    size_t len = 0;
    char *text = metrics_render(&g, &len);
    if (text) text = strm_metrics_append(s, text, &len);
    if (e) eng_unref(e);
    if (!text) {
        route_send_error(r, 500, "internal", "out of memory rendering metrics");
        return;
    }
    route_send_text(r, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

void info_serve(route_req *r, info_endpoint which)
{
    static void (*const fn[])(route_req *) = {
        [INFO_HEALTH] = health,         [INFO_LIVE] = live,
        [INFO_READY] = ready,           [INFO_V2_LIVE] = v2_live,
        [INFO_V2_READY] = v2_ready,     [INFO_V2_MODEL] = v2_model,
        [INFO_V2_MODEL_READY] = v2_model_ready, [INFO_V2_UNKNOWN] = v2_unknown,
        [INFO_METRICS] = metrics,       [INFO_CAPTIONS] = captions,
    };
    fn[which](r);
}
