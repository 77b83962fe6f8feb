/* streams.h — GET /v1/stream: WebSocket streams (ws.h for the protocol) decoded by a sequence
 * batcher. Each stream belongs to one stream worker for its life; every streaming.tick_ms a worker
 * takes the input that arrived for each of its streams, and advances every stream with a ready chunk
 * in batches (rnnt_runner_advance_streams, one runner per worker and model generation), then sends
 * partial and final results. The protocol is in README.md ("Streaming") and server/openapi.yaml.
 *
 * Threads: the WebSocket side (parsing, handshake, writing) runs on the transport's loop thread
 * that owns the connection; decoding on the stream workers. They meet in a per-stream mutex that
 * guards the input not yet taken and the output not yet written (held only to move buffers).
 * A stream holds a reference to the engine generation it was configured on, so after a SIGHUP it
 * finishes on the model it started with. */
#ifndef SRV_STREAMS_H
#define SRV_STREAMS_H

#include <stddef.h>

#include "srv.h"
#include "transport.h"

/* Starts the stream workers (s->c.stream_workers). 0, or -1 with err. */
int strm_start(srv *s, char *err, size_t errlen);
/* A request for /v1/stream (authenticated already): upgrades it (0, the transport now owns the
 * connection), or returns the HTTP status to answer with *code, *msg (static text) and, for 426,
 * *extra_headers (e.g. Sec-WebSocket-Version). 503: streaming.max_streams are open, draining or
 * not ready (answer with Retry-After). */
unsigned strm_upgrade(srv *s, tp_conn *c, const hp_request *req, const char **code, const char **msg, const char **extra_headers);
/* SIGTERM: every open stream's input ends now; each gets its final result and a close frame (1001).
 * Waits until all are closed or timeout_s passes; returns the streams still open. */
long long strm_drain(srv *s, double timeout_s);
/* Joins the workers and frees what they hold (after routes_stop: no connection is left). */
void strm_stop(srv *s);
/* Open streams right now. */
long long strm_open(srv *s);
/* Streams on the stream workers of device slot d (worker i runs on slot i mod slots). */
long long strm_device_streams(srv *s, int d);
/* The streaming metrics in Prometheus text, appended to buf (malloc'd, *len updated); NULL when
 * out of memory (buf freed). */
char *strm_metrics_append(srv *s, char *buf, size_t *len);

#endif
