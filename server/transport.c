/* transport.c — epoll event loops, connections and their deadlines (see transport.h).
 *
 * Each loop owns an epoll set, an eventfd (resumes and commands from other threads) and the
 * connections it accepted; the listening socket sits in every loop's set with EPOLLEXCLUSIVE, so a
 * new connection wakes one loop, which accepts it and hands it to the loop with the fewest connections
 * (itself on a tie), which keeps it for its life: clients that connect in a burst (a load tool's 128
 * at once) would otherwise all land on the one loop that woke first. Level-triggered: a
 * connection is read once per wake-up, so a fast client cannot starve the others. A connection in
 * the middle of an epoll batch may be closed by another event of the same batch; closed connections
 * are therefore freed only after the batch. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TP_RBUF 16384                 /* first read buffer; grows for a long head */
#define TP_RBUF_MAX (HP_MAX_HEAD * 2) /* a head over HP_MAX_HEAD is refused before this fills */
#define TP_LINGER_S 2.0               /* after a closing answer: read and drop what still comes */
#define TP_LINGER_BYTES (1 << 20)
#define TP_SWEEP_S 0.25
#define TP_ACCEPT_BATCH 64
#define TP_MAX_EVENTS 256
#define TP_ACCEPT_PAUSE_S 0.1 /* out of file descriptors: stop accepting this long */
#define TP_IP_BUCKETS 4096
#define TP_FD_RESERVE 64      /* descriptors kept for everything but connections */
#define TP_SLOT_WAIT_S 0.5    /* a connection over the cap waits this long for a slot, then 503 */
/* A Content-Length body is received straight into the handler's buffer (tp_handlers.body_room), up
 * to this much per wake-up (other connections of the loop wait at most that long): a 320 KB upload
 * then takes one or two wake-ups instead of one per TP_RBUF bytes, and no copy through rbuf. */
#define TP_BODY_WAKE_MAX (4u << 20)

typedef enum { C_HEAD = 0, C_BODY, C_HANDLER, C_SUSPENDED, C_WRITE, C_LINGER, C_WAITSLOT, C_RAW, C_CLOSED } conn_state;

typedef struct tp_loop tp_loop;

struct tp_conn {
    tp_loop *loop;
    tp_conn *prev, *next; /* the loop's connections (or its dead list) */
    tp_conn *rnext;       /* the loop's resume queue */
    int fd;
    conn_state st;
    unsigned events;      /* registered epoll events */
    int registered;
    int overflow;         /* over a cap: answered 503 and closed */
    int ip_counted;
    unsigned char addr[16];
    char peer[56];
    /* read buffer: bytes [roff, rlen) not yet consumed */
    char *rbuf;
    size_t rcap, rlen, roff;
    hp_scan scan;
    /* the current request */
    char *head;
    hp_request *req;
    void *user;
    int responded, suspended, close_after, body_done;
    unsigned long long body_left;
    hp_chunked ck;
    double t_last; /* last progress (bytes read or written, accept, end of the last answer) */
    double t_req;  /* first byte of this request; 0: none yet */
    double t_body; /* head complete */
    double t_linger;
    size_t lingered;
    /* the answer being written */
    char *wbuf;
    size_t wlen, woff;
    /* upgraded (C_RAW): raw handlers, their user, output buffer capacity, flags */
    const tp_raw_handlers *raw;
    void *raw_user;
    size_t wcap;
    int raw_paused, raw_closing;
    int kicked;           /* on the loop's kick list */
    tp_conn *knext;
};

struct tp_loop {
    tp_server *s;
    int idx, epfd, evfd;
    pthread_t th;
    int started;
    pthread_mutex_t mu; /* guards resumed, kicked, adopt and adopt_closed */
    tp_conn *resumed;
    tp_conn *kicked;
    tp_conn *adopt;       /* accepted by another loop, handed to this one (linked by rnext) */
    int adopt_closed;     /* this loop has stopped: nothing more is handed to it */
    _Atomic int n_conns;  /* connections in conns (read by the other loops' accepts) */
    tp_conn *conns, *dead;
    int listen_registered;
    double accept_paused_until;
    _Atomic int quiesced;
    char tag_listen, tag_ev; /* their addresses mark the listening socket and the eventfd */
};

typedef struct ip_node {
    struct ip_node *next;
    unsigned char a[16];
    long long n;
} ip_node;

struct tp_server {
    tp_config cfg;
    tp_handlers h;
    void *ctx;
    int lfd;
    unsigned port;
    int n_loops;
    tp_loop *loops;
    _Atomic int loops_ready; /* every loop set up and started: accepts may hand connections over */
    _Atomic int stopping, listening;
    _Atomic long long open, overflow;
    long long max_conn, max_overflow;
    int body_direct; /* receive bodies into body_room (RNNTD_TP_DIRECT=0: through rbuf, 16 KiB a wake-up) */
    int balance;     /* hand accepted connections to the least-loaded loop (RNNTD_TP_BALANCE=0: keep them) */
    pthread_mutex_t ip_mu;
    ip_node *ip_tab[TP_IP_BUCKETS];
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- per-address counts ---- */

static unsigned ip_hash(const unsigned char *a)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++) h = (h ^ a[i]) * 16777619u;
    return h % TP_IP_BUCKETS;
}

