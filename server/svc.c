/* svc.c — layer 3, the service (svc.h): engine generations, the batch executor, the scheduler's
 * set-up, every limit's one reader (the config hooks), admission, submission, reload and drain.
 * Thread-safety: see svc.h; the lifecycle functions run on the main thread only. */
#include "svc.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "eng_pcm.h"
#include "fault.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "srv.h"
#include "streams.h"

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

void svc_release_hangs(void)
{
    pthread_mutex_lock(&g_hang_mu);
    g_hang_released = 1;
    pthread_cond_broadcast(&g_hang_cv);
    pthread_mutex_unlock(&g_hang_mu);
}

void svc_abandon(void *ctx, sched_job *sj, double ran_s)
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
    rnnt_runner **runners; /* [n_slots * per_slot]; NULL for the workers of a slot that did not build */
    /* [n_runners] a second, small runner per worker for batches of at most SVC_SMALL_BATCH (NULL when
     * none: see small_runner_wanted) */
    rnnt_runner **small;
    int n_slots, per_slot;
    int first;             /* a runner that exists: the generation's backend, device and parameters */
    char slot_err[DEV_MAX][512]; /* why a slot has no runners ("" when it has) */
    char path[CFG_PATH_MAX];
    double warmup_s; /* max_batch and max_frames live in the runners' parameters only */
};

static void eng_destroy(eng *e)
{
    if (!e) return;
    for (int i = 0; i < e->n_runners && e->runners; i++) rnnt_runner_free(e->runners[i]);
    for (int i = 0; i < e->n_runners && e->small; i++) rnnt_runner_free(e->small[i]);
    free(e->runners);
    free(e->small);
    rnnt_model_free(e->model);
    free(e);
}

