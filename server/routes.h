/* routes.h — layer 2 of the daemon, the routes: one table (routes.c) from method + path, exact or a
 * pattern such as /v2/models/{name}, to a small handler:
 *   POST /v1/transcribe               JSON or .npy features, or audio -> transcript (batched)
 *   POST /v1/audio/transcriptions     OpenAI's form (multipart.h, transcriptions.h) -> transcript
 *   GET  /v1/stream                   WebSocket upgrade (streams.h)
 *   GET  /health, /health/live, /health/ready, /metrics, /captions; KServe v2: /v2/health/{live,ready},
 *        /v2/models/{name}[/ready]   (info.c)
 * Owns: the table, the per-request state (routes_int.h), body intake within the service's limits,
 * suspend/resume around the service, and the audio preparation threads (workq.h, audio_body.h).
 * Layer 1 below is the transport (transport.h: sockets, parsing, deadlines, caps); layer 3 above is
 * the service (svc.h: engine generations, scheduler, limits), the only place routes get state from.
 * Thread-safety: the handlers run on the transport's loop threads; a request's state belongs to its
 * connection's loop thread except while suspended (see routes_int.h). */
#ifndef SRV_ROUTES_H
#define SRV_ROUTES_H

#include <stddef.h>

#include "srv.h"

/* Binds c.listen:c.port and starts the loop and audio threads; s->port gets the bound port. */
int routes_start(srv *s, char *err, size_t errlen);
/* Stops accepting new connections (closes the listening socket); open ones keep being served. */
void routes_quiesce(srv *s);
/* Open connections right now (for metrics). */
long long routes_connections(srv *s);
/* HTTP event loops, and the open connections of loop i (for /metrics: how evenly they are spread). */
int routes_http_loops(srv *s);
long long routes_loop_connections(srv *s, int i);
/* The connection cap in force (server.max_connections, or less when RLIMIT_NOFILE allows less). */
long long routes_max_connections(srv *s);
/* Stops the transport; every suspended connection must have been resumed (svc_drain). */
void routes_stop(srv *s);

#endif
