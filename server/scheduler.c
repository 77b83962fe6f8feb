/* scheduler.c — the bounded queue and the batch-forming workers. */
#include "scheduler.h"

#include <math.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A worker's current batch, as the deadline monitor sees it. */
typedef struct {
    int running;
    int detached;  /* the run holds nothing of its jobs: they may be answered without it */
    int committed; /* the run is writing results: too late to abandon */
    int abandoned; /* answered by the monitor; the run's jobs are not its own any more */
    double t_start;
    double frames; /* of the running batch */
    sched_job **batch;
    int n;
} worker_state;

/* A device slot, as the dispatch and the device metrics see it. */
typedef struct {
    int down;
    int workers, busy;
    double frames;          /* of its running batches */
    double last_start;
    long long batches;
    double busy_s;          /* closed busy periods */
    double busy_since;      /* start of the current busy period (busy > 0) */
    double ewma, ewma_t;    /* busy fraction, exponentially averaged (SCHED_RATE_TAU_S) */
} dev_state;

#define SCHED_RATE_MIN_BATCHES 3
#define SCHED_RATE_MIN_BUSY_S 0.05

struct sched {
    pthread_mutex_t mu;
    pthread_cond_t work;   /* workers wait here for jobs or their batch deadline */
    pthread_cond_t idle;   /* sched_wait_idle waits here */
    pthread_cond_t mon;    /* the deadline monitor sleeps here */
    sched_job *head, *tail; /* FIFO by submit time */
    int depth;
    int busy;
    int flushing; /* no waiting for max_delay (draining) */
    int spread;   /* take a share of the waiting jobs, leave the rest to idle workers */
    int go;       /* workers that may start at once on the rest of a spread */
    int closed;   /* no new jobs */
    int stop;
    int idle_claims;       /* queued jobs that took an idle worker (idle_start) */
    double queued_frames;  /* frames of the waiting jobs */
    /* Drain rate: frames completed per second of busy time, both sums decayed with SCHED_RATE_TAU_S. */
    double rate_frames, rate_busy_s, t_mark;
    long long batches, abandoned;
    double last_progress;
    worker_state *ws;
    int n_dev;
    int *wdev;       /* [workers] device slot */
    dev_state *dev;  /* [n_dev] */
    sched_params p;
    sched_exec x;
    int n_threads;
    pthread_t *threads;
    pthread_t monitor;
    int monitor_started;
    sched_job ***scratch;  /* per worker: room for a batch and its candidates; grown by that worker */
    int *scratch_cap;
};

typedef struct {
    sched *s;
    int index;
} worker_arg;

double sched_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void unlink_job(sched *s, sched_job *j)
{
    if (j->prev) j->prev->next = j->next;
    else s->head = j->next;
    if (j->next) j->next->prev = j->prev;
    else s->tail = j->prev;
    j->prev = j->next = NULL;
    s->depth--;
    s->queued_frames -= j->frames;
    if (j->idle_start) s->idle_claims--;
}

/* Under the lock: the measured drain rate in frames per second, 0 while too little is measured. */
static double drain_rate(const sched *s)
{
    if (s->batches < SCHED_RATE_MIN_BATCHES || s->rate_busy_s < SCHED_RATE_MIN_BUSY_S) return 0;
    return s->rate_frames / s->rate_busy_s;
}

/* Under the lock: the frames ahead of a new job, the queued ones plus what the running batches
 * still have to do (each worker drains its share of the rate), for the expected wait. */
static double frames_ahead(const sched *s, double rate, double now)
{
    double ahead = s->queued_frames;
    int live = 0;
    for (int w = 0; w < s->p.workers; w++) live += !(s->ws[w].running && s->ws[w].abandoned);
    double per_worker = live > 0 ? rate / live : rate;
    for (int w = 0; w < s->p.workers; w++) {
        const worker_state *ws = &s->ws[w];
        if (!ws->running || ws->abandoned) continue;
        double left = ws->frames - (now - ws->t_start) * per_worker;
        if (left > 0) ahead += left;
    }
    return ahead;
}

