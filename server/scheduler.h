/* scheduler.h — the dynamic batcher: requests from every connection enter one bounded queue; worker
 * threads take batches of up to max_batch jobs as soon as that many are waiting or the oldest has
 * waited max_delay_us, whichever comes first. A job that arrives while a worker is idle starts at
 * once: max_delay_us applies only to jobs that arrived while every worker was busy (Triton's rule of
 * thumb: wait for company only when the hardware is busy anyway; delay_when_idle restores waiting).
 * The queue is bounded twice: by a count (max_queue) and by the expected wait, the frames queued
 * plus what the running batches still have to decode, divided by the measured drain rate (an exponentially weighted average of frames completed per
 * second of busy time, time constant SCHED_RATE_TAU_S); sched_retry_after_s gives a client the
 * time the queue needs to drain. A batch that runs longer than worker_deadline_s is abandoned: its
 * jobs are answered through the executor's abandon hook and the worker counts as hung (the watchdog
 * stops pinging) until its run returns. A batch always holds the oldest waiting job (so no job
 * starves) plus the waiting jobs closest to it in length (so padding stays small); jobs are batched
 * together only when they share a `group` (the model generation they were validated against).
 * With spreading on (sched_set_spread: for backends whose batch costs in proportion to its size and
 * whose workers each have a core, i.e. the CPU), a worker takes only its share of the waiting jobs,
 * ceil(waiting / idle workers), and lets the other idle workers start on the rest at once: 8 requests
 * and 2 idle CPU workers make two batches of 4 on two cores, not one of 8 on one core.
 *
 * Devices: each worker belongs to one device slot (sched_params.worker_device). A batch goes to the
 * device in rotation with the least work in progress (the frames of its running batches; ties: the
 * device whose last batch started longest ago): workers of other devices leave it to one of that
 * device's idle workers. A device taken out of rotation (sched_set_device_down) gets no batch; a
 * run may ask for a job to be queued again (sched_job.requeue: at the head, once per job, for
 * another device while one is in rotation) so that a
 * device's failure reaches its clients only when no other device is in rotation; with no device in
 * rotation, waiting jobs end with SCHED_NO_DEVICE and new ones are refused (SCHED_UNAVAILABLE).
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
    SCHED_NO_DEVICE,   /* every device was taken out of rotation before it ran */
} sched_outcome;

struct sched_job {
    /* Set by the submitter. */
    int frames;        /* length for bucketing; also counted for padding metrics */
    int batch_cap;     /* most jobs this job may share a batch with, itself included (>= 1) */
    const void *group; /* only jobs with the same group are batched together */
    void (*done)(sched_job *j, void *user);
    void *user;
    /* Set by the executor's run: queue this job again (at the head) instead of calling done(), unless
     * it was queued again before, the queue is closed or no device is in rotation (then done() is
     * called with the run's own outcome in the job's container). The scheduler clears it. */
    int requeue;
    /* Set by the scheduler before done(). */
    int requeued;      /* times it was queued again */
    int device;        /* device slot of the worker that ran it last */
    sched_outcome outcome;
    double t_submit, t_start, t_end; /* CLOCK_MONOTONIC seconds */
    int batch_size;
    int worker;
    /* Internal. */
    int idle_start; /* arrived while a worker was idle: starts without waiting for company */
    sched_job *prev, *next;
};

typedef struct {
    /* Runs n jobs (same group) on worker `worker` (0-based, stable per thread). */
    void (*run)(void *ctx, int worker, const void *group, sched_job **jobs, int n);
    void *ctx;
    /* Optional: marks a job of an abandoned batch failed (it ran past worker_deadline_s) before its
     * done() is called. Without it batches are never abandoned (a hung worker is only counted).
     * Only batches whose run called sched_batch_detach() are abandoned. */
    void (*abandon)(void *ctx, sched_job *j, double ran_s);
} sched_exec;

