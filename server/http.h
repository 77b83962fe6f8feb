/* http.h — the HTTP API on our own transport (transport.h: epoll loops, strict parsing, deadlines):
 *   POST /v1/transcribe   JSON or .npy features -> transcript (batched by the scheduler)
 *   GET  /health, /health/live, /health/ready, /metrics
 * Per-request state is the transport's per-connection user pointer; bodies arrive piecewise and are
 * capped; a connection is suspended while its batch runs and resumed by the worker that finished it.
 * Thread-safety: the handlers run on the transport's loop threads and share only srv's atomics and
 * locks. */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <stddef.h>

#include "srv.h"

/* Binds c.listen:c.port and starts the threads; s->port gets the bound port. */
int http_start(srv *s, char *err, size_t errlen);
/* Stops accepting new connections (closes the listening socket); open ones keep being served. */
void http_quiesce(srv *s);
/* Open connections right now (for metrics). */
long long http_connections(srv *s);
/* The connection cap in force (server.max_connections, or less when RLIMIT_NOFILE allows less). */
long long http_max_connections(srv *s);
/* Stops the daemon; every suspended connection must have been resumed (srv.suspended == 0). */
void http_stop(srv *s);

#endif