/* The count for a after adding one; -1 when out of memory. */
static long long ip_acquire(tp_server *s, const unsigned char *a)
{
    pthread_mutex_lock(&s->ip_mu);
    ip_node **b = &s->ip_tab[ip_hash(a)], *n = *b;
    while (n && memcmp(n->a, a, 16)) n = n->next;
    if (!n && (n = calloc(1, sizeof *n))) {
        memcpy(n->a, a, 16);
        n->next = *b;
        *b = n;
    }
    long long v = n ? ++n->n : -1;
    pthread_mutex_unlock(&s->ip_mu);
    return v;
}

static void ip_release(tp_server *s, const unsigned char *a)
{
    pthread_mutex_lock(&s->ip_mu);
    ip_node **p = &s->ip_tab[ip_hash(a)];
    while (*p && memcmp((*p)->a, a, 16)) p = &(*p)->next;
    if (*p && --(*p)->n == 0) {
        ip_node *dead = *p;
        *p = dead->next;
        free(dead);
    }
    pthread_mutex_unlock(&s->ip_mu);
}

/* ---- connection plumbing ---- */

static void set_events(tp_conn *c, unsigned want)
{
    if (c->st == C_CLOSED) return;
    if (c->registered && want == c->events) return;
    struct epoll_event ev = {.events = want, .data.ptr = c};
    if (!c->registered) {
        if (!want) return;
        if (epoll_ctl(c->loop->epfd, EPOLL_CTL_ADD, c->fd, &ev) == 0) c->registered = 1;
    } else {
        epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    }
    c->events = want;
}

static void free_request(tp_conn *c)
{
    free(c->head);
    free(c->req);
    c->head = NULL;
    c->req = NULL;
    free(c->wbuf);
    c->wbuf = NULL;
    c->wlen = c->woff = c->wcap = 0;
}

static void begin_request(tp_conn *c)
{
    free_request(c);
    hp_scan_init(&c->scan);
    c->responded = c->suspended = c->close_after = c->body_done = 0;
    c->body_left = 0;
    c->t_req = 0;
    c->st = C_HEAD;
}

/* The request is over: the handler frees its state. */
static void end_request(tp_conn *c, tp_outcome outcome)
{
    if (c->raw) {
        const tp_raw_handlers *h = c->raw;
        c->raw = NULL;
        h->on_close(c->raw_user, c, outcome);
        c->raw_user = NULL;
        return;
    }
    if (c->user) {
        c->loop->s->h.on_done(c->loop->s->ctx, c, outcome);
        c->user = NULL;
    }
}