typedef struct {
    int workers;
    int max_batch;
    long long max_delay_us;
    int max_queue;
    int delay_when_idle;      /* 1: a job waits max_delay_us for company even when a worker is idle */
    double max_wait_s;        /* refuse a job whose expected wait exceeds this; 0: no bound */
    double worker_deadline_s; /* abandon a batch running longer than this; 0: never */
    int n_devices;            /* device slots, 1..SCHED_MAX_DEVICES (0: one) */
    const int *worker_device; /* [workers] each worker's slot in [0, n_devices) (NULL: all slot 0); copied */
} sched_params;

#define SCHED_MAX_DEVICES 16

/* SCHED_FULL: max_queue jobs wait, or the expected wait exceeds max_wait_s. SCHED_UNAVAILABLE: every
 * worker is hung or on a device out of rotation. */
typedef enum { SCHED_OK = 0, SCHED_FULL, SCHED_CLOSED, SCHED_NOMEM, SCHED_INVALID, SCHED_UNAVAILABLE } sched_status;

#define SCHED_RATE_TAU_S 10.0 /* the drain rate forgets busy time with this time constant */

sched_status sched_create(const sched_params *p, const sched_exec *x, sched **out);
/* Queues j, or refuses at once: SCHED_FULL when max_queue jobs wait, SCHED_CLOSED after
 * sched_cancel_waiting(). */
sched_status sched_submit(sched *s, sched_job *j);
/* New max_batch / max_delay_us / max_queue (workers is fixed at creation). */
void sched_set_limits(sched *s, int max_batch, long long max_delay_us, int max_queue);
/* New delay_when_idle, max_wait_s and worker_deadline_s (see sched_params). */
void sched_set_policy(sched *s, int delay_when_idle, double max_wait_s, double worker_deadline_s);
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

/* Takes device slot d out of rotation (down = 1) or puts it back (0). Taking the last one out ends
 * every waiting job with SCHED_NO_DEVICE. */
void sched_set_device_down(sched *s, int d, int down);
/* Device slots in rotation. */
int sched_devices_up(sched *s);
typedef struct {
    int down;               /* out of rotation */
    int workers, busy;      /* its workers, and those running a batch */
    double running_frames;  /* frames of its running batches (the load the dispatch compares) */
    double busy_s;          /* seconds with at least one of its batches running, since creation */
    double busy_fraction;   /* the same as a fraction of time, averaged over ~SCHED_RATE_TAU_S */
    long long batches;      /* batches its workers ran */
} sched_device_stats;
int sched_device_count(sched *s);
void sched_get_device(sched *s, int d, sched_device_stats *out);

/* Called by an executor's run on its worker thread. detach: the run holds nothing of its jobs any
 * more (inputs copied), so the batch may be abandoned past the deadline. commit: the run is about
 * to write its results into the jobs; returns 1 when they are still its own (they can no longer be
 * abandoned), 0 when the batch was abandoned (the jobs are answered and may be freed: touch none). */
void sched_batch_detach(void);
int sched_batch_commit(void);
/* From a run: 1 when no job is waiting (the worker will probably go idle after this batch). */
int sched_batch_queue_empty(void);

/* Seconds a client should wait before retrying: the expected wait (the time the queued frames and the
 * running batches' rest take at the measured drain rate), rounded up and clamped to [1, 30]; 1 while
 * no rate is known. */
int sched_retry_after_s(sched *s);
typedef struct {
    double drain_frames_per_s; /* 0 while unknown */
    double queued_frames;
    double expected_wait_s;    /* (queued + running batches' remaining frames) / drain rate; 0 while unknown */
    int hung;                  /* workers whose batch has run past worker_deadline_s */
    double worker_deadline_s;  /* the deadline in force (sched_set_policy) */
    long long abandoned;       /* batches abandoned so far */
    long long batches;         /* batches completed or abandoned so far */
    double last_progress_s;    /* sched_now() of the last batch start or end */
} sched_stats;
void sched_get_stats(sched *s, sched_stats *out);

double sched_now(void); /* CLOCK_MONOTONIC in seconds */

#endif
