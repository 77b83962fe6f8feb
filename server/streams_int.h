/* streams_int.h — what the two halves of the stream service share (internal to server/): the
 * WebSocket side (streams.c: the transport's loop threads) and the sequence batcher
 * (stream_batch.c: the stream workers). See streams.c for how they meet (a per-stream mutex). */
#ifndef SRV_STREAMS_INT_H
#define SRV_STREAMS_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "reply.h"
#include "streams.h"
#include "ws.h"

#define STRM_MAX_FINALS 64
#define STRM_OUT_HIGH (256 * 1024) /* unsent bytes above which partials wait in the outbox */
#define STRM_RUNNER_FRAMES 512     /* input frames of one stream per advance */

typedef enum { ENC_S16 = 0, ENC_F32, ENC_FEATURES } strm_encoding;

typedef struct out_msg {
    struct out_msg *next;
    char *text;
    size_t len;
} out_msg;

typedef struct sess sess;
typedef struct strm_worker strm_worker;

struct sess {
    srv *s;
    strm_worker *w;
    pthread_mutex_t mu;
    int refs;                 /* loop side + worker side; under mu */
    /* loop side */
    tp_conn *conn;            /* NULL once closed; read by the worker under mu to kick */
    ws_parser parser;
    int configured, closing;
    double t_last_in;
    char id[40];
    /* configuration (set by the loop side before the worker sees the stream) */
    strm_encoding enc;
    int partials, endpointing;
    eng *e;
    /* shared, under mu */
    unsigned char *in;
    size_t in_len, in_cap;
    double t_in;              /* arrival of the oldest byte in `in` */
    int eof, gone, drain;
    char *partial;            /* the latest partial not yet written */
    size_t partial_len;
    double partial_t_in;
    out_msg *finals, **finals_tail;
    int n_finals;
    unsigned close_code;      /* worker asks the loop side to close after the finals; 0: no */
    char close_reason[100];
    /* worker side */
    sess *wnext;
    rnnt_stream *st;
    int finished_sent;        /* rnnt_stream_input_finished called */
    int seg;                  /* segment number */
    int seg_token;            /* first token of the current segment */
    int seg_frame;            /* first encoder frame of the current segment */
    int last_tokens;          /* tokens at the last partial */
    long long frames_last;    /* input frames at the last partial */
    double compute_s;
    int done;                 /* final sent, close asked */
};

typedef struct wmodel {
    struct wmodel *next;
    eng *e;
    rnnt_runner *r;
    rnnt_frontend *fe;
} wmodel;

struct strm_worker {
    srv *s;
    int idx;
    pthread_t th;
    pthread_mutex_t mu;       /* guards incoming */
    sess *incoming;           /* configured streams not yet taken into `list` */
    sess *list;               /* worker-owned */
    int n;                    /* streams in list + incoming (for placement); atomic enough under mu */
    wmodel *models;
};

typedef struct {
    _Atomic long long count[16], n, sum_us;
} hist;

typedef struct strm_service {
    srv *s;
    int n_workers;
    strm_worker *workers;
    _Atomic int stop;
    _Atomic long long open;   /* upgraded and not yet closed */
    _Atomic int draining, drain_all;
    long long max_streams;
    double tick_s;
    int max_batch;
    double idle_s;
    size_t max_message;
    double max_pending_s;
    double ep_silence_s, ep_no_speech_s, ep_max_segment_s;
    /* metrics */
    _Atomic long long started, finished, errors, chunks, batches, partials, partials_dropped, finals;
    hist batch_hist, lat_hist, rtf_hist;
} strm_service;

static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
static const double lat_bounds[] = {0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2};
static const double rtf_bounds[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1};

void strm_hist_add(hist *h, const double *b, int nb, double v);
double strm_now(void);
/* Drops one side's reference; the last frees the stream. */
void strm_sess_unref(sess *q);
/* A stream worker's thread: a tick every streaming.tick_ms. */
void *strm_worker_main(void *arg);

#endif
