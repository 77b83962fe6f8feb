/* test_sched.c — the batcher with a recording executor: batch size and delay limits, length
 * bucketing, groups, spreading over idle workers, the bounded queue, cancellation, and a
 * multi-threaded stress run. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "scheduler.h"

#define MAX_REC 4096

typedef struct {
    sched_job sj;
    int id;
    int done_count;
    int batch_no; /* which recorded batch ran it */
} tjob;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate_closed;           /* executor blocks while set */
    int n_batches;
    int sizes[MAX_REC];
    int ids[MAX_REC][64];
    const void *groups[MAX_REC];
    int running, max_running;
    int done_total;
    int run_delay_us;
} R;

static void rec_reset(void)
{
    pthread_mutex_lock(&R.mu);
    R.gate_closed = 0;
    R.n_batches = 0;
    R.running = R.max_running = 0;
    R.done_total = 0;
    R.run_delay_us = 0;
    pthread_mutex_unlock(&R.mu);
}

static void run(void *ctx, int worker, const void *group, sched_job **jobs, int n)
{
    (void)ctx;
    (void)worker;
    pthread_mutex_lock(&R.mu);
    while (R.gate_closed) pthread_cond_wait(&R.cv, &R.mu);
    int b = R.n_batches++;
    R.running++;
    if (R.running > R.max_running) R.max_running = R.running;
    if (b < MAX_REC) {
        R.sizes[b] = n;
        R.groups[b] = group;
        for (int i = 0; i < n && i < 64; i++) R.ids[b][i] = ((tjob *)jobs[i])->id;
    }
    pthread_mutex_unlock(&R.mu);
    for (int i = 0; i < n; i++) {
        if (jobs[i]->group != group) fail_msg("a batch mixed groups");
        ((tjob *)jobs[i])->batch_no = b;
    }
    if (R.run_delay_us) usleep((useconds_t)R.run_delay_us);
    pthread_mutex_lock(&R.mu);
    R.running--;
    pthread_mutex_unlock(&R.mu);
}

static void on_done(sched_job *j, void *user)
{
    (void)user;
    pthread_mutex_lock(&R.mu);
    ((tjob *)j)->done_count++;
    R.done_total++;
    pthread_cond_broadcast(&R.cv);
    pthread_mutex_unlock(&R.mu);
}

static void init_job(tjob *t, int id, int frames, const void *group)
{
    memset(t, 0, sizeof *t);
    t->id = id;
    t->sj.frames = frames;
    t->sj.batch_cap = 1024;
    t->sj.group = group;
    t->sj.done = on_done;
    t->sj.user = t;
}

static int wait_done(int total, double timeout_s)
{
    double end = sched_now() + timeout_s;
    pthread_mutex_lock(&R.mu);
    while (R.done_total < total && sched_now() < end) {
        pthread_mutex_unlock(&R.mu);
        usleep(1000);
        pthread_mutex_lock(&R.mu);
    }
    int ok = R.done_total >= total;
    pthread_mutex_unlock(&R.mu);
    return ok;
}

static void gate(int closed)
{
    pthread_mutex_lock(&R.mu);
    R.gate_closed = closed;
    pthread_cond_broadcast(&R.cv);
    pthread_mutex_unlock(&R.mu);
}

/* The tests written before idle workers started at once use the old rule (delay_when_idle): they
 * hold jobs in the queue with a long max_delay to form batches of a known shape. */
static sched *make(int workers, int max_batch, long long delay_us, int max_queue)
{
    sched_params p = {workers, max_batch, delay_us, max_queue, 1, 0, 0, 1, NULL};
    sched_exec x = {run, NULL, NULL};
    sched *s = NULL;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_OK);
    return s;
}

static const int G1 = 1, G2 = 2;

/* A lone job waits max_delay for company, then runs alone. */
static void test_delay_then_alone(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 8, 50000, 16);
    tjob j;
    init_job(&j, 1, 100, &G1);
    assert_int_equal(sched_submit(s, &j.sj), SCHED_OK);
    assert_true(wait_done(1, 5));
    double waited = j.sj.t_start - j.sj.t_submit;
    assert_true(waited >= 0.045);
    assert_true(waited < 1.0);
    assert_int_equal(j.sj.batch_size, 1);
    assert_int_equal(j.sj.outcome, SCHED_RAN);
    assert_int_equal(j.done_count, 1);
    sched_free(s);
}