static int warm_up(eng *e, rnnt_runner *r, char *err, size_t errlen)
{
    const rnnt_model_info *info = rnnt_model_get_info(e->model);
    int max_frames = rnnt_runner_get_params(r)->max_frames;
    int frames = max_frames < ENG_WARMUP_FRAMES ? max_frames : ENG_WARMUP_FRAMES;
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

/* Small batches on a GPU (a lone request above all) get a runner of their own: a CUDA fp16 runner of
 * max_batch <= 16 (CU_PERSIST_AUTO_MAX_B in kernels/cu_persist.h; keep the two equal) runs each encoder
 * layer's recurrence as one persistent kernel with the weights on chip, a larger one per-step GEMMs or
 * layer streams, which cost a lone 10 s utterance on the shipped model ~1.5-3 ms more on the H100 (the
 * daemon's lone-request p50 7.3-7.8 ms without it, 5.9 with it). fp32 runners take the same path at
 * every size, so they get none (and stay token-exact and batch-invariant); nor does the CPU.
 * RNNTD_SMALL_RUNNER=0 turns it off (A/B runs). */
#define SVC_SMALL_BATCH 16
static int small_runner_wanted(const rnnt_runner *big)
{
    const char *env = getenv("RNNTD_SMALL_RUNNER");
    if (env && !strcmp(env, "0")) return 0;
    const rnnt_runner_params *p = rnnt_runner_get_params(big);
    return strcmp(rnnt_runner_backend_name(big), "cuda") == 0 && p->precision == RNNT_PRECISION_FP16 &&
           p->max_batch > SVC_SMALL_BATCH;
}

/* The runner for a batch of n on `worker`. */
static rnnt_runner *eng_runner_for(const eng *e, int worker, int n)
{
    return n <= SVC_SMALL_BATCH && e->small[worker] ? e->small[worker] : e->runners[worker];
}

/* Builds and warms up slot d's runners (its workers' indices); on failure frees them and says why. */
static int build_slot(eng *e, const rnnt_runner_params *base, const dev_slot *slot, int d, char *err, size_t errlen)
{
    rnnt_runner_params p = *base;
    p.device = slot->ordinal >= 0 ? slot->ordinal : 0;
    char msg[384];
    for (int k = 0; k < e->per_slot; k++) {
        int i = d * e->per_slot + k;
        if (rnnt_runner_create(e->model, &p, &e->runners[i], msg, sizeof msg) != RNNT_OK) {
            snprintf(err, errlen, "device %d: runner %d (backend %s): %s", d, i,
                     p.backend == RNNT_BACKEND_CPU ? "cpu" : p.backend == RNNT_BACKEND_CUDA ? "cuda" : "auto", msg);
        } else if (warm_up(e, e->runners[i], msg, sizeof msg)) {
            snprintf(err, errlen, "device %d: warm-up of runner %d failed: %s", d, i, msg);
        } else if (small_runner_wanted(e->runners[i])) {
            rnnt_runner_params ps = *rnnt_runner_get_params(e->runners[i]);
            ps.max_batch = SVC_SMALL_BATCH;
            if (rnnt_runner_create(e->model, &ps, &e->small[i], msg, sizeof msg) != RNNT_OK)
                snprintf(err, errlen, "device %d: small-batch runner %d: %s", d, i, msg);
            else if (warm_up(e, e->small[i], msg, sizeof msg))
                snprintf(err, errlen, "device %d: warm-up of small-batch runner %d failed: %s", d, i, msg);
            else
                continue;
        } else {
            continue;
        }
        for (int j = d * e->per_slot; j <= i; j++) {
            rnnt_runner_free(e->runners[j]);
            rnnt_runner_free(e->small[j]);
            e->runners[j] = e->small[j] = NULL;
        }
        return -1;
    }
    return 0;
}

int eng_create(const cfg *c, const dev_slot *slots, int n_slots, int per_slot, eng **out, char *err, size_t errlen)
{
    *out = NULL;
    eng *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    atomic_init(&e->refs, 1);
    snprintf(e->path, sizeof e->path, "%s", c->model_path);
    char msg[512];
    if (rnnt_model_load(c->model_path, &e->model, msg, sizeof msg) != RNNT_OK) {
        snprintf(err, errlen, "model.path %s: %s", c->model_path, msg);
        eng_destroy(e);
        return -1;
    }
    e->n_slots = n_slots;
    e->per_slot = per_slot;
    e->n_runners = n_slots * per_slot;
    e->runners = calloc((size_t)e->n_runners, sizeof *e->runners);
    e->small = calloc((size_t)e->n_runners, sizeof *e->small);
    if (!e->runners || !e->small) {
        snprintf(err, errlen, "out of memory");
        eng_destroy(e);
        return -1;
    }
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = c->backend == CFG_BACKEND_CPU    ? RNNT_BACKEND_CPU
                : c->backend == CFG_BACKEND_CUDA ? RNNT_BACKEND_CUDA
                                                 : RNNT_BACKEND_AUTO;
    p.precision = c->precision == CFG_PRECISION_FP32 ? RNNT_PRECISION_FP32 : RNNT_PRECISION_FP16;
    p.max_batch = (int)c->max_batch;
    p.max_frames = (int)c->max_frames;
    p.cpu_threads = (int)c->cpu_threads;
    double t0 = sched_now();
    /* A slot that cannot build (its GPU is gone or full) is left out; the others serve. */
    int built = 0;
    e->first = -1;
    for (int d = 0; d < n_slots; d++) {
        if (build_slot(e, &p, &slots[d], d, e->slot_err[d], sizeof e->slot_err[d])) continue;
        if (e->first < 0) e->first = d * per_slot;
        built++;
    }
    if (built == 0) {
        snprintf(err, errlen, "%s", e->slot_err[0]);
        eng_destroy(e);
        return -1;
    }
    e->warmup_s = sched_now() - t0;
    *out = e;
    return 0;
}

int eng_slot_ok(const eng *e, int d) { return d >= 0 && d < e->n_slots && e->runners[d * e->per_slot] != NULL; }
const char *eng_slot_error(const eng *e, int d) { return d >= 0 && d < e->n_slots ? e->slot_err[d] : ""; }
const char *eng_slot_device(const eng *e, int d)
{
    return eng_slot_ok(e, d) ? rnnt_runner_device_name(e->runners[d * e->per_slot]) : "";
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
const char *eng_backend(const eng *e) { return rnnt_runner_backend_name(e->runners[e->first]); }
const char *eng_device(const eng *e) { return rnnt_runner_device_name(e->runners[e->first]); }
const rnnt_runner_params *eng_runner_params(const eng *e) { return rnnt_runner_get_params(e->runners[e->first]); }
const char *eng_path(const eng *e) { return e->path; }
int eng_max_batch(const eng *e) { return eng_runner_params(e)->max_batch; }
int eng_max_frames(const eng *e) { return eng_runner_params(e)->max_frames; }
double eng_warmup_s(const eng *e) { return e->warmup_s; }

/* Jobs of a batch that failed on its device go back to the queue for another device (once each,
 * the scheduler's rule) when one is in rotation; their status stays as the answer otherwise. */
static int retry_elsewhere(srv *s, int device, sched_job **jobs, int n)
{
    if (s->n_devs < 2) return 0;
    int up = sched_devices_up(s->sched) - !atomic_load(&s->devs[device].failed);
    if (up < 1) return 0;
    for (int i = 0; i < n; i++) jobs[i]->requeue = 1;
    return 1;
}

/* Whether a batch of features goes through rnnt_runner_submit/collect: on a runner whose submit
 * returns before decoding (CUDA), submit's copy into the runner's pinned staging (split over the
 * staging helpers) is the copy that frees the batch from the requests, instead of a copy into one
 * buffer on this thread and then the runner's own copy into pinned memory (two passes over 82 MB at
 * batch 256). RNNTD_RUNNER_SUBMIT=1 / 0 forces it on (the CPU runner then decodes inside submit,
 * before the batch is detached) or off. */
static int use_submit(rnnt_runner *r)
{
    const char *env = getenv("RNNTD_RUNNER_SUBMIT");
    if (env && (!strcmp(env, "0") || !strcmp(env, "1"))) return env[0] == '1';
    return rnnt_runner_overlaps(r);
}

/* The batch's inputs are copied first (into one buffer, or by rnnt_runner_submit into the runner's
 * staging), so that once the scheduler may abandon the batch (sched_batch_detach) nothing the run
 * reads belongs to the requests any more; results are written into the jobs only after
 * sched_batch_commit says they are still this run's. */
void svc_run(void *ctx, int worker, const void *group, sched_job **jobs, int n)
{
    srv *s = ctx;
    /* Held for the run: a run abandoned past its deadline can outlive every request of its generation. */
    eng *e = eng_ref((eng *)group);
    int dim = rnnt_model_get_info(e->model)->feature_dim;
    long long frames = 0, longest = 0;
    size_t floats = 0;
    int n_pcm = 0;
    for (int i = 0; i < n; i++) {
        eng_job *j = (eng_job *)jobs[i];
        frames += j->frames;
        floats += j->n_samples ? j->n_samples : (size_t)j->frames * (size_t)dim;
        n_pcm += j->n_samples > 0;
        if (j->frames > longest) longest = j->frames;
    }
    size_t nb = n > 0 ? (size_t)n : 1;
    int device = worker >= 0 && worker < s->n_workers ? s->worker_device[worker] : 0;
    int have_runner = worker >= 0 && worker < e->n_runners && e->runners[worker];
    rnnt_runner *r = have_runner ? eng_runner_for(e, worker, n) : NULL;
    int submit = r && n_pcm == 0 && use_submit(r);
    rnnt_input *in = calloc(nb, sizeof *in);
    rnnt_result *res = calloc(nb, sizeof *res);
    float *feats = submit ? NULL : malloc((floats > 0 ? floats : 1) * sizeof *feats);
    size_t *n_samples = calloc(nb, sizeof *n_samples);
    if (!in || !res || (!feats && !submit) || !n_samples || !have_runner) {
        int nomem = !in || !res || (!feats && !submit) || !n_samples;
        for (int i = 0; i < n; i++) {
            eng_job *j = (eng_job *)jobs[i];
            j->status = nomem ? RNNT_ERR_NOMEM : RNNT_ERR_DEVICE;
            snprintf(j->err, sizeof j->err, "%s", nomem ? "out of memory" : "no runner on this device in this generation");
        }
        if (!nomem) retry_elsewhere(s, device, jobs, n); /* its slot did not build on the last reload */
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
        if (submit) {
            in[i].features = j->features;
        } else {
            if (cnt) memcpy(feats + off, j->features, cnt * sizeof *feats);
            in[i].features = feats + off;
        }
        in[i].frames = j->frames;
        in[i].finite_checked = 1; /* body.c rejected non-finite values with 422 while parsing */
        off += cnt;
    }
    char err[256] = "";
    char fault[32];
    snprintf(fault, sizeof fault, "device%d_fail", device);
    int injected = rnnt_fault_hit(fault); /* as a failed launch on this device would end */
    if (injected) snprintf(err, sizeof err, "kernel launch failed (injected fault %s)", fault);
    double t0 = sched_now();
    rnnt_status st = injected ? RNNT_ERR_DEVICE : submit ? rnnt_runner_submit(r, n, in, err, sizeof err) : RNNT_OK;
    sched_batch_detach();
    if (rnnt_fault_hit("worker_hang")) injected_hang(worker);
    if (st == RNNT_OK)
        st = submit ? rnnt_runner_collect(r, res, NULL, NULL, err, sizeof err)
                    : eng_pcm_decode(r, n, in, n_samples, res, err, sizeof err);
    double dt = sched_now() - t0;
    int device_error = dev_batch_done(s, device, st, err);
    dev_sample_memory(s, device);
    free(feats);
    free(n_samples);
    if (st != RNNT_OK) {
        char q[300];
        log_quote(q, sizeof q, err);
        log_msg(LOG_ERROR, "msg=\"batch failed\" size=%d worker=%d device=%d err=%s", n, worker, device, q);
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
    /* A job the scheduler will run again on another device is not a failure yet. */
    int retry = device_error ? retry_elsewhere(s, device, jobs, n) : 0;
    for (int i = 0; i < n; i++) {
        eng_job *j = (eng_job *)jobs[i];
        j->compute_s = dt;
        if (st != RNNT_OK) {
            j->status = st;
            snprintf(j->err, sizeof j->err, "%s", err);
            if (!retry || jobs[i]->requeued > 0) metrics_failed_decode(); /* requeued once already: not again */
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
    if (sched_batch_queue_empty()) rnnt_runner_trim(r);
    eng_unref(e);
}

/* ---- the limits: one reader per key, called through the config table's hooks (cfg_apply) ---- */

static void apply_limits(void *owner, const cfg *c)
{
    srv *s = owner;
    atomic_store(&s->max_body_bytes, c->max_body_bytes);
    atomic_store(&s->max_json_bytes, c->max_json_bytes);
    atomic_store(&s->max_audio_s, c->max_audio_s);
    atomic_store(&s->max_pending_bytes, c->max_pending_bytes);
    atomic_store(&s->request_timeout_s, c->request_timeout_s);
}

static void apply_sched(void *owner, const cfg *c)
{
    srv *s = owner;
    if (!s->sched) return; /* svc_start applies these when it creates the scheduler */
    /* max_batch 0: unchanged. A batch's size is bounded by its generation (each job's batch_cap). */
    sched_set_limits(s->sched, 0, c->max_delay_us, (int)c->max_queue);
    sched_set_policy(s->sched, (int)c->delay_when_idle, (double)c->max_queue_wait_ms * 1e-3, (double)c->worker_deadline_s);
}

static void apply_log(void *owner, const cfg *c)
{
    srv *s = owner;
    atomic_store(&s->log_requests, (int)c->log_requests);
    log_set_level((log_level)c->log_level);
}

static void apply_drain(void *owner, const cfg *c)
{
    srv *s = owner;
    atomic_store(&s->drain_timeout_s, c->drain_timeout_s);
}

/* CFG_APPLY_ENGINE and CFG_APPLY_AUTH keys are read when svc_reload builds a new generation and
 * token (on every SIGHUP, changed or not: the model files and the token file may have changed). */
static const cfg_hooks g_hooks = {{
    [CFG_APPLY_LIMITS] = apply_limits,
    [CFG_APPLY_SCHED] = apply_sched,
    [CFG_APPLY_LOG] = apply_log,
    [CFG_APPLY_DRAIN] = apply_drain,
}};

int svc_log_requests(srv *s) { return atomic_load(&s->log_requests); }
int svc_draining(srv *s) { return atomic_load(&s->draining); }

/* ---- lifecycle ---- */

void svc_resolve_auto(cfg *c, long long workers_running)
{
    int cuda = c->backend == CFG_BACKEND_CUDA || (c->backend == CFG_BACKEND_AUTO && rnnt_cuda_available());
    cpu_set_t set;
    long ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    /* CPU runner sets share the cores: together they get one worker per core. */
    long slots = !cuda && c->devices.n > 1 ? c->devices.n : 1;
    long cpu_workers = ncpu / slots > 1 ? ncpu / slots : 1;
    if (workers_running > 0) c->workers = workers_running;
    else if (c->workers == 0) c->workers = cuda ? 2 : (cpu_workers < 16 ? cpu_workers : 16);
    long total = c->workers * slots;
    if (c->cpu_threads == 0 && !cuda) c->cpu_threads = ncpu / total > 1 ? ncpu / total : 1;
}

int svc_load_auth(const cfg *c, auth **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!c->auth_token_file[0]) return 0;
    int world = 0;
    if (auth_load(c->auth_token_file, out, &world, err, errlen)) return -1;
    if (world)
        log_msg(LOG_WARN, "msg=\"the token file can be read by every user; chmod 600 it\" file=%s", c->auth_token_file);
    return 0;
}

int svc_start(srv *s, const cfg *c, auth *a, char *err, size_t errlen)
{
    s->c = *c;
    if (dev_resolve(c, s->devs, &s->n_devs, err, errlen)) return -1;
    s->n_workers = (int)c->workers * s->n_devs;
    for (int w = 0; w < s->n_workers; w++) s->worker_device[w] = w / (int)c->workers;
    s->auth = a;
    cfg_apply(NULL, &s->c, &g_hooks, s);
    /* The scheduler's own max_batch is the one cap: each batch is bounded by its generation's
     * runners (the jobs' batch_cap), which is where batching.max_batch lives. */
    sched_params sp = {s->n_workers, RNNT_MAX_BATCH, c->max_delay_us, (int)c->max_queue, (int)c->delay_when_idle,
                       (double)c->max_queue_wait_ms * 1e-3, (double)c->worker_deadline_s, s->n_devs, s->worker_device};
    sched_exec sx = {svc_run, s, svc_abandon};
    if (sched_create(&sp, &sx, &s->sched) != SCHED_OK) {
        snprintf(err, errlen, "cannot start the scheduler");
        return -1;
    }
    metrics_set_sched(s->sched);
    return 0;
}

/* A generation starts serving: the scheduler spreads batches over idle workers when the backend is
 * the CPU (each worker a core, a batch's cost in proportion to its size); on the GPU one larger batch
 * costs about what a small one does, so it keeps forming the largest batch it can. */
static void engine_ready(srv *s, eng *e, const char *what)
{
    int spread = strcmp(eng_backend(e), "cpu") == 0;
    sched_set_spread(s->sched, spread);
    /* Slots that built are (back) in rotation; the others leave it with their reason. */
    for (int d = 0; d < s->n_devs; d++) {
        if (eng_slot_ok(e, d)) {
            dev_restore(s, d);
            dev_sample_memory(s, d);
        } else {
            dev_fail(s, d, eng_slot_error(e, d));
        }
    }
    const rnnt_model_info *i = eng_info(e);
    char dev[160];
    log_quote(dev, sizeof dev, eng_device(e));
    log_msg(LOG_INFO,
            "msg=%s model=%s path=%s backend=%s device=%s feature_dim=%d vocab=%d params=%lld "
            "devices=%d devices_up=%d workers=%d max_batch=%d max_frames=%d spread=%s warmup_s=%.3f",
            what, i->name, eng_path(e), eng_backend(e), dev, i->feature_dim, i->vocab_size, i->n_parameters,
            s->n_devs, sched_devices_up(s->sched), s->n_workers, eng_max_batch(e), eng_max_frames(e), spread ? "on" : "off",
            eng_warmup_s(e));
    notify_send("READY=1\nSTATUS=ready: model %s on %s, listening on %s port %u", i->name, eng_backend(e), s->c.listen,
                s->port);
}

int svc_load(srv *s, char *err, size_t errlen)
{
    eng *e = NULL;
    if (eng_create(&s->c, s->devs, s->n_devs, (int)s->c.workers, &e, err, errlen)) return -1;
    pthread_mutex_lock(&s->mu);
    s->engine = e;
    pthread_mutex_unlock(&s->mu);
    /* Injected faults (RNNTD_FAULT) fire from now on: after start-up and warm-up, and before
     * /health/ready says 200, so every request a client sends after seeing it ready meets them. */
    rnnt_fault_arm();
    atomic_store(&s->ready, 1);
    engine_ready(s, e, "ready");
    return 0;
}

/* Makes e and a current; the previous generation is freed once the last request validated against
 * it is answered, the previous token at once. */
static void swap_current(srv *s, eng *e, auth *a)
{
    pthread_mutex_lock(&s->mu);
    eng *old_eng = s->engine;
    auth *old_auth = s->auth;
    s->engine = e;
    s->auth = a;
    pthread_mutex_unlock(&s->mu);
    eng_unref(old_eng);
    auth_free(old_auth);
}

void svc_reload(srv *s, cfg *nc, int config_ok, const char *config_err)
{
    char err[1024];
    auth *na = NULL;
    eng *ne = NULL;
    snprintf(err, sizeof err, "%s", config_ok ? "" : config_err);
    if (config_ok) svc_resolve_auto(nc, s->c.workers);
    if (!config_ok || svc_load_auth(nc, &na, err, sizeof err) || eng_create(nc, s->devs, s->n_devs, (int)s->c.workers, &ne, err, sizeof err)) {
        char q[1100];
        log_quote(q, sizeof q, err);
        log_msg(LOG_ERROR, "msg=\"reload failed; still serving the previous configuration\" err=%s", q);
        atomic_fetch_add(&s->reloads_failed, 1);
        auth_free(na);
        notify_send("READY=1\nSTATUS=reload failed: %.200s", err);
        return;
    }
    const char *which = NULL;
    /* Restart-only keys keep their running values; say so instead of ignoring them silently. */
    if (!cfg_restart_keys_equal(&s->c, nc, &which))
        log_msg(LOG_WARN, "msg=\"some changed keys need a restart and keep their running values\" first=%s", which);
    cfg old = s->c;
    for (const cfg_key *k = cfg_keys(); k->name; k++) {
        if (k->apply == CFG_APPLY_RESTART) continue;
        size_t sz = k->type == CFG_T_STR || k->type == CFG_T_LIST ? k->size : sizeof(long long);
        memcpy((char *)&s->c + k->offset, (const char *)nc + k->offset, sz);
    }
    swap_current(s, ne, na);
    cfg_apply(&old, &s->c, &g_hooks, s);
    atomic_fetch_add(&s->reloads_ok, 1);
    engine_ready(s, ne, "reloaded");
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static void wait_until(_Atomic long long *v, double deadline)
{
    while (atomic_load(v) > 0 && sched_now() < deadline) sleep_s(0.005);
}

void svc_drain_begin(srv *s)
{
    atomic_store(&s->draining, 1);
    notify_send("STOPPING=1\nSTATUS=draining: answering accepted requests");
    log_msg(LOG_INFO, "msg=\"shutting down: draining\" in_flight=%lld drain_timeout_s=%lld", atomic_load(&s->in_flight),
            atomic_load(&s->drain_timeout_s));
}

void svc_drain(srv *s)
{
    double timeout_s = (double)atomic_load(&s->drain_timeout_s);
    sched_flush(s->sched);
    double deadline = sched_now() + timeout_s;
    long long streams_left = strm_drain(s, timeout_s);
    if (streams_left > 0) log_msg(LOG_WARN, "msg=\"drain timeout with streams open\" streams=%lld", streams_left);
    wait_until(&s->in_flight, deadline);
    long long left = atomic_load(&s->in_flight);
    /* From here no job is accepted (late ones get 503), so nothing new gets suspended. */
    int n = sched_cancel_waiting(s->sched);
    if (left > 0) log_msg(LOG_WARN, "msg=\"drain timeout\" in_flight=%lld cancelled=%d", left, n);
    /* Batches already running always finish (decoding is finite); their connections get resumed. */
    if (sched_wait_idle(s->sched, 600.0)) log_msg(LOG_ERROR, "msg=\"engine workers still busy after 600 s\"");
    /* Resumed connections still have to be answered by the transport's loops before it may stop. */
    wait_until(&s->suspended, sched_now() + 10.0);
    if (atomic_load(&s->suspended) > 0)
        log_msg(LOG_ERROR, "msg=\"connections still suspended after the drain\" n=%lld", atomic_load(&s->suspended));
    /* A connection accepted just before the quiesce can still bring a request, answered 503 at once;
     * stopping the transport would cut that answer off. Stop only after 100 ms without any (2 s at most). */
    double end = sched_now() + 2.0, quiet_since = 0;
    while (sched_now() < end) {
        if (atomic_load(&s->in_flight) > 0) quiet_since = 0;
        else if (quiet_since == 0) quiet_since = sched_now();
        else if (sched_now() - quiet_since >= 0.1) break;
        sleep_s(0.005);
    }
}

void svc_stop(srv *s)
{
    svc_release_hangs(); /* RNNTD_FAULT=worker_hang: let the hung worker return */
    metrics_set_sched(NULL);
    sched_free(s->sched);
    s->sched = NULL;
    swap_current(s, NULL, NULL);
}

/* ---- requests ---- */

eng *svc_engine(srv *s)
{
    pthread_mutex_lock(&s->mu);
    eng *e = eng_ref(s->engine);
    pthread_mutex_unlock(&s->mu);
    return e;
}

void svc_request_begin(srv *s) { atomic_fetch_add(&s->in_flight, 1); }
void svc_request_end(srv *s) { atomic_fetch_sub(&s->in_flight, 1); }
void svc_suspend_begin(srv *s) { atomic_fetch_add(&s->suspended, 1); }
void svc_suspend_end(srv *s) { atomic_fetch_sub(&s->suspended, 1); }

int svc_authorised(srv *s, const char *authorization)
{
    pthread_mutex_lock(&s->mu);
    int ok = auth_check(s->auth, authorization);
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

int svc_admit(srv *s, srv_err *e)
{
    if (atomic_load(&s->draining)) {
        metrics_reject_inc(REJECT_DRAINING);
        srv_err_set(e, 503, "shutting_down", "the server is shutting down");
        return -1;
    }
    if (!atomic_load(&s->ready)) {
        metrics_reject_inc(REJECT_NOT_READY);
        srv_err_set(e, 503, "not_ready", "the model is still loading");
        return -1;
    }
    return 0;
}

size_t svc_body_limit(srv *s, int json, const char **key)
{
    long long max_body = atomic_load(&s->max_body_bytes), max_json = atomic_load(&s->max_json_bytes);
    int use_json = json && max_json < max_body;
    if (key) *key = json ? "json" : "body";
    return (size_t)(use_json ? max_json : max_body);
}

int svc_reserve(srv *s, size_t *held, size_t n, srv_err *e)
{
    long long max = atomic_load(&s->max_pending_bytes);
    long long cur = atomic_load(&s->pending_bytes);
    do {
        if (cur + (long long)n > max) {
            metrics_reject_inc(REJECT_MEMORY);
            srv_err_set(e, 503, "overloaded", "too many request bytes held in memory; retry");
            return -1;
        }
    } while (!atomic_compare_exchange_weak(&s->pending_bytes, &cur, cur + (long long)n));
    *held += n;
    return 0;
}

void svc_release(srv *s, size_t *held, size_t n)
{
    if (n > *held) n = *held;
    atomic_fetch_sub(&s->pending_bytes, (long long)n);
    *held -= n;
}

audio_body_limits svc_audio_limits(srv *s, const eng *e)
{
    audio_body_limits lim = {(size_t)atomic_load(&s->max_body_bytes), (double)atomic_load(&s->max_audio_s),
                             eng_max_frames(e)};
    return lim;
}

void svc_request_id(srv *s, char *out, size_t n)
{
    unsigned long long k = atomic_fetch_add(&s->next_id, 1) + 1;
    snprintf(out, n, "%s-%llu", s->id_prefix, k);
}

int svc_submit(srv *s, eng *e, eng_job *j, void (*done)(sched_job *, void *), void *user, srv_err *err)
{
    j->sj.frames = j->frames;
    j->sj.batch_cap = eng_max_batch(e); /* batching.max_batch of the generation the job was validated against */
    j->sj.group = e;
    j->sj.done = done;
    j->sj.user = user;
    sched_status st = sched_submit(s->sched, &j->sj);
    if (st == SCHED_OK) return 0;
    if (st == SCHED_FULL) {
        metrics_reject_inc(REJECT_QUEUE_FULL);
        srv_err_set(err, 503, "queue_full", "the request queue is full (batching.max_queue or max_queue_wait_ms); retry later");
        err->retry_after_s = sched_retry_after_s(s->sched);
    } else if (st == SCHED_CLOSED) {
        metrics_reject_inc(REJECT_DRAINING);
        srv_err_set(err, 503, "shutting_down", "the server is shutting down");
    } else if (st == SCHED_UNAVAILABLE) {
        srv_err_set(err, 503, "unavailable",
                    "no engine worker can run it: every worker is hung (batching.worker_deadline_s) or on a device out of rotation (see /health)");
        err->retry_after_s = 30;
    } else {
        srv_err_set(err, 500, "internal", "could not queue the request");
    }
    return -1;
}

int svc_finish(srv *s, const eng_job *j, double audio_s, long long bytes_in, const char *request_id, srv_err *e)
{
    (void)s;
    if (j->sj.outcome == SCHED_CANCELLED) {
        srv_err_set(e, 503, "shutting_down", "the server shut down before this request was decoded");
        return -1;
    }
    if (j->sj.outcome == SCHED_NO_DEVICE) {
        srv_err_set(e, 503, "unavailable", "every device was taken out of rotation (see /health)");
        e->retry_after_s = 30;
        return -1;
    }
    switch (j->status) {
    case RNNT_OK:
        metrics_transcription(audio_s, j->sj.t_start - j->sj.t_submit, j->compute_s, bytes_in);
        return 0;
    case RNNT_ERR_NUMERIC:
        srv_err_set(e, 422, "numeric_error", "%s", j->err);
        return -1;
    case RNNT_ERR_NOMEM:
        srv_err_set(e, 503, "out_of_memory", "%s", j->err);
        return -1;
    default:
        log_msg(LOG_ERROR, "msg=\"engine error\" id=%s status=%d", request_id, (int)j->status);
        srv_err_set(e, 500, "internal", "engine error: %s", j->err);
        return -1;
    }
}

void svc_snapshot_get(srv *s, svc_snapshot *o)
{
    memset(o, 0, sizeof *o);
    o->ready = atomic_load(&s->ready);
    o->draining = atomic_load(&s->draining);
    o->in_flight = atomic_load(&s->in_flight);
    o->queue_depth = s->sched ? sched_queue_depth(s->sched) : 0;
    o->workers_busy = s->sched ? sched_busy_workers(s->sched) : 0;
    o->workers = s->n_workers;
    o->pending_bytes = atomic_load(&s->pending_bytes);
    o->reloads_ok = atomic_load(&s->reloads_ok);
    o->reloads_failed = atomic_load(&s->reloads_failed);
    o->uptime_s = sched_now() - s->t_start_mono;
    o->start_time_s = s->t_start_unix;
    o->engine = svc_engine(s);
    o->n_devices = s->n_devs;
    for (int d = 0; d < s->n_devs && s->sched; d++) {
        struct svc_device_snapshot *v = &o->devices[d];
        const dev_slot *ds = &s->devs[d];
        sched_device_stats st;
        sched_get_device(s->sched, d, &st);
        v->ordinal = ds->ordinal;
        v->failed = atomic_load(&ds->failed);
        o->devices_up += !v->failed;
        v->workers = st.workers;
        v->busy = st.busy;
        v->batches = st.batches;
        v->errors = atomic_load(&ds->errors);
        v->streams = strm_device_streams(s, d);
        v->mem_used = atomic_load(&ds->mem_used);
        v->mem_total = atomic_load(&ds->mem_total);
        v->busy_s = st.busy_s;
        v->busy_fraction = st.busy_fraction;
        v->running_frames = st.running_frames;
        snprintf(v->name, sizeof v->name, "%s", o->engine ? eng_slot_device(o->engine, d) : "");
        dev_error(s, d, v->error, sizeof v->error);
    }
}

int svc_workers(srv *s) { return s->n_workers; }
int svc_devices(srv *s) { return s->n_devs; }
int svc_device_ordinal(srv *s, int d) { return d >= 0 && d < s->n_devs ? s->devs[d].ordinal : -1; }
int svc_device_failed(srv *s, int d) { return d >= 0 && d < s->n_devs ? atomic_load(&s->devs[d].failed) : 1; }