/* Under the lock: workers whose batch was abandoned and whose run has not returned. */
static int abandoned_running(const sched *s)
{
    int n = 0;
    for (int w = 0; w < s->p.workers; w++) n += s->ws[w].running && s->ws[w].abandoned;
    return n;
}

/* Under the lock: workers that can still run a batch (not hung, on a device in rotation). */
static int live_workers(const sched *s)
{
    int n = 0;
    for (int w = 0; w < s->p.workers; w++) n += !s->dev[s->wdev[w]].down && !(s->ws[w].running && s->ws[w].abandoned);
    return n;
}

/* Under the lock: brings device d's busy-fraction average up to `now` (before its busy count changes). */
static double dev_ewma_at(const dev_state *d, double now)
{
    double dt = now - d->ewma_t;
    if (dt <= 0) return d->ewma;
    double a = exp(-dt / SCHED_RATE_TAU_S);
    return d->ewma * a + (d->busy > 0 ? 1 - a : 0);
}

static void dev_busy_change(sched *s, int d, int delta, double now)
{
    dev_state *v = &s->dev[d];
    v->ewma = dev_ewma_at(v, now);
    v->ewma_t = now;
    if (v->busy == 0 && delta > 0) v->busy_since = now;
    v->busy += delta;
    if (v->busy == 0 && delta < 0) v->busy_s += now - v->busy_since;
}

/* Under the lock: 1 when worker w may take the next batch: its device is in rotation and, of the
 * devices in rotation with an idle worker, has the least work in progress (ties: the device whose
 * last batch started longest ago, then the lower slot), so that batches spread over the devices;
 * the device a queued-again head job failed on is left out while another is in rotation. */
static int may_take(const sched *s, int w)
{
    int mine = s->wdev[w];
    if (s->dev[mine].down) return 0;
    if (s->n_dev == 1) return 1;
    /* A job queued again after its device failed goes to another device while one is in rotation. */
    int avoid = -1, up = 0;
    for (int d = 0; d < s->n_dev; d++) up += !s->dev[d].down;
    if (s->head && s->head->requeued && up > 1) avoid = s->head->device;
    if (mine == avoid) return 0;
    int best = -1;
    for (int d = 0; d < s->n_dev; d++) {
        const dev_state *v = &s->dev[d];
        if (v->down || v->busy >= v->workers || d == avoid) continue;
        if (best < 0) {
            best = d;
            continue;
        }
        const dev_state *b = &s->dev[best];
        if (v->frames < b->frames || (v->frames == b->frames && v->last_start < b->last_start)) best = d;
    }
    return best == mine;
}

static __thread sched *tl_sched;
static __thread int tl_worker;

void sched_batch_detach(void)
{
    sched *s = tl_sched;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->ws[tl_worker].detached = 1;
    pthread_mutex_unlock(&s->mu);
}

int sched_batch_queue_empty(void)
{
    sched *s = tl_sched;
    if (!s) return 1;
    pthread_mutex_lock(&s->mu);
    int empty = s->head == NULL;
    pthread_mutex_unlock(&s->mu);
    return empty;
}

int sched_batch_commit(void)
{
    sched *s = tl_sched;
    if (!s) return 1;
    pthread_mutex_lock(&s->mu);
    worker_state *ws = &s->ws[tl_worker];
    int mine = !ws->abandoned;
    if (mine) ws->committed = 1;
    pthread_mutex_unlock(&s->mu);
    return mine;
}

static void timed_wait(sched *s, double deadline)
{
    /* Condition variables use CLOCK_MONOTONIC (set at init), so deadlines survive clock changes. */
    struct timespec ts;
    double sec = deadline;
    ts.tv_sec = (time_t)sec;
    ts.tv_nsec = (long)((sec - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->work, &s->mu, &ts);
}

typedef struct {
    sched_job *j;
    int dist;
    double t;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->dist != y->dist) return x->dist < y->dist ? -1 : 1;
    return x->t < y->t ? -1 : x->t > y->t; /* ties: the older first */
}

static int frames_cmp(const void *a, const void *b)
{
    const sched_job *x = *(sched_job *const *)a, *y = *(sched_job *const *)b;
    return (x->frames > y->frames) - (x->frames < y->frames);
}

