/* eng.c — model + per-worker runners, warm-up, and the batch executor. */
#include "eng.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_pcm.h"
#include "fault.h"
#include "log.h"
#include "metrics.h"

/* RNNTD_FAULT=worker_hang: the batch's worker hangs until eng_release_hangs() (shutdown) or an hour. */
static pthread_mutex_t g_hang_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_hang_cv = PTHREAD_COND_INITIALIZER;
static int g_hang_released;

static void injected_hang(int worker)
{
    log_msg(LOG_WARN, "msg=\"injected fault: worker hangs in its batch\" fault=worker_hang worker=%d", worker);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 3600;
    pthread_mutex_lock(&g_hang_mu);
    while (!g_hang_released)
        if (pthread_cond_timedwait(&g_hang_cv, &g_hang_mu, &ts)) break;
    pthread_mutex_unlock(&g_hang_mu);
}

void eng_release_hangs(void)
{
    pthread_mutex_lock(&g_hang_mu);
    g_hang_released = 1;
    pthread_cond_broadcast(&g_hang_cv);
    pthread_mutex_unlock(&g_hang_mu);
}

void eng_abandon(void *ctx, sched_job *sj, double ran_s)
{
    (void)ctx;
    eng_job *j = (eng_job *)sj;
    j->status = RNNT_ERR_DEVICE;
    j->compute_s = ran_s;
    snprintf(j->err, sizeof j->err,
             "the batch ran %.1f s, past batching.worker_deadline_s; its worker is out of service", ran_s);
    metrics_failed_decode();
}

#define ENG_WARMUP_FRAMES 200

struct eng {
    _Atomic int refs;
    rnnt_model *model;
    int n_runners;
    rnnt_runner **runners;
    char path[CFG_PATH_MAX];
    int max_batch, max_frames;
    double warmup_s;
};

static void eng_destroy(eng *e)
{
    if (!e) return;
    for (int i = 0; i < e->n_runners; i++) rnnt_runner_free(e->runners[i]);
    free(e->runners);
    rnnt_model_free(e->model);
    free(e);
}

static int warm_up(eng *e, rnnt_runner *r, char *err, size_t errlen)
{
    const rnnt_model_info *info = rnnt_model_get_info(e->model);
    int frames = e->max_frames < ENG_WARMUP_FRAMES ? e->max_frames : ENG_WARMUP_FRAMES;
    float *zeros = calloc((size_t)frames * (size_t)info->feature_dim, sizeof(float));
    if (!zeros) {
        snprintf(err, errlen, "warm-up: out of memory");
        return -1;
    }
    rnnt_input in = {zeros, frames, 1};
    rnnt_result res = {0};
    rnnt_status st = rnnt_runner_decode(r, 1, &in, &res, NULL, err, errlen);
    rnnt_result_clear(&res);
    if (!st && eng_pcm_wanted(rnnt_runner_backend_name(r))) { /* the GPU frontend too: made on its first batch */
        rnnt_audio_input a = {zeros, NULL, (size_t)frames * (size_t)info->feature_dim, 1};
        st = rnnt_runner_decode_audio(r, 1, &a, &res, NULL, NULL, err, errlen);
        rnnt_result_clear(&res);
    }
    free(zeros);
    return st == RNNT_OK ? 0 : -1;
}

int eng_create(const cfg *c, int workers, eng **out, char *err, size_t errlen)
{
    *out = NULL;
    eng *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    atomic_init(&e->refs, 1);
    snprintf(e->path, sizeof e->path, "%s", c->model_path);
    e->max_batch = (int)c->max_batch;
    e->max_frames = (int)c->max_frames;
    char msg[512];
    if (rnnt_model_load(c->model_path, &e->model, msg, sizeof msg) != RNNT_OK) {
        snprintf(err, errlen, "model.path %s: %s", c->model_path, msg);
        eng_destroy(e);
        return -1;
    }
    e->runners = calloc((size_t)workers, sizeof *e->runners);
    if (!e->runners) {
        snprintf(err, errlen, "out of memory");
        eng_destroy(e);
        return -1;
    }
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = c->backend == CFG_BACKEND_CPU    ? RNNT_BACKEND_CPU
                : c->backend == CFG_BACKEND_CUDA ? RNNT_BACKEND_CUDA
                                                 : RNNT_BACKEND_AUTO;
    p.device = (int)c->device;
    p.precision = c->precision == CFG_PRECISION_FP32 ? RNNT_PRECISION_FP32 : RNNT_PRECISION_FP16;
    p.max_batch = (int)c->max_batch;
    p.max_frames = (int)c->max_frames;
    p.cpu_threads = (int)c->cpu_threads;
    double t0 = sched_now();
    for (int i = 0; i < workers; i++) {
        if (rnnt_runner_create(e->model, &p, &e->runners[i], msg, sizeof msg) != RNNT_OK) {
            snprintf(err, errlen, "runner %d (backend %s): %s", i, cfg_backend_name(c->backend), msg);
            eng_destroy(e);
            return -1;
        }
        e->n_runners++;
        if (warm_up(e, e->runners[i], msg, sizeof msg)) {
            snprintf(err, errlen, "warm-up of runner %d failed: %s", i, msg);
            eng_destroy(e);
            return -1;
        }
    }
    e->warmup_s = sched_now() - t0;
    *out = e;
    return 0;
}