static void list_remove(tp_conn **head, tp_conn *c)
{
    if (c->prev) c->prev->next = c->next;
    else *head = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void list_push(tp_conn **head, tp_conn *c)
{
    c->prev = NULL;
    c->next = *head;
    if (*head) (*head)->prev = c;
    *head = c;
}

/* The loop's own connections, counted for the accepts' balance. */
static void conns_push(tp_loop *L, tp_conn *c)
{
    list_push(&L->conns, c);
    atomic_fetch_add(&L->n_conns, 1);
}

static void conns_remove(tp_loop *L, tp_conn *c)
{
    list_remove(&L->conns, c);
    atomic_fetch_sub(&L->n_conns, 1);
}

/* Closes the socket now; the memory goes after the current epoll batch. */
static void conn_free(tp_conn *c)
{
    tp_loop *L = c->loop;
    tp_server *s = L->s;
    if (c->st == C_CLOSED) return;
    close(c->fd);
    c->st = C_CLOSED;
    if (c->overflow) atomic_fetch_sub(&s->overflow, 1);
    else atomic_fetch_sub(&s->open, 1);
    if (c->ip_counted) ip_release(s, c->addr);
    conns_remove(L, c);
    list_push(&L->dead, c);
}

static void conn_destroy(tp_conn *c)
{
    free_request(c);
    free(c->rbuf);
    free(c);
}

static void conn_close(tp_conn *c, tp_outcome outcome)
{
    if (c->st == C_CLOSED) return;
    end_request(c, outcome);
    conn_free(c);
}

/* Writes what is queued: 1 all written, 0 the socket is full, -1 failed. */
static int flush(tp_conn *c)
{
    while (c->woff < c->wlen) {
        ssize_t n = send(c->fd, c->wbuf + c->woff, c->wlen - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (size_t)n;
            c->t_last = now_s();
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return 0;
        } else {
            return -1;
        }
    }
    free(c->wbuf);
    c->wbuf = NULL;
    c->wlen = c->woff = 0;
    return 1;
}

/* An error found by the transport: the handler answers it; the connection closes after.
 * Returns 0, or -1 when the connection was closed (c must not be used). */
static int fail_request(tp_conn *c, const hp_error *e)
{
    tp_server *s = c->loop->s;
    if (c->responded) {
        conn_close(c, TP_ERROR);
        return -1;
    }
    c->close_after = 1;
    s->h.on_error(s->ctx, c, e);
    if (!c->responded) {
        conn_close(c, TP_ERROR);
        return -1;
    }
    return 0;
}

static int body_data(void *user, const char *data, size_t len)
{
    tp_conn *c = user;
    if (!c->responded && len) c->loop->s->h.on_body(c->loop->s->ctx, c, data, len);
    return c->responded;
}

static void after_write(tp_conn *c);
static void refuse_over_cap(tp_conn *c);

/* Half-closes and reads what the client still sends, so that what was written is not destroyed by a
 * reset (closing with unread input sends RST). */
static void begin_linger(tp_conn *c)
{
    free_request(c);
    shutdown(c->fd, SHUT_WR);
    c->st = C_LINGER;
    c->t_linger = now_s();
    c->rlen = c->roff = 0;
}

/* An upgraded connection: write what is queued, offer what was read, choose the events. */
static void raw_process(tp_conn *c)
{
    if (c->woff < c->wlen) {
        int r = flush(c);
        if (r < 0) {
            conn_close(c, TP_CLIENT_ABORT);
            return;
        }
    }
    if (c->raw && !c->raw_paused && !c->raw_closing && c->roff < c->rlen) {
        size_t used = c->raw->on_data(c->raw_user, c, c->rbuf + c->roff, c->rlen - c->roff);
        if (c->st != C_RAW) return;
        c->roff += used;
        if (c->roff == c->rlen) c->roff = c->rlen = 0;
        if (c->woff < c->wlen && flush(c) < 0) {
            conn_close(c, TP_CLIENT_ABORT);
            return;
        }
    }
    if (c->raw_closing && c->woff == c->wlen) {
        end_request(c, TP_OK);
        begin_linger(c);
        set_events(c, EPOLLIN);
        return;
    }
    unsigned ev = (c->raw_paused || c->raw_closing) ? 0 : EPOLLIN;
    if (c->woff < c->wlen) ev |= EPOLLOUT;
    set_events(c, ev);
}

/* Runs the connection's state machine over what is buffered until it needs the socket again. */
static void process(tp_conn *c)
{
    tp_server *s = c->loop->s;
    for (;;) {
        switch (c->st) {
        case C_HEAD: {
            size_t avail = c->rlen - c->roff;
            if (avail == 0) {
                /* Nothing buffered: an idle connection holds no buffer. */
                free(c->rbuf);
                c->rbuf = NULL;
                c->rcap = c->rlen = c->roff = 0;
                set_events(c, EPOLLIN);
                return;
            }
            if (c->t_req == 0) c->t_req = now_s();
            size_t hl = 0;
            hp_error e;
            hp_status st = hp_scan_head(&c->scan, c->rbuf + c->roff, avail, &hl, &e);
            if (st == HP_INCOMPLETE) {
                set_events(c, EPOLLIN);
                return;
            }
            if (st == HP_ERROR) {
                if (fail_request(c, &e)) return;
                continue;
            }
            c->head = malloc(hl);
            c->req = malloc(sizeof *c->req);
            if (!c->head || !c->req) {
                conn_close(c, TP_ERROR);
                return;
            }
            memcpy(c->head, c->rbuf + c->roff, hl);
            c->roff += hl;
            if (hp_parse_head(c->head, hl, c->req, &e)) {
                free(c->req);
                c->req = NULL;
                if (fail_request(c, &e)) return;
                continue;
            }
            c->st = C_BODY;
            c->t_body = now_s();
            c->body_left = c->req->has_length ? c->req->content_length : 0;
            c->body_done = !c->req->chunked && c->body_left == 0;
            hp_chunked_init(&c->ck);
            s->h.on_head(s->ctx, c, c->req);
            if (c->st != C_BODY) continue;
            if (!c->body_done && c->req->expect_continue && c->rlen == c->roff) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                /* 25 bytes into an empty socket buffer; if even that does not fit, give up. */
                if (send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(sizeof cont - 1)) {
                    conn_close(c, TP_CLIENT_ABORT);
                    return;
                }
            }
            continue;
        }
        case C_BODY: {
            if (c->body_done) {
                c->st = C_HANDLER;
                s->h.on_body_end(s->ctx, c);
                if (c->st == C_HANDLER) {
                    if (!c->suspended) {
                        conn_close(c, TP_ERROR); /* the handler neither answered nor suspended */
                        return;
                    }
                    c->st = C_SUSPENDED;
                }
                continue;
            }
            size_t avail = c->rlen - c->roff;
            if (avail == 0) {
                set_events(c, EPOLLIN);
                return;
            }
            if (c->req->chunked) {
                size_t used = 0;
                hp_error e;
                hp_status st = hp_chunked_feed(&c->ck, c->rbuf + c->roff, avail, &used, body_data, c, &e);
                c->roff += used;
                if (st == HP_ERROR) {
                    if (fail_request(c, &e)) return;
                    continue;
                }
                if (st == HP_COMPLETE) c->body_done = 1;
            } else {
                size_t n = avail;
                if ((unsigned long long)n > c->body_left) n = (size_t)c->body_left;
                c->roff += n;
                c->body_left -= n;
                if (c->body_left == 0) c->body_done = 1;
                body_data(c, c->rbuf + c->roff - n, n);
            }
            continue;
        }
        case C_WRITE: {
            int r = flush(c);
            if (r < 0) {
                conn_close(c, TP_CLIENT_ABORT);
                return;
            }
            if (r == 0) {
                set_events(c, EPOLLOUT);
                return;
            }
            after_write(c);
            continue;
        }
        case C_RAW:
            raw_process(c);
            return;
        case C_LINGER:
            set_events(c, EPOLLIN);
            return;
        case C_SUSPENDED:
            set_events(c, 0);
            return;
        default:
            return;
        }
    }
}