/* Under the lock: picks a batch into out[] (capacity cap) and unlinks it. Returns its size. */
static int pick_batch(sched *s, sched_job **out, int cap, cand *cs)
{
    sched_job *oldest = s->head;
    int n_c = 0;
    for (sched_job *j = cap > 1 ? oldest->next : NULL; j; j = j->next) {
        if (j->group != oldest->group) continue;
        int d = j->frames - oldest->frames;
        cs[n_c].j = j;
        cs[n_c].dist = d < 0 ? -d : d;
        cs[n_c].t = j->t_submit;
        n_c++;
    }
    int n = 1;
    out[0] = oldest;
    if (n_c > 0 && cap > 1) {
        qsort(cs, (size_t)n_c, sizeof *cs, cand_cmp);
        for (int i = 0; i < n_c && n < cap; i++) {
            /* A job that may share a batch with fewer jobs than this batch would hold waits. */
            if (cs[i].j->batch_cap < n + 1) continue;
            out[n++] = cs[i].j;
        }
    }
    for (int i = 0; i < n; i++) unlink_job(s, out[i]);
    /* Sorted by length: backends that pack by length want it, and it costs nothing here. */
    qsort(out, (size_t)n, sizeof *out, frames_cmp);
    return n;
}

static int count_group(sched *s, const void *group, int stop_at)
{
    int n = 0;
    for (sched_job *j = s->head; j && n < stop_at; j = j->next)
        if (j->group == group) n++;
    return n;
}

/* Under the lock: makes worker w's scratch hold `need` jobs and candidates; 0 on success. */
static int ensure_scratch(sched *s, int w, int need)
{
    if (s->scratch_cap[w] >= need) return 0;
    int nc = need + 16;
    sched_job **ns = realloc(s->scratch[w], (size_t)nc * (sizeof(sched_job *) + sizeof(cand)));
    if (!ns) return -1;
    s->scratch[w] = ns;
    s->scratch_cap[w] = nc;
    return 0;
}

/* Under the lock, after a run: the jobs it asked to run again go back to the head of the queue in
 * their order (once each, while the queue is open and a device is in rotation), and their slots in
 * batch[] are cleared; the others are left for done(). */
static void requeue_asked(sched *s, sched_job **batch, int n)
{
    int can = !s->closed && live_workers(s) > 0;
    for (int i = n - 1; i >= 0; i--) {
        sched_job *j = batch[i];
        int again = j->requeue && j->requeued == 0 && can;
        j->requeue = 0;
        if (!again) continue;
        j->requeued++;
        j->idle_start = 0;
        j->prev = NULL;
        j->next = s->head;
        if (s->head) s->head->prev = j;
        else s->tail = j;
        s->head = j;
        s->depth++;
        s->queued_frames += j->frames;
        batch[i] = NULL;
    }
    pthread_cond_broadcast(&s->work);
}

