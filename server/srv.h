/* srv.h — the daemon's shared state, owned by main.c and read by the HTTP layer.
 * Thread-safety: the atomics may be read and written from any thread; `engine` and `auth` are
 * swapped under `mu` (SIGHUP) and read by taking a reference (eng_ref) or under `mu`; `c` holds the
 * restart-only settings and is written only before the HTTP daemon starts. */
#ifndef SRV_SRV_H
#define SRV_SRV_H

#include <pthread.h>
#include <stdatomic.h>

#include "auth.h"
#include "cfg.h"
#include "eng.h"
#include "scheduler.h"

struct tp_server;

typedef struct srv {
    cfg c;
    pthread_mutex_t mu;
    eng *engine;  /* current generation; NULL until the first model is loaded */
    auth *auth;   /* NULL: no authentication */
    sched *sched;
    struct tp_server *tp;
    struct strm_service *streams; /* WebSocket streams (streams.c) */
    unsigned port; /* bound port */

    _Atomic int ready;     /* model loaded and warmed up */
    _Atomic int draining;  /* SIGTERM received: new requests get 503 */
    _Atomic long long in_flight;   /* transcription requests between their head and their end */
    _Atomic long long suspended;   /* connections suspended while their batch runs */
    _Atomic long long pending_bytes;
    _Atomic unsigned long long next_id;

    /* Reloadable limits, read by the request handlers. */
    _Atomic long long max_body_bytes, max_json_bytes, max_pending_bytes, request_timeout_s;
    _Atomic long long max_audio_s; /* limits.max_audio_s */
    _Atomic int log_requests;

    _Atomic long long reloads_ok, reloads_failed;
    double t_start_mono, t_start_unix;
    char id_prefix[12];
} srv;

/* The current engine with a reference taken (NULL before the first load). */
eng *srv_engine(srv *s);

#endif