static void after_write(tp_conn *c)
{
    int close_it = c->close_after;
    end_request(c, TP_OK);
    if (close_it || atomic_load(&c->loop->s->stopping)) {
        begin_linger(c);
        return;
    }
    begin_request(c);
    c->t_last = now_s();
}

/* A Content-Length body with nothing of it buffered: receives it directly into the handler's room
 * (never past the body, so a pipelined request stays in the socket). 0 when this path does not
 * apply (the caller reads into rbuf as usual), 1 when it handled the wake-up. */
static int read_body_direct(tp_conn *c)
{
    tp_server *s = c->loop->s;
    if (!s->body_direct || !s->h.body_room || c->st != C_BODY || !c->req || c->req->chunked || c->body_done ||
        c->responded || c->body_left == 0 || c->roff != c->rlen)
        return 0;
    size_t room = 0, got = 0;
    char *dst = s->h.body_room(s->ctx, c, &room);
    if (!dst || room == 0) return 0;
    for (;;) {
        size_t want = (unsigned long long)room < c->body_left ? room : (size_t)c->body_left;
        ssize_t n = recv(c->fd, dst, want, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            if (got) break; /* the end or the reset is seen again on the next wake-up */
            conn_close(c, TP_CLIENT_ABORT);
            return 1;
        }
        c->t_last = now_s();
        c->body_left -= (unsigned long long)n;
        if (c->body_left == 0) c->body_done = 1;
        got += (size_t)n;
        body_data(c, dst, (size_t)n);
        if (c->body_done || c->responded || c->st != C_BODY || (size_t)n < want || got >= TP_BODY_WAKE_MAX) break;
        dst = s->h.body_room(s->ctx, c, &room);
        if (!dst || room == 0) break;
    }
    process(c);
    return 1;
}

static void on_readable(tp_conn *c)
{
    if (c->st == C_LINGER) {
        char buf[16384];
        ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n > 0) {
            c->lingered += (size_t)n;
            if (c->lingered > TP_LINGER_BYTES) conn_free(c);
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            conn_free(c);
        }
        return;
    }
    if (c->st != C_HEAD && c->st != C_BODY && c->st != C_RAW) {
        process(c);
        return;
    }
    if (c->st == C_RAW && (c->raw_paused || c->raw_closing)) {
        raw_process(c);
        return;
    }
    if (c->st == C_BODY && read_body_direct(c)) return;
    if (c->roff == c->rlen) c->roff = c->rlen = 0;
    if (c->rlen == c->rcap) {
        if (c->roff > 0) {
            memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
            c->rlen -= c->roff;
            c->roff = 0;
        } else {
            size_t nc = c->rcap ? c->rcap * 2 : TP_RBUF;
            char *nb = nc <= TP_RBUF_MAX ? realloc(c->rbuf, nc) : NULL;
            if (!nb) {
                conn_close(c, TP_ERROR);
                return;
            }
            c->rbuf = nb;
            c->rcap = nc;
        }
    }
    ssize_t n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
    if (n > 0) {
        c->rlen += (size_t)n;
        c->t_last = now_s();
        process(c);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    /* End of input or a reset: a client that stops between requests or in the middle of one. */
    conn_close(c, TP_CLIENT_ABORT);
}

static void conn_event(tp_conn *c, unsigned ev)
{
    if (c->st == C_CLOSED) return;
    if (c->st == C_WAITSLOT) {
        /* The client half-closed or went away while waiting for a slot: answer now. */
        refuse_over_cap(c);
        return;
    }
    if (c->st == C_SUSPENDED || c->st == C_HANDLER) {
        /* Gone while its work runs: stop listening to it (the hang-up would fire on and on); the
         * answer will fail to write after the resume, and that closes it. */
        if (ev & (EPOLLHUP | EPOLLERR)) {
            epoll_ctl(c->loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
            c->registered = 0;
            c->events = 0;
        }
        return;
    }
    if (c->st == C_RAW) {
        if (ev & EPOLLOUT) raw_process(c);
        if (c->st == C_RAW && (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
            if (!c->raw_paused && !c->raw_closing) on_readable(c);
            else if (ev & (EPOLLHUP | EPOLLERR)) conn_close(c, TP_CLIENT_ABORT);
        }
        return;
    }
    if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && (c->st == C_HEAD || c->st == C_BODY || c->st == C_LINGER))
        on_readable(c);
    else if ((ev & EPOLLOUT) && c->st == C_WRITE)
        process(c);
    else if (ev & (EPOLLHUP | EPOLLERR))
        conn_close(c, TP_CLIENT_ABORT);
}

/* ---- accepting ---- */

static void format_peer(tp_conn *c, const struct sockaddr_storage *ss)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
        memset(c->addr, 0, 10);
        c->addr[10] = c->addr[11] = 0xff; /* v4-mapped */
        memcpy(c->addr + 12, &a->sin_addr, 4);
        snprintf(c->peer, sizeof c->peer, "%s:%u", host, port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
        memcpy(c->addr, &a->sin6_addr, 16);
        snprintf(c->peer, sizeof c->peer, "[%s]:%u", host, port);
    } else {
        snprintf(c->peer, sizeof c->peer, "-");
    }
}