static void *worker_main(void *arg)
{
    worker_arg *wa = arg;
    sched *s = wa->s;
    int w = wa->index;
    free(wa);
    prctl(PR_SET_NAME, "rnntd-worker");
    tl_sched = s;
    tl_worker = w;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        while ((!s->head || !may_take(s, w)) && !s->stop) pthread_cond_wait(&s->work, &s->mu);
        if (s->stop && (!s->head || !may_take(s, w))) break;
        sched_job *oldest = s->head;
        int cap = s->p.max_batch;
        if (oldest->batch_cap < cap) cap = oldest->batch_cap;
        if (cap < 1) cap = 1;
        if (s->go > 0) {
            s->go--; /* the rest of a spread batch: no waiting for company */
        } else if (!s->flushing && !s->closed && !s->stop && (s->p.delay_when_idle || !oldest->idle_start)) {
            double deadline = oldest->t_submit + (double)s->p.max_delay_us * 1e-6;
            if (count_group(s, oldest->group, cap) < cap && sched_now() < deadline) {
                timed_wait(s, deadline);
                continue; /* re-evaluate: another worker may have taken the jobs */
            }
        }
        int idle = 0; /* this worker included; workers of devices out of rotation do not count */
        for (int v = 0; v < s->p.workers; v++) idle += !s->ws[v].running && !s->dev[s->wdev[v]].down;
        int spreading = s->spread && idle > 1;
        if (spreading) {
            int waiting = count_group(s, oldest->group, cap * idle);
            int share = (waiting + idle - 1) / idle;
            if (share < cap) cap = share;
        }
        sched_job *one_job[1];
        cand one_cand[1];
        sched_job **batch = one_job;
        cand *cs = one_cand;
        if (ensure_scratch(s, w, s->depth + 1) == 0) {
            batch = s->scratch[w];
            cs = (cand *)(batch + s->scratch_cap[w]);
        } else {
            cap = 1; /* no memory for a candidate list: run the oldest alone */
        }
        int n = pick_batch(s, batch, cap, cs);
        double t0 = sched_now();
        /* Busy time (for the drain rate) starts now; a hung worker's batch does not count as busy. */
        if (s->busy - abandoned_running(s) == 0) s->t_mark = t0;
        s->busy++;
        worker_state *ws = &s->ws[w];
        ws->running = 1;
        ws->detached = ws->committed = ws->abandoned = 0;
        ws->t_start = t0;
        ws->frames = 0;
        for (int i = 0; i < n; i++) ws->frames += batch[i]->frames;
        ws->batch = batch;
        ws->n = n;
        s->last_progress = t0;
        int d = s->wdev[w];
        dev_busy_change(s, d, +1, t0);
        s->dev[d].frames += ws->frames;
        s->dev[d].last_start = t0;
        if (!s->head) {
            s->go = 0;
        } else if (spreading && s->go < idle - 1) {
            s->go = idle - 1; /* the idle workers start on what this one left */
            pthread_cond_broadcast(&s->work);
        } else if (s->n_dev > 1) {
            pthread_cond_broadcast(&s->work); /* the loads changed: another device may take the rest */
        }
        /* batch[] is this worker's own scratch: only this thread resizes it, so the lock can go. */
        pthread_mutex_unlock(&s->mu);

        long long frames = 0;
        for (int i = 0; i < n; i++) {
            batch[i]->t_start = t0;
            batch[i]->batch_size = n;
            batch[i]->worker = w;
            batch[i]->device = d;
            batch[i]->requeue = 0;
            frames += batch[i]->frames;
        }
        s->x.run(s->x.ctx, w, batch[0]->group, batch, n);
        double t1 = sched_now();
        pthread_mutex_lock(&s->mu);
        int abandoned = ws->abandoned;
        ws->committed = 1; /* for runs that did not commit themselves */
        s->dev[d].batches++; /* before done(): a client that has its answer sees its batch counted */
        if (!abandoned) requeue_asked(s, batch, n);
        pthread_mutex_unlock(&s->mu);
        if (!abandoned) {
            for (int i = 0; i < n; i++) {
                sched_job *j = batch[i];
                if (!j) continue; /* queued again: no longer this worker's */
                j->t_end = t1;
                j->outcome = SCHED_RAN;
                j->done(j, j->user); /* j may be freed from here on */
            }
        }

        pthread_mutex_lock(&s->mu);
        if (!abandoned) {
            double dt = t1 - s->t_mark;
            if (dt < 0) dt = 0;
            double decay = exp(-dt / SCHED_RATE_TAU_S);
            s->rate_frames = s->rate_frames * decay + (double)frames;
            s->rate_busy_s = s->rate_busy_s * decay + dt;
            s->t_mark = t1;
            s->batches++;
        }
        ws->running = 0;
        ws->batch = NULL;
        ws->n = 0;
        s->last_progress = sched_now();
        s->busy--;
        dev_busy_change(s, d, -1, s->last_progress);
        s->dev[d].frames -= ws->frames;
        if (s->dev[d].frames < 0.5) s->dev[d].frames = 0;
        if (s->n_dev > 1) pthread_cond_broadcast(&s->work); /* the loads changed */
        pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* The deadline monitor: answers the jobs of a detached batch that has run past worker_deadline_s
 * through the executor's abandon hook, so its clients are not held by a hung worker. */
static void *monitor_main(void *arg)
{
    sched *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        double dl = s->p.worker_deadline_s;
        double tick = dl > 0 ? dl / 4 : 0.5;
        if (tick > 0.5) tick = 0.5;
        if (tick < 0.01) tick = 0.01;
        double now = sched_now();
        struct timespec ts;
        double until = now + tick;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
        pthread_cond_timedwait(&s->mon, &s->mu, &ts);
        if (s->stop || dl <= 0 || !s->x.abandon) continue;
        now = sched_now();
        for (int w = 0; w < s->p.workers; w++) {
            worker_state *ws = &s->ws[w];
            if (!ws->running || !ws->detached || ws->committed || ws->abandoned) continue;
            double ran = now - ws->t_start;
            if (ran <= dl) continue;
            ws->abandoned = 1;
            s->abandoned++;
            s->batches++;
            s->last_progress = now;
            int n = ws->n;
            sched_job **jobs = malloc((size_t)n * sizeof *jobs);
            if (!jobs) {
                ws->abandoned = 0; /* try again on the next tick */
                s->abandoned--;
                s->batches--;
                continue;
            }
            memcpy(jobs, ws->batch, (size_t)n * sizeof *jobs);
            pthread_mutex_unlock(&s->mu);
            for (int i = 0; i < n; i++) {
                sched_job *j = jobs[i];
                s->x.abandon(s->x.ctx, j, ran);
                j->t_end = now;
                j->outcome = SCHED_RAN;
                j->done(j, j->user);
            }
            free(jobs);
            pthread_mutex_lock(&s->mu);
            pthread_cond_broadcast(&s->idle);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

sched_status sched_create(const sched_params *p, const sched_exec *x, sched **out)
{
    *out = NULL;
    int n_dev = p->n_devices > 0 ? p->n_devices : 1;
    if (p->workers < 1 || p->max_batch < 1 || p->max_queue < 1 || p->max_delay_us < 0 || p->max_wait_s < 0 ||
        p->worker_deadline_s < 0 || !x->run || n_dev > SCHED_MAX_DEVICES)
        return SCHED_INVALID;
    for (int w = 0; p->worker_device && w < p->workers; w++)
        if (p->worker_device[w] < 0 || p->worker_device[w] >= n_dev) return SCHED_INVALID;
    sched *s = calloc(1, sizeof *s);
    if (!s) return SCHED_NOMEM;
    s->p = *p;
    s->p.worker_device = NULL; /* copied into wdev */
    s->p.n_devices = n_dev;
    s->n_dev = n_dev;
    s->x = *x;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->work, &ca);
    pthread_cond_init(&s->idle, &ca);
    pthread_cond_init(&s->mon, &ca);
    pthread_condattr_destroy(&ca);
    s->last_progress = sched_now();
    s->ws = calloc((size_t)p->workers, sizeof *s->ws);
    s->threads = calloc((size_t)p->workers, sizeof *s->threads);
    s->scratch = calloc((size_t)p->workers, sizeof *s->scratch);
    s->scratch_cap = calloc((size_t)p->workers, sizeof *s->scratch_cap);
    s->wdev = calloc((size_t)p->workers, sizeof *s->wdev);
    s->dev = calloc((size_t)n_dev, sizeof *s->dev);
    if (!s->ws || !s->threads || !s->scratch || !s->scratch_cap || !s->wdev || !s->dev) {
        sched_free(s);
        return SCHED_NOMEM;
    }
    double now = sched_now();
    for (int d = 0; d < n_dev; d++) s->dev[d].ewma_t = now;
    for (int w = 0; w < p->workers; w++) {
        s->wdev[w] = p->worker_device ? p->worker_device[w] : 0;
        s->dev[s->wdev[w]].workers++;
    }
    for (int i = 0; i < p->workers; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            sched_free(s);
            return SCHED_NOMEM;
        }
        wa->s = s;
        wa->index = i;
        if (pthread_create(&s->threads[i], NULL, worker_main, wa) != 0) {
            free(wa);
            sched_free(s);
            return SCHED_NOMEM;
        }
        s->n_threads++;
    }
    if (pthread_create(&s->monitor, NULL, monitor_main, s) != 0) {
        sched_free(s);
        return SCHED_NOMEM;
    }
    s->monitor_started = 1;
    *out = s;
    return SCHED_OK;
}

sched_status sched_submit(sched *s, sched_job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->closed) {
        pthread_mutex_unlock(&s->mu);
        return SCHED_CLOSED;
    }
    if (live_workers(s) == 0) {
        pthread_mutex_unlock(&s->mu);
        return SCHED_UNAVAILABLE;
    }
    if (s->depth >= s->p.max_queue) {
        pthread_mutex_unlock(&s->mu);
        return SCHED_FULL;
    }
    double rate = drain_rate(s);
    if (s->p.max_wait_s > 0 && rate > 0 && frames_ahead(s, rate, sched_now()) / rate > s->p.max_wait_s) {
        pthread_mutex_unlock(&s->mu);
        return SCHED_FULL;
    }
    if (j->batch_cap < 1) j->batch_cap = 1;
    /* A worker free for it (idle and not already claimed by a waiting job): no waiting for company. */
    j->idle_start = s->p.workers - s->busy - s->idle_claims > 0;
    if (j->idle_start) s->idle_claims++;
    s->queued_frames += j->frames;
    j->t_submit = sched_now();
    j->t_start = j->t_end = 0;
    j->batch_size = 0;
    j->worker = -1;
    j->device = -1;
    j->requeue = j->requeued = 0;
    j->next = NULL;
    j->prev = s->tail;
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->depth++;
    /* Wake every worker: one may be waiting for this job to fill its batch. */
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    return SCHED_OK;
}

