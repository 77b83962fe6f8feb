/* svc.h — layer 3 of the daemon, the service: everything between a parsed request and the engine.
 * It owns
 *   - the engine generations (svc.c): a loaded model plus one warmed-up runner per worker, reference-
 *     counted, built at start and again on SIGHUP while the previous one finishes its requests;
 *   - the scheduler (scheduler.h) and its batch executor (svc_run: a batch on worker i's runner);
 *   - every limit of the request path, each read from the configuration in exactly one place: the
 *     hook the config table names for its key (cfg.h, cfg_apply; the hooks are in svc.c), called
 *     at start and on SIGHUP: body and JSON sizes, audio seconds, bytes held, the upload deadline,
 *     the drain timeout, queue and batching policy, logging.
 *     batching.max_batch and limits.max_frames are read once per generation, into its runners'
 *     parameters (rnnt_runner_params), and nowhere else; RNNT_MAX_BATCH (rnnt.h) is their one cap;
 *   - admission (draining, not ready, bearer token), the counters of requests and bytes in flight,
 *     and the state snapshot that health and metrics answers are built from (svc_snapshot).
 * Layer 2 (routes.c, info.c) calls only svc_* and eng_* getters; it reads no server atomics of its own.
 * The stream service (streams.h) takes generations the same way (svc_engine) and reads its own
 * restart-only streaming.* keys once, at strm_start.
 *
 * Thread-safety: every function may be called from any thread unless it says otherwise. The current
 * generation and the token are swapped under srv.mu (svc_reload on the main thread) and read by
 * taking a reference (svc_engine) or under srv.mu; the limits are atomics; runner i of a generation
 * is used only by scheduler worker i (svc_run), so no runner is ever used by two threads. */
#ifndef SRV_SVC_H
#define SRV_SVC_H

#include <stddef.h>

#include "audio_body.h"
#include "cfg.h"
#include "devices.h"
#include "reply.h"
#include "rnnt.h"
#include "scheduler.h"

typedef struct srv srv; /* the daemon's shared state (srv.h) */
typedef struct eng eng; /* one engine generation */

/* ---- engine generations ---- */

/* What a request hands the engine; sj must stay the first member (svc_run casts). */
typedef struct {
    sched_job sj;
    const float *features; /* frames x feature_dim; or n_samples PCM samples (eng_pcm.h) */
    int frames;
    size_t n_samples;      /* nonzero: features holds PCM at the model's rate */
    rnnt_result result;    /* filled when status == RNNT_OK */
    rnnt_status status;    /* RNNT_OK, a per-utterance RNNT_ERR_NUMERIC, or the batch's error */
    char err[256];         /* the batch's error as the engine wrote it (svc_run's buffer), or the job's own */
    double compute_s;      /* engine time of its batch */
} eng_job;

/* Loads c->model_path and creates per_slot runners on each of the n_slots device slots (c->backend,
 * the slot's ordinal, precision, max_batch, max_frames, cpu_threads), each warmed up with one decode
 * of a dummy input. A slot whose runners cannot be built or warmed up is left without runners
 * (eng_slot_ok 0, eng_slot_error says why); with no slot built it fails. */
int eng_create(const cfg *c, const dev_slot *slots, int n_slots, int per_slot, eng **out, char *err, size_t errlen);
int eng_slot_ok(const eng *e, int slot);
const char *eng_slot_error(const eng *e, int slot);
const char *eng_slot_device(const eng *e, int slot); /* the runners' device name, "" without runners */
eng *eng_ref(eng *e);
void eng_unref(eng *e);

const rnnt_model *eng_model(const eng *e);
const rnnt_model_info *eng_info(const eng *e);
const char *eng_backend(const eng *e);
const char *eng_device(const eng *e);
/* The parameters the generation's runners were made with (device, precision...), for runners made
 * elsewhere (the stream workers'). */
const rnnt_runner_params *eng_runner_params(const eng *e);
const char *eng_path(const eng *e);
int eng_max_batch(const eng *e);  /* the runners' max_batch (batching.max_batch when built) */
int eng_max_frames(const eng *e); /* the runners' max_frames (limits.max_frames when built) */
double eng_warmup_s(const eng *e);

/* The current generation with a reference taken (NULL before the first load). */
eng *svc_engine(srv *s);
/* Engine workers in all (batching.workers per device slot). */
int svc_workers(srv *s);
/* Device slots, and the CUDA ordinal of slot d (-1 on the CPU); 1 when slot d is out of rotation. */
int svc_devices(srv *s);
int svc_device_ordinal(srv *s, int d);
int svc_device_failed(srv *s, int d);

/* ---- lifecycle (main thread) ---- */

/* Fills the automatic values (0) of batching.workers and model.cpu_threads for the backend c will
 * get. A running daemon keeps its worker count (workers_running > 0). */
void svc_resolve_auto(cfg *c, long long workers_running);
/* Reads server.auth_token_file (NULL when unset). 0, or -1 with err. */
struct auth;
int svc_load_auth(const cfg *c, struct auth **out, char *err, size_t errlen);
/* Takes c (already resolved) as the running configuration, applies every key, starts the scheduler.
 * 0, or -1 with err. */