/* Counts c in the open connections (and its address), if the caps allow: 1, else 0. */
static int take_slot(tp_server *s, tp_conn *c)
{
    if (atomic_fetch_add(&s->open, 1) + 1 > s->max_conn) {
        atomic_fetch_sub(&s->open, 1);
        return 0;
    }
    if (s->cfg.max_per_ip > 0) {
        long long n = ip_acquire(s, c->addr);
        if (n < 0 || n > s->cfg.max_per_ip) {
            if (n > 0) ip_release(s, c->addr);
            atomic_fetch_sub(&s->open, 1);
            return 0;
        }
        c->ip_counted = 1;
    }
    return 1;
}

static void refuse_over_cap(tp_conn *c)
{
    hp_error e = {503, "too_many_connections",
                  "too many open connections (server.max_connections or server.max_connections_per_ip); retry"};
    if (fail_request(c, &e) == 0) process(c);
}

static int hand_off(tp_loop *L, tp_conn *c);
static void wake(tp_loop *L);

static void accept_some(tp_loop *L)
{
    tp_server *s = L->s;
    for (int k = 0; k < TP_ACCEPT_BATCH && atomic_load(&s->listening); k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors: the listening socket would wake us without end. */
                epoll_ctl(L->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
                L->listen_registered = 0;
                L->accept_paused_until = now_s() + TP_ACCEPT_PAUSE_S;
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        tp_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->loop = L;
        c->fd = fd;
        format_peer(c, &ss);
        c->t_last = now_s();
        begin_request(c);
        if (!take_slot(s, c)) {
            if (atomic_fetch_add(&s->overflow, 1) + 1 > s->max_overflow) {
                atomic_fetch_sub(&s->overflow, 1);
                close(fd);
                free(c);
                continue;
            }
            /* Over the cap: wait a moment for a slot (a client that just closed others may not have
             * been seen closing yet), read nothing meanwhile; the sweep promotes it or answers 503. */
            c->overflow = 1;
            c->st = C_WAITSLOT;
        }
        if (c->st != C_WAITSLOT && hand_off(L, c)) continue;
        conns_push(L, c);
        set_events(c, c->st == C_WAITSLOT ? EPOLLRDHUP : EPOLLIN);
        if (!c->registered) conn_free(c);
    }
}

/* A connection L accepted goes to the loop with the fewest connections, when that is another one
 * (ties: L keeps it): 1 when handed (that loop registers it in run_resumed), 0 when L keeps it. */
static int hand_off(tp_loop *L, tp_conn *c)
{
    tp_server *s = L->s;
    if (!s->balance || s->n_loops < 2 || !atomic_load(&s->loops_ready) || atomic_load(&s->stopping)) return 0;
    tp_loop *to = L;
    int least = atomic_load(&L->n_conns);
    for (int i = 0; i < s->n_loops; i++) {
        tp_loop *o = &s->loops[i];
        int n = atomic_load(&o->n_conns);
        if (n < least) {
            least = n;
            to = o;
        }
    }
    if (to == L) return 0;
    pthread_mutex_lock(&to->mu);
    int open = !to->adopt_closed;
    if (open) {
        c->loop = to;
        c->rnext = to->adopt;
        to->adopt = c;
        atomic_fetch_add(&to->n_conns, 1); /* counted now, so the next accepts see it */
    }
    pthread_mutex_unlock(&to->mu);
    if (open) wake(to);
    return open;
}

/* Connections other loops accepted for this one: registered here (counted by hand_off). */
static void adopt_handed(tp_loop *L)
{
    pthread_mutex_lock(&L->mu);
    tp_conn *list = L->adopt;
    L->adopt = NULL;
    pthread_mutex_unlock(&L->mu);
    while (list) {
        tp_conn *c = list;
        list = c->rnext;
        c->rnext = NULL;
        list_push(&L->conns, c);
        c->t_last = now_s();
        set_events(c, EPOLLIN);
        if (!c->registered) conn_free(c);
    }
}

/* ---- the loop ---- */

static void run_resumed(tp_loop *L)
{
    uint64_t v;
    ssize_t r = read(L->evfd, &v, sizeof v);
    (void)r;
    adopt_handed(L);
    pthread_mutex_lock(&L->mu);
    tp_conn *list = L->resumed;
    L->resumed = NULL;
    pthread_mutex_unlock(&L->mu);
    tp_server *s = L->s;
    /* Kicks, one at a time off the list under the lock: a connection may be kicked again (and
     * relinked) while an earlier kick of it is handled. */
    for (;;) {
        pthread_mutex_lock(&L->mu);
        tp_conn *c = L->kicked;
        if (c) {
            L->kicked = c->knext;
            c->knext = NULL;
            c->kicked = 0;
        }
        pthread_mutex_unlock(&L->mu);
        if (!c) break;
        if (c->st != C_RAW || !c->raw) continue;
        c->raw->on_kick(c->raw_user, c);
        if (c->st == C_RAW) raw_process(c);
    }
    while (list) {
        tp_conn *c = list;
        list = c->rnext;
        c->rnext = NULL;
        c->suspended = 0;
        c->st = C_HANDLER;
        s->h.on_resume(s->ctx, c);
        if (!c->responded && c->suspended) { /* suspended again: another stage (audio decoded, now the batch) */
            c->st = C_SUSPENDED;
            continue;
        }
        if (!c->responded) {
            conn_close(c, TP_ERROR);
            continue;
        }
        process(c);
    }
    if (!atomic_load(&s->listening) && L->listen_registered) {
        epoll_ctl(L->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
        L->listen_registered = 0;
    }
    if (!atomic_load(&s->listening)) atomic_store(&L->quiesced, 1);
}

static void sweep(tp_loop *L)
{
    tp_server *s = L->s;
    double t = now_s();
    double idle = (double)s->cfg.idle_timeout_s, head = (double)s->cfg.head_timeout_s;
    double body = (double)atomic_load(s->cfg.body_timeout_s);
    tp_conn *next;
    for (tp_conn *c = L->conns; c; c = next) {
        next = c->next;
        switch (c->st) {
        case C_HEAD:
            if (c->t_req == 0) {
                if (t - c->t_last > idle) conn_close(c, TP_TIMEOUT);
            } else if (t - c->t_req > head) {
                hp_error e = {408, "request_timeout",
                              "the request head was not complete in time (server.head_timeout_s)"};
                if (fail_request(c, &e) == 0) process(c);
            }
            break;
        case C_BODY:
            if (t - c->t_last > idle || t - c->t_body > body) {
                hp_error e = {408, "request_timeout",
                              t - c->t_body > body
                                  ? "the upload was not complete in time (server.request_timeout_s)"
                                  : "the upload stalled (nothing for server.connection_timeout_s)"};
                if (fail_request(c, &e) == 0) process(c);
            }
            break;
        case C_WRITE:
            if (t - c->t_last > idle) conn_close(c, TP_TIMEOUT);
            break;
        case C_RAW:
            if (c->woff < c->wlen && t - c->t_last > idle) {
                conn_close(c, TP_TIMEOUT); /* output unread for connection_timeout_s */
                break;
            }
            if (c->raw) c->raw->on_sweep(c->raw_user, c, t);
            if (c->st == C_RAW) raw_process(c);
            break;
        case C_LINGER:
            if (t - c->t_linger > TP_LINGER_S) conn_free(c);
            break;
        case C_WAITSLOT:
            if (take_slot(s, c)) {
                atomic_fetch_sub(&s->overflow, 1);
                c->overflow = 0;
                c->st = C_HEAD;
                c->t_last = t;
                process(c);
            } else if (t - c->t_last > TP_SLOT_WAIT_S) {
                refuse_over_cap(c);
            }
            break;
        default:
            break;
        }
    }
    if (!L->listen_registered && atomic_load(&s->listening) && t >= L->accept_paused_until) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &L->tag_listen};
        if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, s->lfd, &ev) == 0) L->listen_registered = 1;
    }
}