void sched_set_limits(sched *s, int max_batch, long long max_delay_us, int max_queue)
{
    pthread_mutex_lock(&s->mu);
    if (max_batch >= 1) s->p.max_batch = max_batch;
    if (max_delay_us >= 0) s->p.max_delay_us = max_delay_us;
    if (max_queue >= 1) s->p.max_queue = max_queue;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
}

void sched_set_policy(sched *s, int delay_when_idle, double max_wait_s, double worker_deadline_s)
{
    pthread_mutex_lock(&s->mu);
    s->p.delay_when_idle = delay_when_idle != 0;
    if (max_wait_s >= 0) s->p.max_wait_s = max_wait_s;
    if (worker_deadline_s >= 0) s->p.worker_deadline_s = worker_deadline_s;
    pthread_cond_broadcast(&s->work);
    pthread_cond_broadcast(&s->mon);
    pthread_mutex_unlock(&s->mu);
}

void sched_set_spread(sched *s, int on)
{
    pthread_mutex_lock(&s->mu);
    s->spread = on != 0;
    pthread_mutex_unlock(&s->mu);
}

void sched_flush(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->flushing = 1;
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
}

int sched_wait_idle(sched *s, double timeout_s)
{
    double deadline = sched_now() + timeout_s;
    pthread_mutex_lock(&s->mu);
    /* Workers whose batch was abandoned may never return: they do not count. */
#define SCHED_PENDING(s) ((s->head && live_workers(s) > 0) || s->busy > abandoned_running(s))
    while (SCHED_PENDING(s) && sched_now() < deadline) {
        struct timespec ts;
        ts.tv_sec = (time_t)deadline;
        ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
        pthread_cond_timedwait(&s->idle, &s->mu, &ts);
    }
    int rc = SCHED_PENDING(s) ? -1 : 0;
#undef SCHED_PENDING
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int end_jobs(sched_job *list, sched_outcome outcome);

int sched_cancel_waiting(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    sched_job *list = s->head;
    s->head = s->tail = NULL;
    s->depth = 0;
    s->queued_frames = 0;
    s->idle_claims = 0;
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    return end_jobs(list, SCHED_CANCELLED);
}

void sched_free(sched *s)
{
    if (!s) return;
    sched_cancel_waiting(s);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->work);
    pthread_cond_broadcast(&s->mon);
    pthread_mutex_unlock(&s->mu);
    if (s->monitor_started) pthread_join(s->monitor, NULL);
    int stuck = 0;
    for (int i = 0; i < s->n_threads; i++) {
        /* A worker whose batch was abandoned may be hung for good: wait a little, then leave it
         * (and the scheduler it may still touch) to the process's exit. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        pthread_mutex_lock(&s->mu);
        int hung = s->ws && s->ws[i].running && s->ws[i].abandoned;
        pthread_mutex_unlock(&s->mu);
        if (!hung) pthread_join(s->threads[i], NULL);
        else if (pthread_timedjoin_np(s->threads[i], NULL, &ts) != 0) {
            pthread_detach(s->threads[i]);
            stuck++;
        }
    }
    if (stuck) return;
    if (s->scratch)
        for (int i = 0; i < s->p.workers; i++) free(s->scratch[i]);
    free(s->scratch);
    free(s->scratch_cap);
    free(s->threads);
    free(s->ws);
    free(s->wdev);
    free(s->dev);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    pthread_cond_destroy(&s->mon);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int sched_queue_depth(sched *s)
{
    pthread_mutex_lock(&s->mu);
    int d = s->depth;
    pthread_mutex_unlock(&s->mu);
    return d;
}

/* Ends every waiting job with `outcome` (outside the lock); they were unlinked into `list`. */
static int end_jobs(sched_job *list, sched_outcome outcome)
{
    int n = 0;
    while (list) {
        sched_job *next = list->next;
        list->prev = list->next = NULL;
        list->outcome = outcome;
        list->t_start = list->t_end = sched_now();
        list->batch_size = 0;
        list->done(list, list->user);
        list = next;
        n++;
    }
    return n;
}

void sched_set_device_down(sched *s, int d, int down)
{
    pthread_mutex_lock(&s->mu);
    if (d < 0 || d >= s->n_dev) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->dev[d].down = down != 0;
    sched_job *orphans = NULL;
    if (live_workers(s) == 0 && s->head) { /* nobody left to run what waits */
        orphans = s->head;
        s->head = s->tail = NULL;
        s->depth = 0;
        s->queued_frames = 0;
        s->idle_claims = 0;
    }
    pthread_cond_broadcast(&s->work);
    pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    end_jobs(orphans, SCHED_NO_DEVICE);
}

int sched_devices_up(sched *s)
{
    pthread_mutex_lock(&s->mu);
    int n = 0;
    for (int d = 0; d < s->n_dev; d++) n += !s->dev[d].down;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int sched_device_count(sched *s) { return s->n_dev; } /* fixed at creation */

void sched_get_device(sched *s, int d, sched_device_stats *o)
{
    memset(o, 0, sizeof *o);
    if (d < 0 || d >= s->n_dev) return;
    pthread_mutex_lock(&s->mu);
    const dev_state *v = &s->dev[d];
    double now = sched_now();
    o->down = v->down;
    o->workers = v->workers;
    o->busy = v->busy;
    o->running_frames = v->frames;
    o->busy_s = v->busy_s + (v->busy > 0 ? now - v->busy_since : 0);
    o->busy_fraction = dev_ewma_at(v, now);
    o->batches = v->batches;
    pthread_mutex_unlock(&s->mu);
}

int sched_busy_workers(sched *s)
{
    pthread_mutex_lock(&s->mu);
    int b = s->busy;
    pthread_mutex_unlock(&s->mu);
    return b;
}

int sched_retry_after_s(sched *s)
{
    pthread_mutex_lock(&s->mu);
    double rate = drain_rate(s);
    double q = rate > 0 ? frames_ahead(s, rate, sched_now()) : 0;
    pthread_mutex_unlock(&s->mu);
    if (rate <= 0) return 1;
    double t = ceil(q / rate);
    return t < 1 ? 1 : t > 30 ? 30 : (int)t;
}

void sched_get_stats(sched *s, sched_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    double now = sched_now();
    out->drain_frames_per_s = drain_rate(s);
    out->queued_frames = s->queued_frames;
    out->expected_wait_s =
        out->drain_frames_per_s > 0 ? frames_ahead(s, out->drain_frames_per_s, now) / out->drain_frames_per_s : 0;
    for (int w = 0; w < s->p.workers; w++)
        if (s->ws[w].running && s->p.worker_deadline_s > 0 && now - s->ws[w].t_start > s->p.worker_deadline_s)
            out->hung++;
    out->abandoned = s->abandoned;
    out->worker_deadline_s = s->p.worker_deadline_s;
    out->batches = s->batches;
    out->last_progress_s = s->last_progress;
    pthread_mutex_unlock(&s->mu);
}
