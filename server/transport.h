/* transport.h — the daemon's HTTP/1.1 transport: listening socket, epoll event loops, non-blocking
 * connections with keep-alive and pipelining, strict request heads and chunked bodies (http_parse.h),
 * deadlines, connection caps and suspend/resume around work done on other threads. It knows nothing
 * about routes: a tp_handlers table (routes.c) is told about each request and answers it.
 *
 * A connection carries one request at a time (pipelined requests wait in its buffer). Per request:
 * on_head (a valid head) -> on_body* (decoded bytes) -> on_body_end -> the handler answers with
 * tp_respond, at once or after tp_suspend ... tp_resume (from any thread) -> on_resume on the loop
 * thread; then on_done once the answer is written or the connection is gone. Problems the transport
 * finds itself (a malformed head, bad chunk framing, a deadline, a connection over the cap) go to
 * on_error, which answers them; the connection is closed after that answer.
 *
 * Deadlines (checked four times a second): a request head must be complete head_timeout_s after its
 * first byte (408); a body must make progress every idle_timeout_s and be complete *body_timeout_s
 * after its head (408); an idle keep-alive connection is closed after idle_timeout_s; an answer the
 * client does not read for idle_timeout_s is abandoned. A suspended request has no deadline.
 *
 * Connections beyond max_connections (or beyond max_per_ip from one address, when > 0) are accepted
 * and wait up to half a second for a slot (nothing is read from them meanwhile); then they are
 * answered 503 (on_error with status 503, code "too_many_connections") and closed. At most a bounded
 * number wait or are being refused at a time; beyond that they are closed at once.
 *
 * Thread-safety: handlers run on the loop thread that owns the connection; tp_resume and
 * tp_connections may be called from any thread; everything else only from the owning loop thread
 * (inside a handler) or, for tp_start/tp_quiesce/tp_stop, from the thread that owns the server. */
#ifndef SRV_TRANSPORT_H
#define SRV_TRANSPORT_H

#include <stdatomic.h>
#include <stddef.h>

#include "http_parse.h"

typedef struct tp_server tp_server;
typedef struct tp_conn tp_conn;

typedef enum {
    TP_OK = 0,          /* the answer was written */
    TP_TIMEOUT,         /* a deadline passed */
    TP_CLIENT_ABORT,    /* the client closed or reset the connection */
    TP_ERROR,           /* the connection failed (write error, out of memory) */
    TP_SHUTDOWN,        /* the server stopped */
} tp_outcome;

typedef struct {
    void (*on_head)(void *ctx, tp_conn *c, const hp_request *req);
    void (*on_body)(void *ctx, tp_conn *c, const char *data, size_t len);
    void (*on_body_end)(void *ctx, tp_conn *c);
    void (*on_resume)(void *ctx, tp_conn *c);
    /* A protocol error, timeout or refused connection, before any answer to this request: answer
     * it (the transport closes the connection after). tp_user(c) may be NULL (no on_head yet). */
    void (*on_error)(void *ctx, tp_conn *c, const hp_error *e);
    /* The request is over; called once for every request whose tp_user was set. */
    void (*on_done)(void *ctx, tp_conn *c, tp_outcome outcome);
    /* Optional: where the next bytes of a Content-Length body may be received directly (no copy
     * through the transport's buffer), with *room bytes free there; NULL: through on_body copies.
     * The transport receives at most min(*room, bytes left) there and then calls on_body with data
     * pointing at them, so the handler sees the same calls (and applies the same caps) either way
     * and only skips its copy when data is its own room. */
    char *(*body_room)(void *ctx, tp_conn *c, size_t *room);
} tp_handlers;

typedef struct {
    const char *listen;       /* IPv4 or IPv6 literal */
    unsigned port;            /* 0: any free port */
    int threads;              /* event loops */
    long long max_connections;
    long long max_per_ip;     /* 0: no per-address cap */
    long long head_timeout_s;
    long long idle_timeout_s;
    _Atomic long long *body_timeout_s; /* reloadable */
} tp_config;