static void bury(tp_loop *L)
{
    while (L->dead) {
        tp_conn *c = L->dead;
        L->dead = c->next;
        if (c->kicked) {
            /* kicked before it closed: take it off the kick list before its memory goes */
            pthread_mutex_lock(&L->mu);
            for (tp_conn **pp = &L->kicked; *pp; pp = &(*pp)->knext)
                if (*pp == c) {
                    *pp = c->knext;
                    break;
                }
            c->kicked = 0;
            pthread_mutex_unlock(&L->mu);
        }
        conn_destroy(c);
    }
}

static void *loop_main(void *arg)
{
    tp_loop *L = arg;
    tp_server *s = L->s;
    prctl(PR_SET_NAME, "rnntd-http"); /* thread names for top -H and /proc (profiling under load) */
    struct epoll_event ev[TP_MAX_EVENTS];
    double next_sweep = now_s() + TP_SWEEP_S;
    while (!atomic_load(&s->stopping)) {
        double wait = next_sweep - now_s();
        int ms = wait > 0 ? (int)(wait * 1000) + 1 : 0;
        int n = epoll_wait(L->epfd, ev, TP_MAX_EVENTS, ms);
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == &L->tag_ev) run_resumed(L);
            else if (p == &L->tag_listen) accept_some(L);
            else conn_event(p, ev[i].events);
        }
        if (now_s() >= next_sweep) {
            sweep(L);
            next_sweep = now_s() + TP_SWEEP_S;
        }
        bury(L);
    }
    /* Stopping: whatever is left is closed. A request still suspended cannot be freed (a worker
     * holds it); svc_drain waits for none to be before tp_stop. Connections handed to this loop
     * and not yet registered are closed with the rest; none is handed after this. */
    pthread_mutex_lock(&L->mu);
    L->adopt_closed = 1;
    pthread_mutex_unlock(&L->mu);
    adopt_handed(L);
    tp_conn *next;
    for (tp_conn *c = L->conns; c; c = next) {
        next = c->next;
        if (c->st == C_SUSPENDED || c->st == C_HANDLER) {
            conns_remove(L, c);
            continue;
        }
        conn_close(c, TP_SHUTDOWN);
    }
    bury(L);
    return NULL;
}

/* ---- the server ---- */

static int make_listener(const tp_config *cfg, unsigned *port, char *err, size_t errlen)
{
    char host[64];
    snprintf(host, sizeof host, "%s", cfg->listen);
    size_t hn = strlen(host);
    if (hn >= 2 && host[0] == '[' && host[hn - 1] == ']') {
        memmove(host, host + 1, hn - 2);
        host[hn - 2] = '\0';
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    int fam;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        fam = AF_INET;
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
        sl = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        fam = AF_INET6;
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        sl = sizeof *a6;
    } else {
        snprintf(err, errlen, "server.listen: \"%s\" is not an IPv4 or IPv6 address", cfg->listen);
        return -1;
    }
    int fd = socket(fam, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fam == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, SOMAXCONN)) {
        snprintf(err, errlen, "cannot listen on %s port %u: %s", cfg->listen, cfg->port, strerror(errno));
        close(fd);
        return -1;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(fd, (struct sockaddr *)&got, &gl);
    *port = ntohs(fam == AF_INET ? ((struct sockaddr_in *)&got)->sin_port : ((struct sockaddr_in6 *)&got)->sin6_port);
    return fd;
}