/* max_batch jobs arriving together run as one batch at once, without waiting for the delay. */
static void test_full_batch_runs_at_once(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 4, 10 * 1000 * 1000, 16);
    tjob j[4];
    for (int i = 0; i < 4; i++) init_job(&j[i], i, 100 + i, &G1);
    double t0 = sched_now();
    for (int i = 0; i < 4; i++) assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    assert_true(wait_done(4, 5));
    assert_true(sched_now() - t0 < 2.0); /* far below the 10 s delay */
    assert_int_equal(R.n_batches, 1);
    assert_int_equal(R.sizes[0], 4);
    for (int i = 0; i < 4; i++) assert_int_equal(j[i].sj.batch_size, 4);
    sched_free(s);
}

/* Fewer than max_batch jobs: they go together when the oldest's delay is up. */
static void test_partial_batch_after_delay(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 8, 100000, 16);
    tjob j[3];
    for (int i = 0; i < 3; i++) init_job(&j[i], i, 100, &G1);
    for (int i = 0; i < 3; i++) assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    assert_true(wait_done(3, 5));
    assert_int_equal(R.n_batches, 1);
    assert_int_equal(R.sizes[0], 3);
    assert_true(j[0].sj.t_start - j[0].sj.t_submit >= 0.095);
    sched_free(s);
}

/* Jobs queued behind a busy worker: each batch holds the oldest plus the jobs nearest in length,
 * and is sorted by length. */
static void test_length_bucketing(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 3, 0, 64);
    tjob blocker;
    init_job(&blocker, 99, 10, &G1);
    gate(1);
    assert_int_equal(sched_submit(s, &blocker.sj), SCHED_OK);
    /* Wait until the worker holds the blocker. */
    for (int i = 0; i < 2000 && sched_busy_workers(s) == 0; i++) usleep(1000);
    assert_int_equal(sched_busy_workers(s), 1);
    static const int lens[9] = {100, 5000, 110, 4900, 105, 2000, 5100, 2100, 1900};
    tjob j[9];
    for (int i = 0; i < 9; i++) {
        init_job(&j[i], i, lens[i], &G1);
        assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    }
    assert_int_equal(sched_queue_depth(s), 9);
    gate(0);
    assert_true(wait_done(10, 5));
    assert_int_equal(R.n_batches, 4);
    /* Batch 1: oldest (100) with 105 and 110. Batch 2: oldest left (5000) with 4900, 5100.
     * Batch 3: 2000 with 1900, 2100. */
    int want[3][3] = {{0, 4, 2}, {3, 1, 6}, {8, 5, 7}};
    for (int b = 0; b < 3; b++) {
        assert_int_equal(R.sizes[b + 1], 3);
        for (int k = 0; k < 3; k++) assert_int_equal(R.ids[b + 1][k], want[b][k]);
    }
    sched_free(s);
}

static void test_groups_not_mixed(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 8, 20000, 64);
    tjob j[6];
    for (int i = 0; i < 6; i++) init_job(&j[i], i, 100, i % 2 ? &G2 : &G1);
    for (int i = 0; i < 6; i++) assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    assert_true(wait_done(6, 5));
    assert_int_equal(R.n_batches, 2);
    assert_int_equal(R.sizes[0], 3);
    assert_int_equal(R.sizes[1], 3);
    assert_ptr_not_equal(R.groups[0], R.groups[1]);
    sched_free(s);
}

/* A job's batch_cap (its runner's max_batch) bounds the batch it joins. */
static void test_batch_cap(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 16, 10 * 1000 * 1000, 64);
    tjob j[6];
    for (int i = 0; i < 6; i++) {
        init_job(&j[i], i, 100, &G1);
        j[i].sj.batch_cap = 2;
    }
    for (int i = 0; i < 6; i++) assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    assert_true(wait_done(6, 5));
    assert_int_equal(R.n_batches, 3);
    for (int b = 0; b < 3; b++) assert_int_equal(R.sizes[b], 2);
    sched_free(s);
}

