/* srv.h — the daemon's shared state: one struct, created by main.c, owned field by field as marked.
 * Layer 2 (routes.c) and the stream service use it as a handle for svc_* calls and read nothing in
 * it but `c`'s restart-only keys, `tp` and `streams`.
 * Thread-safety: the atomics may be read and written from any thread; `engine` and `auth` are
 * swapped under `mu` (SIGHUP, svc_reload) and read by taking a reference (svc_engine) or under `mu`;
 * `c` is written by svc_start before any thread starts and by svc_reload (its reloadable keys only,
 * which no other thread reads from `c`: their owners read the hooks' copies below). */
#ifndef SRV_SRV_H
#define SRV_SRV_H

#include <pthread.h>
#include <stdatomic.h>

#include "auth.h"
#include "cfg.h"
#include "devices.h"
#include "scheduler.h"
#include "svc.h"

struct tp_server;

struct srv {
    cfg c;
    pthread_mutex_t mu;
    eng *engine;  /* svc: the current generation; NULL until the first model is loaded */
    auth *auth;   /* svc: NULL means no authentication */
    sched *sched; /* svc */
    struct tp_server *tp;         /* routes.c */
    struct strm_service *streams; /* WebSocket streams (streams.c) */
    unsigned port; /* bound port (routes.c) */

    /* svc: the device slots (model.devices), fixed at svc_start; worker w runs on slot
     * worker_device[w] (slot d has workers d * c.workers ... (d + 1) * c.workers - 1). */
    int n_devs;
    dev_slot devs[DEV_MAX];
    int n_workers; /* c.workers per slot, times n_devs */
    int worker_device[DEV_MAX * 64];

    /* svc: state. */
    _Atomic int ready;     /* model loaded and warmed up */
    _Atomic int draining;  /* SIGTERM received: new requests get 503 */
    _Atomic long long in_flight;   /* transcription requests between their head and their end */
    _Atomic long long suspended;   /* connections suspended while the service holds them */
    _Atomic long long pending_bytes;
    _Atomic unsigned long long next_id;

    /* svc: the reloadable limits, written only by their config hooks (svc.c), read only by svc.c
     * (the upload deadline also by the transport, through tp_config.body_timeout_s). */
    _Atomic long long max_body_bytes, max_json_bytes, max_pending_bytes, request_timeout_s;
    _Atomic long long max_audio_s;
    _Atomic long long drain_timeout_s;
    _Atomic int log_requests;

    _Atomic long long reloads_ok, reloads_failed;
    double t_start_mono, t_start_unix;
    char id_prefix[12];
};

#endif
