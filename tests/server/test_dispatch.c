/* test_dispatch.c — the scheduler's device dispatch (issue 18) with a fake backend: an executor
 * that records which device slot ran each job, can hold batches at a gate, and can fail on chosen
 * devices the way svc_run does (asking for its jobs to be queued again). Least work in progress
 * wins, ties go round the devices, a device out of rotation gets nothing, failed jobs move to
 * another device once, and with no device left waiting jobs end and new ones are refused. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "scheduler.h"

typedef struct {
    sched_job sj;
    int id;
    int runs;            /* times the executor ran it */
    int ran_on[4];       /* device slot of each run */
    int done_count;
    sched_outcome outcome;
} djob;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate_closed;
    int held;            /* runs waiting at the gate */
    int fail_device;     /* runs on this slot ask for a requeue (-1: none) */
    int done_total;
} F = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, -1, 0};

static void reset(void)
{
    pthread_mutex_lock(&F.mu);
    F.gate_closed = 0;
    F.held = 0;
    F.fail_device = -1;
    F.done_total = 0;
    pthread_mutex_unlock(&F.mu);
}

static void run(void *ctx, int worker, const void *group, sched_job **jobs, int n)
{
    (void)ctx;
    (void)worker;
    (void)group;
    pthread_mutex_lock(&F.mu);
    for (int i = 0; i < n; i++) {
        djob *j = (djob *)jobs[i];
        if (j->runs < 4) j->ran_on[j->runs] = jobs[i]->device;
        j->runs++;
    }
    F.held++;
    pthread_cond_broadcast(&F.cv);
    while (F.gate_closed) pthread_cond_wait(&F.cv, &F.mu);
    F.held--;
    int fail = jobs[0]->device == F.fail_device;
    pthread_mutex_unlock(&F.mu);
    for (int i = 0; fail && i < n; i++) jobs[i]->requeue = 1; /* as svc_run after a device error */
}

static void on_done(sched_job *j, void *user)
{
    djob *d = user;
    pthread_mutex_lock(&F.mu);
    d->done_count++;
    d->outcome = j->outcome;
    F.done_total++;
    pthread_cond_broadcast(&F.cv);
    pthread_mutex_unlock(&F.mu);
}

static void init_job(djob *j, int id, int frames)
{
    static const int group = 1;
    memset(j, 0, sizeof *j);
    j->id = id;
    j->sj.frames = frames;
    j->sj.batch_cap = 1;
    j->sj.group = &group;
    j->sj.done = on_done;
    j->sj.user = j;
}

/* Waits until `n` runs are held at the gate, or the done count reaches `n` when done is set. */
static int wait_for(int n, int done)
{
    double end = sched_now() + 5;
    pthread_mutex_lock(&F.mu);
    while ((done ? F.done_total : F.held) < n && sched_now() < end) {
        pthread_mutex_unlock(&F.mu);
        usleep(1000);
        pthread_mutex_lock(&F.mu);
    }
    int ok = (done ? F.done_total : F.held) >= n;
    pthread_mutex_unlock(&F.mu);
    return ok;
}

static void gate(int closed)
{
    pthread_mutex_lock(&F.mu);
    F.gate_closed = closed;
    pthread_cond_broadcast(&F.cv);
    pthread_mutex_unlock(&F.mu);
}

/* devices slots of `per` workers each; batches of one job, no delay. */
static sched *make(int devices, int per)
{
    int wd[64];
    for (int w = 0; w < devices * per; w++) wd[w] = w / per;
    sched_params p = {devices * per, 1, 0, 64, 0, 0, 0, devices, wd};
    sched_exec x = {run, NULL, NULL};
    sched *s = NULL;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_OK);
    assert_int_equal(sched_device_count(s), devices);
    return s;
}

/* A long batch runs on device 0; the next job goes to the idle device 1, and so does the one after
 * it although device 0 still has an idle worker: device 1's 10 running frames are less than 0's 1000. */
static void test_least_work_in_progress(void **st)
{
    (void)st;
    reset();
    sched *s = make(2, 2);
    djob a, b, c;
    init_job(&a, 1, 1000);
    init_job(&b, 2, 10);
    init_job(&c, 3, 10);
    gate(1);
    assert_int_equal(sched_submit(s, &a.sj), SCHED_OK);
    assert_true(wait_for(1, 0));
    assert_int_equal(sched_submit(s, &b.sj), SCHED_OK);
    assert_true(wait_for(2, 0));
    assert_int_equal(sched_submit(s, &c.sj), SCHED_OK);
    assert_true(wait_for(3, 0));
    sched_device_stats d0, d1;
    sched_get_device(s, 0, &d0);
    sched_get_device(s, 1, &d1);
    assert_int_equal(d0.busy, 1);
    assert_int_equal(d1.busy, 2);
    assert_true(d0.running_frames == 1000 && d1.running_frames == 20);
    gate(0);
    assert_true(wait_for(3, 1));
    assert_int_equal(a.ran_on[0], 0);
    assert_int_equal(b.ran_on[0], 1);
    assert_int_equal(c.ran_on[0], 1);
    sched_get_device(s, 0, &d0);
    sched_get_device(s, 1, &d1);
    assert_int_equal(d0.batches, 1);
    assert_int_equal(d1.batches, 2);
    assert_true(d0.running_frames == 0 && d1.running_frames == 0);
    assert_true(d0.busy_s > 0 && d1.busy_s > 0);
    assert_true(d0.busy_fraction > 0 && d0.busy_fraction <= 1);
    sched_free(s);
}