/* Runs `n` jobs on 2 idle workers, with spreading on or off; when `cap_after` > 0, the jobs are queued
 * under a larger max_batch that then drops to cap_after (so both workers are idle and every job is
 * waiting when the batch is formed). Returns the recorded batch sizes, largest first, in sizes[2]. */
static int spread_run(int spread, int n, int cap_after, int sizes[3])
{
    rec_reset();
    R.run_delay_us = 50000; /* long enough for two batches to overlap */
    sched *s = make(2, 64, cap_after > 0 ? 1000000 : 200000, 128);
    sched_set_spread(s, spread);
    tjob *j = calloc((size_t)n, sizeof *j);
    for (int i = 0; i < n; i++) init_job(&j[i], i, 100 + i, &G1);
    for (int i = 0; i < n; i++) assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    if (cap_after > 0) sched_set_limits(s, cap_after, -1, -1);
    assert_true(wait_done(n, 10));
    int nb = R.n_batches;
    assert_true(nb >= 1 && nb <= 3);
    for (int b = 0; b < 3; b++) sizes[b] = b < nb ? R.sizes[b] : 0;
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (sizes[b] > sizes[a]) {
                int t = sizes[a];
                sizes[a] = sizes[b];
                sizes[b] = t;
            }
    for (int i = 0; i < n; i++) assert_int_equal(j[i].done_count, 1);
    int overlapped = R.max_running;
    sched_free(s);
    free(j);
    return overlapped;
}

/* Spreading: 8 jobs on 2 idle workers become two batches of 4 that run at the same time (without it,
 * one batch of 8); 20 jobs with max_batch 16 become 10 + 10 (without it, 16 + 4). */
static void test_spread(void **st)
{
    (void)st;
    int sz[3];
    assert_int_equal(spread_run(0, 8, 0, sz), 1);
    assert_int_equal(sz[0], 8);
    assert_int_equal(sz[1], 0);
    assert_int_equal(spread_run(1, 8, 0, sz), 2);
    assert_int_equal(sz[0], 4);
    assert_int_equal(sz[1], 4);
    spread_run(0, 20, 16, sz);
    assert_int_equal(sz[0], 16);
    assert_int_equal(sz[1], 4);
    assert_int_equal(spread_run(1, 20, 16, sz), 2);
    assert_int_equal(sz[0], 10);
    assert_int_equal(sz[1], 10);
    assert_int_equal(sz[2], 0);
}

/* The queue is bounded: one more than max_queue waiting is refused at once. */
static void test_queue_full(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 1, 0, 3);
    tjob blocker, j[4];
    init_job(&blocker, 99, 10, &G1);
    gate(1);
    assert_int_equal(sched_submit(s, &blocker.sj), SCHED_OK);
    for (int i = 0; i < 2000 && sched_busy_workers(s) == 0; i++) usleep(1000);
    for (int i = 0; i < 3; i++) {
        init_job(&j[i], i, 10, &G1);
        assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    }
    init_job(&j[3], 3, 10, &G1);
    double t0 = sched_now();
    assert_int_equal(sched_submit(s, &j[3].sj), SCHED_FULL);
    assert_true(sched_now() - t0 < 0.1);
    /* Raising the limit takes effect at once. */
    sched_set_limits(s, 1, 0, 4);
    assert_int_equal(sched_submit(s, &j[3].sj), SCHED_OK);
    gate(0);
    assert_true(wait_done(5, 5));
    sched_free(s);
}

/* flush: waiting jobs run at once, new ones are still taken. cancel: waiting jobs get CANCELLED
 * and new ones are refused. */