/* Binds, listens and starts the loops; *out gets the server. 0, or -1 with err. */
int tp_start(const tp_config *cfg, const tp_handlers *h, void *ctx, tp_server **out, char *err, size_t errlen);
unsigned tp_port(const tp_server *s);
/* Event loops, and the connections one of them holds (any thread; for /metrics). */
int tp_loop_count(const tp_server *s);
long long tp_loop_connections(tp_server *s, int loop);
/* The connection cap in force (max_connections, lowered if RLIMIT_NOFILE could not be raised). */
long long tp_max_connections(const tp_server *s);
/* Stops accepting (the listening socket is closed); open connections keep being served. */
void tp_quiesce(tp_server *s);
/* Open connections (not counting refused ones being answered 503). */
long long tp_connections(tp_server *s);
/* Stops the loops and closes every connection (on_done with TP_SHUTDOWN); no request may be
 * suspended. Frees s. */
void tp_stop(tp_server *s);

/* ---- inside handlers ---- */

void tp_set_user(tp_conn *c, void *user);
void *tp_user(tp_conn *c);
/* The current request's head (NULL inside on_error for a head that did not parse). */
const hp_request *tp_request(tp_conn *c);
/* "ip:port" of the client ("[v6]:port"). */
const char *tp_peer(tp_conn *c);

/* Answers the current request. extra_headers: complete header lines, each ending in CRLF (may be
 * NULL); body (may be NULL when len is 0) is copied. Content-Length, Connection and Date are added
 * here; a HEAD request gets no body. close: close the connection after this answer. An answer
 * before the whole body was read always closes the connection. Returns 0, or -1 when an answer was
 * already given (or out of memory: the connection is then closed). */
int tp_respond(tp_conn *c, unsigned status, const char *extra_headers, const char *body, size_t len, int close);
/* The handler will answer later, from on_resume after tp_resume. */
void tp_suspend(tp_conn *c);
/* From any thread, exactly once per tp_suspend: on_resume runs on the connection's loop, and may answer
 * or call tp_suspend again (a request with two stages of work off the loop). */
void tp_resume(tp_conn *c);

/* ---- upgraded connections (WebSocket): raw bytes both ways after the 101 answer ----
 * tp_upgrade, from on_head of a request without a body, queues `head` (a complete 101 answer) and
 * turns the connection over to raw handlers: the request ends (on_done with TP_OK), and from then on
 * the transport reads and writes bytes only. Deadlines are the raw side's own (on_sweep), except that
 * output the client does not read for idle_timeout_s closes the connection. Thread-safety: as for
 * requests (loop thread), except tp_kick. */
typedef struct {
    /* Bytes from the client; returns how many were used (the rest is offered again with what comes
     * next, so a partial frame may wait). Not called while reading is paused. */
    size_t (*on_data)(void *user, tp_conn *c, const char *data, size_t len);
    /* After tp_kick (from any thread), on the loop thread. */
    void (*on_kick)(void *user, tp_conn *c);
    /* Four times a second. */
    void (*on_sweep)(void *user, tp_conn *c, double now_mono_s);
    /* The connection is gone (once; TP_OK when the raw side closed it with tp_raw_close). user is not
     * touched by the transport after this. */
    void (*on_close)(void *user, tp_conn *c, tp_outcome outcome);
} tp_raw_handlers;

int tp_upgrade(tp_conn *c, const char *head, size_t len, const tp_raw_handlers *h, void *user);
/* Queues bytes for the client (copied); -1 when out of memory or the connection is closing. */
int tp_raw_send(tp_conn *c, const void *data, size_t len);
/* Bytes queued and not yet written. */
size_t tp_raw_unsent(const tp_conn *c);
/* Stop or resume reading from the client (backpressure). */
void tp_raw_pause_reading(tp_conn *c, int paused);
/* Close after what is queued is written (then on_close with TP_OK). */
void tp_raw_close(tp_conn *c);
/* From any thread: on_kick will run on the connection's loop. The caller must know the connection
 * is still open (on_close has not run): e.g. by holding a lock that on_close also takes. */
void tp_kick(tp_conn *c);

#endif