/* Jobs one after another on idle devices: the device whose last batch started longest ago takes the
 * next, so they go round the devices. */
static void test_ties_go_round(void **st)
{
    (void)st;
    reset();
    sched *s = make(3, 1);
    djob j[6];
    for (int i = 0; i < 6; i++) {
        init_job(&j[i], i, 100);
        assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
        assert_true(wait_for(i + 1, 1));
        usleep(2000); /* the worker's bookkeeping after done() */
    }
    for (int i = 0; i < 6; i++) assert_int_equal(j[i].ran_on[0], i % 3);
    sched_free(s);
}

/* A device out of rotation gets no batch; back in rotation it gets them again. */
static void test_device_down_gets_nothing(void **st)
{
    (void)st;
    reset();
    sched *s = make(2, 1);
    sched_set_device_down(s, 0, 1);
    assert_int_equal(sched_devices_up(s), 1);
    djob j[5];
    for (int i = 0; i < 4; i++) {
        init_job(&j[i], i, 100);
        assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    }
    assert_true(wait_for(4, 1));
    for (int i = 0; i < 4; i++) assert_int_equal(j[i].ran_on[0], 1);
    sched_device_stats d0;
    sched_get_device(s, 0, &d0);
    assert_int_equal(d0.down, 1);
    assert_int_equal(d0.batches, 0);
    sched_set_device_down(s, 0, 0);
    usleep(2000);
    init_job(&j[4], 4, 100);
    assert_int_equal(sched_submit(s, &j[4].sj), SCHED_OK); /* device 0 started longest ago (never) */
    assert_true(wait_for(5, 1));
    assert_int_equal(j[4].ran_on[0], 0);
    sched_free(s);
}

/* A run on a failing device asks for a requeue: the job runs again on the other device and is
 * answered once; where every device fails, it is answered after its second run. */
static void test_failed_jobs_move_once(void **st)
{
    (void)st;
    reset();
    sched *s = make(2, 1);
    pthread_mutex_lock(&F.mu);
    F.fail_device = 0;
    pthread_mutex_unlock(&F.mu);
    djob j[4];
    for (int i = 0; i < 4; i++) {
        init_job(&j[i], i, 100);
        assert_int_equal(sched_submit(s, &j[i].sj), SCHED_OK);
    }
    assert_true(wait_for(4, 1));
    for (int i = 0; i < 4; i++) {
        assert_int_equal(j[i].done_count, 1);
        assert_int_equal(j[i].outcome, SCHED_RAN);
        assert_int_equal(j[i].sj.device, 1);     /* answered from device 1 */
        assert_true(j[i].runs == 1 || (j[i].runs == 2 && j[i].ran_on[0] == 0 && j[i].sj.requeued == 1));
    }
    sched_free(s);

    reset();
    s = make(1, 1);
    pthread_mutex_lock(&F.mu);
    F.fail_device = 0;
    pthread_mutex_unlock(&F.mu);
    djob k;
    init_job(&k, 9, 100);
    assert_int_equal(sched_submit(s, &k.sj), SCHED_OK);
    assert_true(wait_for(1, 1));
    usleep(2000);
    assert_int_equal(k.runs, 2);
    assert_int_equal(k.done_count, 1);
    assert_int_equal(k.sj.requeued, 1);
    sched_free(s);
}

/* The last device out of rotation: the waiting job ends with SCHED_NO_DEVICE, new jobs are refused,
 * the running batches finish normally. */
static void test_no_device_left(void **st)
{
    (void)st;
    reset();
    sched *s = make(2, 1);
    djob a, b, c, d;
    init_job(&a, 1, 100);
    init_job(&b, 2, 100);
    init_job(&c, 3, 100);
    init_job(&d, 4, 100);
    gate(1);
    assert_int_equal(sched_submit(s, &a.sj), SCHED_OK);
    assert_int_equal(sched_submit(s, &b.sj), SCHED_OK);
    assert_true(wait_for(2, 0));
    assert_int_equal(sched_submit(s, &c.sj), SCHED_OK); /* waits: both workers hold a batch */
    sched_set_device_down(s, 0, 1);
    assert_int_equal(c.done_count, 0);
    sched_set_device_down(s, 1, 1);
    assert_true(wait_for(1, 1));
    assert_int_equal(c.done_count, 1);
    assert_int_equal(c.outcome, SCHED_NO_DEVICE);
    assert_int_equal(c.runs, 0);
    assert_int_equal(sched_submit(s, &d.sj), SCHED_UNAVAILABLE);
    gate(0);
    assert_true(wait_for(3, 1));
    assert_int_equal(a.outcome, SCHED_RAN);
    assert_int_equal(b.outcome, SCHED_RAN);
    assert_int_equal(sched_wait_idle(s, 2.0), 0);
    sched_free(s);
}

static void test_invalid_devices(void **st)
{
    (void)st;
    int wd[2] = {0, 2};
    sched_params p = {2, 1, 0, 4, 0, 0, 0, 2, wd};
    sched_exec x = {run, NULL, NULL};
    sched *s = NULL;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_INVALID); /* worker 1 on slot 2 of 2 */
    p.n_devices = SCHED_MAX_DEVICES + 1;
    wd[1] = 1;
    assert_int_equal(sched_create(&p, &x, &s), SCHED_INVALID);
    assert_null(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_least_work_in_progress), cmocka_unit_test(test_ties_go_round),
        cmocka_unit_test(test_device_down_gets_nothing), cmocka_unit_test(test_failed_jobs_move_once),
        cmocka_unit_test(test_no_device_left),          cmocka_unit_test(test_invalid_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
