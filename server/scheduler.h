/* scheduler.h — the dynamic batcher: requests from every connection enter one bounded queue; worker
 * threads take batches of up to max_batch jobs as soon as that many are waiting or the oldest has
 * waited max_delay_us, whichever comes first. A batch always holds the oldest waiting job (so no job
 * starves) plus the waiting jobs closest to it in length (so padding stays small); jobs are batched
 * together only when they share a `group` (the model generation they were validated against).
 * With spreading on (sched_set_spread: for backends whose batch costs in proportion to its size and
 * whose workers each have a core, i.e. the CPU), a worker takes only its share of the waiting jobs,
 * ceil(waiting / idle workers), and lets the other idle workers start on the rest at once: 8 requests
 * and 2 idle CPU workers make two batches of 4 on two cores, not one of 8 on one core.
 *
 * The scheduler knows nothing about models: a sched_exec runs a batch. Thread-safety: every
 * function may be called from any thread; one mutex guards the queue (held only to link, unlink and
 * pick jobs, never while a batch runs). A job's done() runs on a worker thread, outside the lock,
 * exactly once per submitted job; after done() the scheduler never touches the job again. */
#ifndef SRV_SCHED_H
#define SRV_SCHED_H

typedef struct sched sched;
typedef struct sched_job sched_job;

typedef enum {
    SCHED_RAN = 0,     /* the batch ran; the executor's own status is in the job's container */
    SCHED_CANCELLED,   /* drained away at shutdown before it ran */
} sched_outcome;

struct sched_job {
    /* Set by the submitter. */
    int frames;        /* length for bucketing; also counted for padding metrics */
    int batch_cap;     /* most jobs this job may share a batch with, itself included (>= 1) */
    const void *group; /* only jobs with the same group are batched together */
    void (*done)(sched_job *j, void *user);
    void *user;
    /* Set by the scheduler before done(). */
    sched_outcome outcome;
    double t_submit, t_start, t_end; /* CLOCK_MONOTONIC seconds */
    int batch_size;
    int worker;
    /* Internal. */
    sched_job *prev, *next;
};

typedef struct {
    /* Runs n jobs (same group) on worker `worker` (0-based, stable per thread). */
    void (*run)(void *ctx, int worker, const void *group, sched_job **jobs, int n);
    void *ctx;
} sched_exec;

typedef struct {
    int workers;
    int max_batch;
    long long max_delay_us;
    int max_queue;
} sched_params;

typedef enum { SCHED_OK = 0, SCHED_FULL, SCHED_CLOSED, SCHED_NOMEM, SCHED_INVALID } sched_status;

sched_status sched_create(const sched_params *p, const sched_exec *x, sched **out);
/* Queues j, or refuses at once: SCHED_FULL when max_queue jobs wait, SCHED_CLOSED after
 * sched_cancel_waiting(). */
sched_status sched_submit(sched *s, sched_job *j);
/* New max_batch / max_delay_us / max_queue (workers is fixed at creation). */
void sched_set_limits(sched *s, int max_batch, long long max_delay_us, int max_queue);
/* Spreading on or off (off at creation); see above. */
void sched_set_spread(sched *s, int on);
/* Shutdown, step 1: from now on batches start without waiting for max_delay (jobs are still
 * accepted: requests that were already being received when the drain began still get decoded). */
void sched_flush(sched *s);
/* Waits until no job is queued or running, or until `timeout_s` passes: 0 when idle, -1 on timeout. */
int sched_wait_idle(sched *s, double timeout_s);
/* Shutdown, step 2: refuses all further jobs (SCHED_CLOSED), removes every waiting job and calls
 * its done() with SCHED_CANCELLED; returns how many. Running batches finish normally. */
int sched_cancel_waiting(sched *s);
/* Cancels what still waits, waits for running batches, joins the workers, frees. */
void sched_free(sched *s);

int sched_queue_depth(sched *s);
int sched_busy_workers(sched *s);

double sched_now(void); /* CLOCK_MONOTONIC in seconds */

#endif