static void test_close_and_cancel(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 8, 10 * 1000 * 1000, 16);
    tjob a[2];
    for (int i = 0; i < 2; i++) {
        init_job(&a[i], i, 10, &G1);
        assert_int_equal(sched_submit(s, &a[i].sj), SCHED_OK);
    }
    sched_flush(s); /* the 10 s delay no longer applies */
    assert_true(wait_done(2, 5));
    assert_int_equal(a[0].sj.outcome, SCHED_RAN);
    tjob late;
    init_job(&late, 9, 10, &G1);
    assert_int_equal(sched_submit(s, &late.sj), SCHED_OK);
    assert_true(wait_done(3, 5));
    assert_int_equal(late.sj.outcome, SCHED_RAN);
    assert_int_equal(sched_wait_idle(s, 5), 0);
    assert_int_equal(sched_cancel_waiting(s), 0);
    assert_int_equal(sched_submit(s, &late.sj), SCHED_CLOSED);
    sched_free(s);

    rec_reset();
    s = make(1, 1, 0, 16);
    tjob blocker, w[3];
    init_job(&blocker, 99, 10, &G1);
    gate(1);
    assert_int_equal(sched_submit(s, &blocker.sj), SCHED_OK);
    for (int i = 0; i < 2000 && sched_busy_workers(s) == 0; i++) usleep(1000);
    for (int i = 0; i < 3; i++) {
        init_job(&w[i], i, 10, &G1);
        assert_int_equal(sched_submit(s, &w[i].sj), SCHED_OK);
    }
    assert_int_equal(sched_wait_idle(s, 0.05), -1); /* busy */
    assert_int_equal(sched_cancel_waiting(s), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(w[i].sj.outcome, SCHED_CANCELLED);
        assert_int_equal(w[i].done_count, 1);
    }
    gate(0);
    assert_int_equal(sched_wait_idle(s, 5), 0);
    assert_int_equal(blocker.sj.outcome, SCHED_RAN);
    assert_int_equal(blocker.done_count, 1);
    sched_free(s);
}

/* sched_free with jobs waiting cancels them (each done exactly once). */
static void test_free_cancels(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make(1, 8, 10 * 1000 * 1000, 16);
    tjob j[3];
    for (int i = 0; i < 3; i++) {
        init_job(&j[i], i, 10, &G1);
        assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    }
    sched_free(s);
    for (int i = 0; i < 3; i++) assert_int_equal(j[i].done_count, 1);
}

typedef struct {
    sched *s;
    tjob *jobs;
    int n;
    int full;
} producer;

static void *produce(void *arg)
{
    producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        while (sched_submit(p->s, &p->jobs[i].sj) == SCHED_FULL) {
            p->full++;
            usleep(200);
        }
    }
    return NULL;
}

/* Four producers, two workers: every job runs exactly once, no batch exceeds max_batch, both
 * workers run at the same time, and batches form. */
static void test_stress(void **st)
{
    (void)st;
    rec_reset();
    R.run_delay_us = 300;
    enum { P = 4, N = 400 };
    sched *s = make(2, 8, 2000, 32);
    static tjob jobs[P][N];
    producer pr[P];
    pthread_t th[P];
    for (int p = 0; p < P; p++) {
        for (int i = 0; i < N; i++) init_job(&jobs[p][i], p * N + i, 1 + (i * 37) % 500, &G1);
        pr[p] = (producer){s, jobs[p], N, 0};
        pthread_create(&th[p], NULL, produce, &pr[p]);
    }
    for (int p = 0; p < P; p++) pthread_join(th[p], NULL);
    assert_true(wait_done(P * N, 30));
    assert_int_equal(sched_wait_idle(s, 5), 0);
    int total = 0, multi = 0;
    for (int b = 0; b < R.n_batches && b < MAX_REC; b++) {
        assert_true(R.sizes[b] >= 1 && R.sizes[b] <= 8);
        total += R.sizes[b];
        multi += R.sizes[b] > 1;
    }
    assert_int_equal(total, P * N);
    assert_true(multi > 0);
    assert_int_equal(R.max_running, 2);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++) assert_int_equal(jobs[p][i].done_count, 1);
    sched_free(s);
}

static void test_invalid_params(void **st)
{
    (void)st;
    sched_params p = {0, 1, 0, 1, 0, 0, 0, 1, NULL};
    sched_exec x = {run, NULL, NULL};
    sched *s = NULL;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_INVALID);
    assert_null(s);
}

static sched *make_policy(int workers, int max_batch, long long delay_us, int max_queue, double max_wait_s,
                          double deadline_s, void (*abandon)(void *, sched_job *, double))
{
    sched_params p = {workers, max_batch, delay_us, max_queue, 0, max_wait_s, deadline_s, 1, NULL};
    sched_exec x = {run, NULL, abandon};
    sched *s = NULL;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_OK);
    return s;
}