/* Fits the connection cap and the refused-connection allowance into the descriptor limit, raising
 * the soft limit as far as the hard one when needed; lowers them (4:1) when it cannot. */
static void fit_fd_limit(long long *conn, long long *overflow)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return;
    rlim_t need = (rlim_t)(*conn + *overflow + TP_FD_RESERVE);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        rlim_t target = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        struct rlimit nr = {target, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &nr) == 0) rl.rlim_cur = target;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return;
    long long avail = (long long)rl.rlim_cur - TP_FD_RESERVE;
    if (avail < 2) avail = 2;
    long long ov = avail / 5 < *overflow ? avail / 5 : *overflow;
    if (ov < 1) ov = 1;
    *overflow = ov;
    *conn = avail - ov;
}

int tp_start(const tp_config *cfg, const tp_handlers *h, void *ctx, tp_server **out, char *err, size_t errlen)
{
    *out = NULL;
    tp_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->cfg = *cfg;
    s->h = *h;
    const char *direct = getenv("RNNTD_TP_DIRECT"); /* A/B runs: 0 reads every body through rbuf */
    s->body_direct = !(direct && !strcmp(direct, "0"));
    const char *balance = getenv("RNNTD_TP_BALANCE"); /* A/B runs: 0 keeps each connection on the loop that accepted it */
    s->balance = !(balance && !strcmp(balance, "0"));
    s->ctx = ctx;
    s->lfd = -1;
    pthread_mutex_init(&s->ip_mu, NULL);
    s->max_overflow = cfg->max_connections / 4;
    if (s->max_overflow < 64) s->max_overflow = 64;
    if (s->max_overflow > 1024) s->max_overflow = 1024;
    s->max_conn = cfg->max_connections;
    fit_fd_limit(&s->max_conn, &s->max_overflow);
    s->lfd = make_listener(cfg, &s->port, err, errlen);
    if (s->lfd < 0) {
        pthread_mutex_destroy(&s->ip_mu);
        free(s);
        return -1;
    }
    atomic_store(&s->listening, 1);
    s->n_loops = cfg->threads > 0 ? cfg->threads : 1;
    s->loops = calloc((size_t)s->n_loops, sizeof *s->loops);
    if (!s->loops) {
        snprintf(err, errlen, "out of memory");
        tp_stop(s);
        return -1;
    }
    for (int i = 0; i < s->n_loops; i++) {
        tp_loop *L = &s->loops[i];
        L->s = s;
        L->idx = i;
        L->epfd = epoll_create1(EPOLL_CLOEXEC);
        L->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        pthread_mutex_init(&L->mu, NULL);
        struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &L->tag_ev};
        struct epoll_event e2 = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &L->tag_listen};
        if (L->epfd < 0 || L->evfd < 0 || epoll_ctl(L->epfd, EPOLL_CTL_ADD, L->evfd, &e1) ||
            epoll_ctl(L->epfd, EPOLL_CTL_ADD, s->lfd, &e2)) {
            snprintf(err, errlen, "epoll: %s", strerror(errno));
            tp_stop(s);
            return -1;
        }
        L->listen_registered = 1;
        if (pthread_create(&L->th, NULL, loop_main, L)) {
            snprintf(err, errlen, "cannot start the HTTP threads");
            tp_stop(s);
            return -1;
        }
        L->started = 1;
    }
    atomic_store(&s->loops_ready, 1);
    *out = s;
    return 0;
}

unsigned tp_port(const tp_server *s)
{
    return s->port;
}

long long tp_max_connections(const tp_server *s)
{
    return s->max_conn;
}

static void wake(tp_loop *L)
{
    uint64_t one = 1;
    ssize_t r = write(L->evfd, &one, sizeof one);
    (void)r;
}