eng *eng_ref(eng *e)
{
    if (e) atomic_fetch_add(&e->refs, 1);
    return e;
}

void eng_unref(eng *e)
{
    if (e && atomic_fetch_sub(&e->refs, 1) == 1) eng_destroy(e);
}

const rnnt_model *eng_model(const eng *e) { return e->model; }
const rnnt_model_info *eng_info(const eng *e) { return rnnt_model_get_info(e->model); }
const char *eng_backend(const eng *e) { return rnnt_runner_backend_name(e->runners[0]); }
const char *eng_device(const eng *e) { return rnnt_runner_device_name(e->runners[0]); }
const rnnt_runner_params *eng_runner_params(const eng *e) { return rnnt_runner_get_params(e->runners[0]); }
const char *eng_path(const eng *e) { return e->path; }
int eng_max_batch(const eng *e) { return e->max_batch; }
int eng_max_frames(const eng *e) { return e->max_frames; }
double eng_warmup_s(const eng *e) { return e->warmup_s; }

/* The batch's inputs are copied first (one buffer), so that once the scheduler may abandon the batch
 * (sched_batch_detach) nothing the run reads belongs to the requests any more; results are written
 * into the jobs only after sched_batch_commit says they are still this run's. */
void eng_run(void *ctx, int worker, const void *group, sched_job **jobs, int n)
{
    (void)ctx;
    /* Held for the run: a run abandoned past its deadline can outlive every request of its generation. */
    eng *e = eng_ref((eng *)group);
    int dim = rnnt_model_get_info(e->model)->feature_dim;
    long long frames = 0, longest = 0;
    size_t floats = 0;
    for (int i = 0; i < n; i++) {
        eng_job *j = (eng_job *)jobs[i];
        frames += j->frames;
        floats += j->n_samples ? j->n_samples : (size_t)j->frames * (size_t)dim;
        if (j->frames > longest) longest = j->frames;
    }
    size_t nb = n > 0 ? (size_t)n : 1;
    rnnt_input *in = calloc(nb, sizeof *in);
    rnnt_result *res = calloc(nb, sizeof *res);
    float *feats = malloc((floats > 0 ? floats : 1) * sizeof *feats);
    size_t *n_samples = calloc(nb, sizeof *n_samples);
    if (!in || !res || !feats || !n_samples || worker < 0 || worker >= e->n_runners) {
        int nomem = !in || !res || !feats || !n_samples;
        for (int i = 0; i < n; i++) {
            eng_job *j = (eng_job *)jobs[i];
            j->status = nomem ? RNNT_ERR_NOMEM : RNNT_ERR_INVALID;
            snprintf(j->err, sizeof j->err, "%s", nomem ? "out of memory" : "no runner for this worker");
        }
        free(in);
        free(res);
        free(feats);
        free(n_samples);
        eng_unref(e);
        return;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        eng_job *j = (eng_job *)jobs[i];
        size_t cnt = j->n_samples ? j->n_samples : (size_t)j->frames * (size_t)dim;
        n_samples[i] = j->n_samples;
        if (cnt) memcpy(feats + off, j->features, cnt * sizeof *feats);
        in[i].features = feats + off;
        in[i].frames = j->frames;
        in[i].finite_checked = 1; /* body.c rejected non-finite values with 422 while parsing */
        off += cnt;
    }
    sched_batch_detach();
    if (rnnt_fault_hit("worker_hang")) injected_hang(worker);
    char err[256] = "";
    double t0 = sched_now();
    rnnt_status st = eng_pcm_decode(e->runners[worker], n, in, n_samples, res, err, sizeof err);
    double dt = sched_now() - t0;
    free(feats);
    free(n_samples);
    if (st != RNNT_OK) {
        char q[300];
        log_quote(q, sizeof q, err);
        log_msg(LOG_ERROR, "msg=\"batch failed\" size=%d worker=%d err=%s", n, worker, q);
    }
    if (!sched_batch_commit()) {
        /* Given up past the deadline: the jobs were answered and may be gone. */
        log_msg(LOG_WARN, "msg=\"a batch given up past the deadline returned; worker back in service\" worker=%d ran_s=%.3f",
                worker, dt);
        for (int i = 0; i < n; i++) rnnt_result_clear(&res[i]);
        free(in);
        free(res);
        eng_unref(e);
        return;
    }
    for (int i = 0; i < n; i++) {
        eng_job *j = (eng_job *)jobs[i];
        j->compute_s = dt;
        if (st != RNNT_OK) {
            j->status = st;
            snprintf(j->err, sizeof j->err, "%s", err);
            metrics_failed_decode();
        } else {
            j->status = res[i].status;
            j->result = res[i]; /* the job owns the arrays now */
            if (res[i].status != RNNT_OK) {
                snprintf(j->err, sizeof j->err, "decoding produced non-finite values (%s)",
                         rnnt_status_str(res[i].status));
                metrics_failed_decode();
            }
        }
    }
    metrics_batch(n, dt, frames, longest * n - frames);
    free(in);
    free(res);
    /* Going idle: give back scratch grown for a large batch (kept while batches follow each other). */
    if (sched_batch_queue_empty()) rnnt_runner_trim(e->runners[worker]);
    eng_unref(e);
}