/* A job that finds a worker idle starts at once (it used to wait max_delay for company); jobs that
 * arrive while every worker is busy still wait max_delay for company once a worker is free. */
static void test_idle_worker_starts_at_once(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make_policy(1, 8, 300000, 16, 0, 0, NULL);
    tjob a, b, c;
    init_job(&a, 1, 100, &G1);
    assert_int_equal(sched_submit(s, &a.sj), SCHED_OK);
    assert_true(wait_done(1, 5));
    assert_true(a.sj.t_start - a.sj.t_submit < 0.05); /* fails with the old rule: 0.3 s */
    assert_int_equal(a.sj.batch_size, 1);
    /* Busy worker: b and c queue behind a and then wait for company until b's delay is up. */
    gate(1);
    init_job(&a, 1, 100, &G1);
    assert_int_equal(sched_submit(s, &a.sj), SCHED_OK);
    usleep(20000); /* the worker took a and is held at the gate */
    init_job(&b, 2, 100, &G1);
    init_job(&c, 3, 100, &G1);
    assert_int_equal(sched_submit(s, &b.sj), SCHED_OK);
    assert_int_equal(sched_submit(s, &c.sj), SCHED_OK);
    usleep(10000);
    gate(0);
    assert_true(wait_done(4, 5));
    assert_int_equal(a.sj.batch_size, 1);
    assert_int_equal(b.sj.batch_size, 2);
    assert_int_equal(c.sj.batch_size, 2);
    assert_true(b.sj.t_start - b.sj.t_submit >= 0.28);
    /* delay_when_idle restores the old rule: a lone job waits the delay. */
    sched_set_policy(s, 1, 0, 0);
    init_job(&a, 1, 100, &G1);
    assert_int_equal(sched_submit(s, &a.sj), SCHED_OK);
    assert_true(wait_done(5, 5));
    assert_true(a.sj.t_start - a.sj.t_submit >= 0.28);
    sched_free(s);
}

/* The queue is bounded by its expected wait: queued frames / the measured drain rate. Before a rate
 * is measured only max_queue applies and Retry-After is 1; after, a job that would wait longer than
 * max_wait_s is refused, and Retry-After is the queue's drain time rounded up. */
static void test_wait_bound_and_retry_after(void **st)
{
    (void)st;
    rec_reset();
    sched *s = make_policy(1, 1, 0, 100000, 2.5, 0, NULL);
    assert_int_equal(sched_retry_after_s(s), 1);
    sched_stats ss;
    sched_get_stats(s, &ss);
    assert_true(ss.drain_frames_per_s == 0);
    /* Cold: nothing measured, so many jobs are admitted (only max_queue bounds them). */
    static tjob cold[300];
    gate(1);
    for (int i = 0; i < 300; i++) {
        init_job(&cold[i], i, 1000, &G1);
        assert_int_equal(sched_submit(s, &cold[i].sj), SCHED_OK);
    }
    R.run_delay_us = 2000; /* 1000 frames per 2 ms: ~500,000 frames/s */
    gate(0);
    assert_true(wait_done(300, 30));
    sched_get_stats(s, &ss);
    assert_true(ss.drain_frames_per_s > 50000 && ss.drain_frames_per_s < 600000);
    double rate = ss.drain_frames_per_s;
    /* Hold the worker, then fill the queue until the bound refuses. */
    gate(1);
    static tjob warm[4000];
    int admitted = 0;
    sched_status last = SCHED_OK;
    for (int i = 0; i < 4000; i++) {
        init_job(&warm[i], i, 1000, &G1);
        last = sched_submit(s, &warm[i].sj);
        if (last != SCHED_OK) break;
        admitted++;
    }
    assert_int_equal(last, SCHED_FULL);
    /* Admitted while queued / rate <= 2.5 s (the first job went to the held worker). */
    double expect = 2.5 * rate / 1000.0;
    assert_true(admitted >= (int)expect - 2 && admitted <= (int)expect + 3);
    assert_int_equal(sched_retry_after_s(s), 3);
    gate(0);
    assert_true(wait_done(300 + admitted, 60));
    assert_int_equal(sched_retry_after_s(s), 1); /* empty queue */
    sched_free(s);
}