void tp_quiesce(tp_server *s)
{
    if (!s || !atomic_exchange(&s->listening, 0)) return;
    for (int i = 0; i < s->n_loops; i++)
        if (s->loops[i].started) wake(&s->loops[i]);
    /* Close the socket only once no loop can be inside accept() on it. */
    for (int i = 0; i < s->n_loops; i++) {
        for (int k = 0; k < 2000 && s->loops[i].started && !atomic_load(&s->loops[i].quiesced); k++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    close(s->lfd);
    s->lfd = -1;
}

int tp_loop_count(const tp_server *s)
{
    return s ? s->n_loops : 0;
}

long long tp_loop_connections(tp_server *s, int loop)
{
    return s && loop >= 0 && loop < s->n_loops ? atomic_load(&s->loops[loop].n_conns) : 0;
}

long long tp_connections(tp_server *s)
{
    return s ? atomic_load(&s->open) : 0;
}

void tp_stop(tp_server *s)
{
    if (!s) return;
    atomic_store(&s->stopping, 1);
    /* Every loop joined before any loop's eventfd and lock go: a running loop may still hand a
     * connection to another (hand_off locks that loop's mu and writes its eventfd). */
    for (int i = 0; s->loops && i < s->n_loops; i++) {
        tp_loop *L = &s->loops[i];
        if (L->s && L->started) {
            wake(L);
            pthread_join(L->th, NULL);
        }
    }
    for (int i = 0; s->loops && i < s->n_loops; i++) {
        tp_loop *L = &s->loops[i];
        if (!L->s) continue; /* never set up (tp_start failed before it) */
        if (L->epfd >= 0) close(L->epfd);
        if (L->evfd >= 0) close(L->evfd);
        pthread_mutex_destroy(&L->mu);
    }
    if (s->lfd >= 0) close(s->lfd);
    for (int i = 0; i < TP_IP_BUCKETS; i++) {
        while (s->ip_tab[i]) {
            ip_node *n = s->ip_tab[i];
            s->ip_tab[i] = n->next;
            free(n);
        }
    }
    pthread_mutex_destroy(&s->ip_mu);
    free(s->loops);
    free(s);
}

/* ---- inside handlers ---- */

void tp_set_user(tp_conn *c, void *user)
{
    c->user = user;
}

void *tp_user(tp_conn *c)
{
    return c->user;
}

const hp_request *tp_request(tp_conn *c)
{
    return c->req;
}

const char *tp_peer(tp_conn *c)
{
    return c->peer;
}

int tp_respond(tp_conn *c, unsigned status, const char *extra_headers, const char *body, size_t len, int close_it)
{
    if (c->responded) return -1;
    c->responded = 1;
    c->suspended = 0;
    /* Answered before the body was read, or the framing is in doubt: this connection carries no
     * further request. */
    if (close_it || !c->req || !c->req->keep_alive || c->st == C_HEAD || (c->st == C_BODY && !c->body_done) ||
        c->overflow)
        c->close_after = 1;
    int head_only = c->req && c->req->method_id == HP_HEAD;
    char date[64];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    const char *conn_hdr = c->close_after ? "Connection: close\r\n"
                           : c->req && c->req->minor == 0 ? "Connection: keep-alive\r\n"
                                                          : "";
    size_t cap = 256 + (extra_headers ? strlen(extra_headers) : 0) + (head_only ? 0 : len);
    char *w = malloc(cap);
    if (!w) {
        /* No memory for the answer: the connection closes without one. */
        c->close_after = 1;
        c->st = C_WRITE;
        return -1;
    }
    int hl = snprintf(w, cap, "HTTP/1.1 %u %s\r\nDate: %s\r\n%sContent-Length: %zu\r\n%s\r\n", status,
                      hp_reason(status), date, extra_headers ? extra_headers : "", len, conn_hdr);
    size_t n = (size_t)hl;
    if (!head_only && len) {
        memcpy(w + n, body, len);
        n += len;
    }
    free(c->wbuf);
    c->wbuf = w;
    c->wlen = n;
    c->woff = 0;
    c->st = C_WRITE;
    return 0;
}

void tp_suspend(tp_conn *c)
{
    c->suspended = 1;
}

void tp_resume(tp_conn *c)
{
    tp_loop *L = c->loop;
    pthread_mutex_lock(&L->mu);
    c->rnext = L->resumed;
    L->resumed = c;
    pthread_mutex_unlock(&L->mu);
    wake(L);
}

/* ---- upgraded connections ---- */

static int raw_append(tp_conn *c, const void *data, size_t len)
{
    if (c->woff > 0 && c->woff == c->wlen) c->woff = c->wlen = 0;
    if (c->wlen + len > c->wcap || !c->wbuf) {
        if (c->woff > 0) {
            memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
            c->wlen -= c->woff;
            c->woff = 0;
        }
        if (c->wlen + len > c->wcap || !c->wbuf) {
            size_t cap = c->wcap ? c->wcap : 4096;
            while (cap < c->wlen + len) cap *= 2;
            char *w = realloc(c->wbuf, cap);
            if (!w) return -1;
            c->wbuf = w;
            c->wcap = cap;
        }
    }
    memcpy(c->wbuf + c->wlen, data, len);
    c->wlen += len;
    return 0;
}

int tp_upgrade(tp_conn *c, const char *head, size_t len, const tp_raw_handlers *h, void *user)
{
    if (c->st != C_BODY || !c->body_done || c->responded) return -1;
    c->responded = 1;
    end_request(c, TP_OK);
    free(c->wbuf);
    c->wbuf = NULL;
    c->wlen = c->woff = c->wcap = 0;
    if (raw_append(c, head, len)) return -1;
    c->raw = h;
    c->raw_user = user;
    c->st = C_RAW;
    c->t_last = now_s();
    return 0;
}

int tp_raw_send(tp_conn *c, const void *data, size_t len)
{
    if (c->st != C_RAW || c->raw_closing) return -1;
    return raw_append(c, data, len);
}

size_t tp_raw_unsent(const tp_conn *c)
{
    return c->wlen - c->woff;
}

void tp_raw_pause_reading(tp_conn *c, int paused)
{
    c->raw_paused = paused;
}

void tp_raw_close(tp_conn *c)
{
    c->raw_closing = 1;
}

void tp_kick(tp_conn *c)
{
    tp_loop *L = c->loop;
    pthread_mutex_lock(&L->mu);
    int first = !c->kicked;
    if (first) {
        c->kicked = 1;
        c->knext = L->kicked;
        L->kicked = c;
    }
    pthread_mutex_unlock(&L->mu);
    if (first) wake(L);
}