int svc_start(srv *s, const cfg *c, struct auth *a, char *err, size_t errlen);
/* Builds the first generation and marks the daemon ready. 0, or -1 with err. */
int svc_load(srv *s, char *err, size_t errlen);
/* SIGHUP: nc (not yet resolved) becomes the running configuration: a new token and generation are
 * built while the old ones serve, then swapped; the reloadable keys are applied through their hooks;
 * restart-only keys keep their running values (logged). A failure keeps everything as it was. */
void svc_reload(srv *s, cfg *nc, int config_ok, const char *config_err);
/* SIGTERM, step 1: new requests get 503 from now on. */
void svc_drain_begin(srv *s);
/* Step 2 (after the listener is closed): answer what was accepted within server.drain_timeout_s,
 * cancel the rest, wait for running batches and for the connections they resume. */
void svc_drain(srv *s);
/* Stops the scheduler and frees the generation and token (after the transport has stopped). */
void svc_stop(srv *s);

/* ---- requests (any thread; routes.c) ---- */

/* A transcription request begins (counted in flight) / ends. */
void svc_request_begin(srv *s);
void svc_request_end(srv *s);
/* A connection waits suspended for the service (prep or batch) / is resumed. */
void svc_suspend_begin(srv *s);
void svc_suspend_end(srv *s);
/* 0 when the bearer token (the Authorization header, NULL when absent) is accepted. */
int svc_authorised(srv *s, const char *authorization);
/* Admission at a request's head: 0, or -1 with e set (503 shutting_down or not_ready). */
int svc_admit(srv *s, srv_err *e);
/* The largest body a request may send: limits.max_json_bytes for JSON (when smaller), else
 * limits.max_body_bytes; *key names the limit for messages ("json" or "body"). */
size_t svc_body_limit(srv *s, int json, const char **key);
/* limits.max_pending_bytes: reserves n more bytes for a request that holds *held (0, or -1 with e
 * set: 503 overloaded); releases n of them (all when n > *held). */
int svc_reserve(srv *s, size_t *held, size_t n, srv_err *e);
void svc_release(srv *s, size_t *held, size_t n);
/* The limits an audio body is decoded under for generation e. */
audio_body_limits svc_audio_limits(srv *s, const eng *e);
/* 1 once SIGTERM began the drain (answers then close their connections). */
int svc_draining(srv *s);
/* 1 when every request gets a log line (log.requests). */
int svc_log_requests(srv *s);
/* A new request id: "PREFIX-N" (the X-Request-Id header is taken when valid, by routes.c). */
void svc_request_id(srv *s, char *out, size_t n);

/* Queues j (features and frames set, validated against generation e) for decoding: its group and
 * batch cap come from e. done(j, user) runs on a worker thread once the batch ran or was cancelled;
 * it may run before svc_submit returns, so the caller suspends its connection first. 0, or -1 with
 * e set (503 queue_full / shutting_down / unavailable with their Retry-After, 500). */
int svc_submit(srv *s, eng *e, eng_job *j, void (*done)(sched_job *, void *), void *user, srv_err *err);
/* After done(): 0 with the transcription counted (audio_s, bytes_in for the metrics), or -1 with e
 * set from the job's outcome (503 cancelled at shutdown or out of memory, 422 numeric, 500). */
int svc_finish(srv *s, const eng_job *j, double audio_s, long long bytes_in, const char *request_id, srv_err *e);

/* What health and metrics answers show; engine is a reference (eng_unref it), or NULL. */
typedef struct {
    int ready, draining;
    long long in_flight, queue_depth, workers_busy, workers, pending_bytes;
    long long reloads_ok, reloads_failed;
    double uptime_s, start_time_s;
    eng *engine;
    int n_devices, devices_up;
    struct svc_device_snapshot {
        int ordinal;              /* CUDA ordinal, -1 on the CPU */
        int failed;               /* out of rotation */
        int workers, busy;        /* its workers, those running a batch */
        long long batches, errors; /* batches run, batches that ended in a device error */
        long long streams;        /* WebSocket streams on its stream workers */
        long long mem_used, mem_total; /* bytes, -1 when not known (CPU) */
        double busy_s, busy_fraction, running_frames;
        char name[96];            /* the device's name ("" when its runners did not build) */
        char error[256];          /* why it left rotation */
    } devices[DEV_MAX];
} svc_snapshot;
void svc_snapshot_get(srv *s, svc_snapshot *out);

/* ---- the batch executor (scheduler workers) ---- */

/* The sched_exec run function (ctx: the srv): group is the generation the jobs were validated
 * against; runs on worker's runner, on its device slot; a device error counts towards the slot's
 * failure (devices.h) and sends the jobs to another device when one is in rotation. */
void svc_run(void *ctx, int worker, const void *group, sched_job **jobs, int n);
/* The sched_exec abandon hook: a job of a batch past batching.worker_deadline_s fails (500). */
void svc_abandon(void *ctx, sched_job *j, double ran_s);
/* Ends the hangs of RNNTD_FAULT=worker_hang (at shutdown, so a test daemon exits cleanly). */
void svc_release_hangs(void);

#endif