/* A hung batch: past the deadline its jobs are answered through the abandon hook, the worker counts
 * as hung, other workers keep serving, and when the run finally returns it touches none of its jobs. */
static int g_abandoned;
static _Atomic int g_hang_gate;
static void abandon_rec(void *ctx, sched_job *j, double ran_s)
{
    (void)ctx;
    (void)ran_s;
    ((tjob *)j)->batch_no = -1;
    __atomic_fetch_add(&g_abandoned, 1, __ATOMIC_SEQ_CST);
}

static void run_hang(void *ctx, int worker, const void *group, sched_job **jobs, int n)
{
    (void)ctx;
    (void)worker;
    (void)group;
    int hang = ((tjob *)jobs[0])->id < 0;
    sched_batch_detach();
    while (hang && atomic_load(&g_hang_gate)) usleep(1000);
    if (!sched_batch_commit()) return;
    for (int i = 0; i < n; i++) ((tjob *)jobs[i])->batch_no = 7;
}

static void test_deadline_abandons_hung_batch(void **st)
{
    (void)st;
    rec_reset();
    g_abandoned = 0;
    atomic_store(&g_hang_gate, 1);
    sched_params p = {2, 1, 0, 16, 0, 0, 0.2, 1, NULL};
    sched_exec x = {run_hang, NULL, abandon_rec};
    sched *s = NULL;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_OK);
    tjob h, ok, h2;
    init_job(&h, -1, 10, &G1);
    assert_int_equal(sched_submit(s, &h.sj), SCHED_OK);
    assert_true(wait_done(1, 5));
    double answered = h.sj.t_end - h.sj.t_start;
    assert_true(answered >= 0.2 && answered < 1.0);
    assert_int_equal(h.batch_no, -1);
    assert_int_equal(g_abandoned, 1);
    sched_stats ss;
    sched_get_stats(s, &ss);
    assert_int_equal(ss.hung, 1);
    assert_int_equal(ss.abandoned, 1);
    /* The other worker serves. */
    init_job(&ok, 2, 10, &G1);
    assert_int_equal(sched_submit(s, &ok.sj), SCHED_OK);
    assert_true(wait_done(2, 5));
    assert_int_equal(ok.batch_no, 7);
    /* Both hung: refused at once. */
    init_job(&h2, -2, 10, &G1);
    assert_int_equal(sched_submit(s, &h2.sj), SCHED_OK);
    assert_true(wait_done(3, 5));
    init_job(&ok, 3, 10, &G1);
    assert_int_equal(sched_submit(s, &ok.sj), SCHED_UNAVAILABLE);
    /* The hangs end: the runs return without touching their (answered) jobs, workers serve again. */
    h.batch_no = h2.batch_no = 99;
    atomic_store(&g_hang_gate, 0);
    usleep(50000);
    assert_int_equal(h.batch_no, 99);
    assert_int_equal(h2.batch_no, 99);
    assert_int_equal(h.done_count, 1);
    sched_get_stats(s, &ss);
    assert_int_equal(ss.hung, 0);
    init_job(&ok, 4, 10, &G1);
    assert_int_equal(sched_submit(s, &ok.sj), SCHED_OK);
    assert_true(wait_done(4, 5));
    assert_int_equal(ok.batch_no, 7);
    sched_free(s);
}

int main(void)
{
    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_then_alone),  cmocka_unit_test(test_full_batch_runs_at_once),
        cmocka_unit_test(test_partial_batch_after_delay), cmocka_unit_test(test_length_bucketing),
        cmocka_unit_test(test_groups_not_mixed),  cmocka_unit_test(test_batch_cap), cmocka_unit_test(test_spread),
        cmocka_unit_test(test_queue_full),        cmocka_unit_test(test_close_and_cancel),
        cmocka_unit_test(test_free_cancels),      cmocka_unit_test(test_stress),
        cmocka_unit_test(test_invalid_params),    cmocka_unit_test(test_idle_worker_starts_at_once),
        cmocka_unit_test(test_wait_bound_and_retry_after), cmocka_unit_test(test_deadline_abandons_hung_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
