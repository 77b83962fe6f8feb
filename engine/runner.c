/* runner.c — the public decoding entry points: picks a backend, validates every input, sizes the
 * results, and turns tokens into text. Backends only compute. Also the fault-injection table
 * (engine/shared/fault.h).
 * Thread safety: a runner is used by one thread at a time (rnnt.h); the fault table is parsed once
 * (pthread_once) and armed atomically, so any thread may ask rnnt_fault_hit. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "fault.h"

/* ---- fault injection (fault.h): a few named counters, parsed once ---- */

#define FAULT_MAX 8
static struct {
    char name[32];
    _Atomic long long left; /* fires while > 0; -1: always */
} g_faults[FAULT_MAX];
static int g_n_faults, g_fault_status;
static char g_fault_desc[256] = "none";
static _Atomic int g_fault_armed;
static pthread_once_t g_fault_once = PTHREAD_ONCE_INIT;

static void fault_parse(void)
{
    const char *env = getenv("RNNTD_FAULT");
    if (!env || !*env) return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env);
    g_fault_desc[0] = '\0';
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        long long count = 1;
        if (colon) {
            *colon = '\0';
            char *end;
            if (!strcmp(colon + 1, "always")) count = -1;
            else {
                count = strtoll(colon + 1, &end, 10);
                if (end == colon + 1 || *end || count < -1 || count == 0) {
                    snprintf(g_fault_desc, sizeof g_fault_desc, "RNNTD_FAULT: bad count in \"%s\"", env);
                    g_fault_status = -1;
                    g_n_faults = 0;
                    return;
                }
            }
        }
        if (!*tok || strlen(tok) >= sizeof g_faults[0].name || g_n_faults == FAULT_MAX) {
            snprintf(g_fault_desc, sizeof g_fault_desc, "RNNTD_FAULT: bad entry in \"%s\"", env);
            g_fault_status = -1;
            g_n_faults = 0;
            return;
        }
        snprintf(g_faults[g_n_faults].name, sizeof g_faults[0].name, "%s", tok);
        atomic_store(&g_faults[g_n_faults].left, count);
        size_t l = strlen(g_fault_desc);
        snprintf(g_fault_desc + l, sizeof g_fault_desc - l, "%s%s:%lld", l ? "," : "", tok, count);
        g_n_faults++;
    }
    g_fault_status = g_n_faults;
}

int rnnt_fault_init(char *desc, size_t n)
{
    pthread_once(&g_fault_once, fault_parse);
    if (desc && n) snprintf(desc, n, "%s", g_fault_desc);
    return g_fault_status;
}

void rnnt_fault_arm(void) { atomic_store(&g_fault_armed, 1); }

int rnnt_fault_hit(const char *name)
{
    if (!atomic_load(&g_fault_armed)) return 0;
    pthread_once(&g_fault_once, fault_parse);
    for (int i = 0; i < g_n_faults; i++) {
        if (strcmp(g_faults[i].name, name)) continue;
        long long left = atomic_load(&g_faults[i].left);
        while (left != 0) {
            if (left < 0) return 1;
            if (atomic_compare_exchange_weak(&g_faults[i].left, &left, left - 1)) return 1;
        }
        return 0;
    }
    return 0;
}

/* OpenBLAS's own thread-count setter (not part of CBLAS). */
void openblas_set_num_threads(int num_threads);

/* A batch submitted and not yet collected: its results (the arrays sized at submit), and on the CPU,
 * which decodes at submit, its timing. */
typedef struct {
    int n;
    rnnt_result *res; /* [max_batch], made on the first submit into this slot */
    rnnt_timing timing;
} runner_batch;

struct rnnt_runner {
    const struct rnnt_model *m;
    rnnt_runner_params p;
    const rnnt_backend_ops *ops;
    void *state;
    rnnt_frontend *fe;   /* the CPU frontend of rnnt_runner_decode_audio, made on its first call */
    int *audio_frames;   /* [max_batch] frames of each utterance of an audio batch */
    runner_batch pend[RNNT_RUNNER_MAX_PENDING]; /* the pending batches, oldest at pend_head */
    int pend_head, n_pend;
};

#define MAX_FRAMES_LIMIT 10000000

/* Index of the first NaN/Inf among x[0..n), or n. Scans blocks with a branch-free test on the exponent
 * bits (the compiler vectorises it; isfinite() with an early exit does not vectorise and cost ~1 ns a
 * float on a batch of 256 ten-second utterances), and looks inside a block only when it holds one. */
static size_t first_nonfinite(const float *x, size_t n)
{
    enum { BLOCK = 1024 };
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t i1 = n - i0 < BLOCK ? n : i0 + BLOCK;
        uint32_t any = 0;
        for (size_t i = i0; i < i1; i++) {
            uint32_t u;
            memcpy(&u, &x[i], sizeof u);
            any |= (u & 0x7f800000u) == 0x7f800000u;
        }
        if (any)
            for (size_t i = i0; i < i1; i++)
                if (!isfinite(x[i])) return i;
    }
    return n;
}

rnnt_runner_params rnnt_runner_default_params(void)
{
    return (rnnt_runner_params){
        .backend = RNNT_BACKEND_AUTO,
        .device = 0,
        .precision = RNNT_PRECISION_FP16,
        .max_batch = 32,
        .max_frames = 30000, /* 5 minutes at a 10 ms hop */
        .cpu_threads = 0,
    };
}

int rnnt_cuda_available(void) { return rnnt_cuda_device_count() > 0; }

int rnnt_cuda_device_count(void)
{
#ifdef RNNT_WITH_CUDA
    return rnnt_backend_cuda_device_count();
#else
    return 0;
#endif
}

int rnnt_cuda_memory(int device, size_t *used, size_t *total)
{
#ifdef RNNT_WITH_CUDA
    return rnnt_backend_cuda_memory(device, used, total);
#else
    (void)device;
    if (used) *used = 0;
    if (total) *total = 0;
    return -1;
#endif
}

rnnt_status rnnt_runner_create(const rnnt_model *m, const rnnt_runner_params *p, rnnt_runner **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!m || !p) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no model or parameters given");
    if (p->max_batch < 1 || p->max_batch > RNNT_MAX_BATCH)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "max_batch %d is not in [1, %d]", p->max_batch, RNNT_MAX_BATCH);
    if (p->max_frames < 1 || p->max_frames > MAX_FRAMES_LIMIT)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "max_frames %d is not in [1, %d]", p->max_frames, MAX_FRAMES_LIMIT);
    if (p->cpu_threads < 0 || p->cpu_threads > 1024)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "cpu_threads %d is not in [0, 1024]", p->cpu_threads);
    if (p->precision != RNNT_PRECISION_FP16 && p->precision != RNNT_PRECISION_FP32)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "unknown precision %d", (int)p->precision);
    const rnnt_backend_ops *ops = NULL;
    switch (p->backend) {
    case RNNT_BACKEND_AUTO: ops = rnnt_cuda_available() ? NULL : &rnnt_backend_cpu; break;
    case RNNT_BACKEND_CPU: ops = &rnnt_backend_cpu; break;
    case RNNT_BACKEND_CUDA:
#ifdef RNNT_WITH_CUDA
        if (!rnnt_cuda_available()) return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "backend cuda: no usable CUDA device");
        break;
#else
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "backend cuda: this build has no CUDA backend (built without nvcc)");
#endif
    default: return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "unknown backend %d", (int)p->backend);
    }
#ifdef RNNT_WITH_CUDA
    if (!ops) ops = &rnnt_backend_cuda;
#endif
    if (!ops) return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "no backend available");
    rnnt_runner *r = calloc(1, sizeof *r);
    if (!r) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    r->m = m;
    r->p = *p;
    r->ops = ops;
    if (ops == &rnnt_backend_cpu && p->cpu_threads > 0) openblas_set_num_threads(p->cpu_threads);
    rnnt_status st = ops->create(m, p, &r->state, err, errlen);
    if (st) {
        free(r);
        return st;
    }
    *out = r;
    return RNNT_OK;
}

void rnnt_runner_trim(rnnt_runner *r)
{
    if (r && r->n_pend == 0 && r->ops == &rnnt_backend_cpu) rnnt_cpu_trim(r->state);
}

void rnnt_runner_free(rnnt_runner *r)
{
    if (!r) return;
    r->ops->destroy(r->state); /* waits for whatever still runs on the device */
    for (int i = 0; i < RNNT_RUNNER_MAX_PENDING; i++) {
        if (!r->pend[i].res) continue;
        for (int b = 0; b < r->p.max_batch; b++) rnnt_result_clear(&r->pend[i].res[b]); /* uncollected results */
        free(r->pend[i].res);
    }
    rnnt_frontend_free(r->fe);
    free(r->audio_frames);
    free(r);
}

void rnnt_runner_backend(const rnnt_runner *r, const struct rnnt_model **m, const rnnt_backend_ops **ops, void **state)
{
    *m = r->m;
    *ops = r->ops;
    *state = r->state;
}

const char *rnnt_runner_backend_name(const rnnt_runner *r) { return r->ops->name; }
const char *rnnt_runner_device_name(const rnnt_runner *r) { return r->ops->device_name(r->state); }
const rnnt_runner_params *rnnt_runner_get_params(const rnnt_runner *r) { return &r->p; }

void rnnt_result_clear(rnnt_result *res)
{
    if (!res) return;
    free(res->tokens);
    free(res->frames);
    free(res->probs);
    free(res->text);
    memset(res, 0, sizeof *res);
}

static rnnt_status alloc_results(rnnt_runner *r, int n, const int *frames, rnnt_result *results, char *err, size_t errlen);
static rnnt_status finish_results(rnnt_runner *r, int n, rnnt_status st, rnnt_result *results, char *err, size_t errlen);

/* Every runner call but submit/collect (and the read-only ones) while batches are pending. */
static rnnt_status refuse_if_pending(const rnnt_runner *r, char *err, size_t errlen)
{
    if (r->n_pend == 0) return RNNT_OK;
    return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%d batch%s submitted and not collected: collect first", r->n_pend,
                        r->n_pend > 1 ? "es" : "");
}

/* The checks of a batch of features (sizes, pointers, finite values), shared by decode and submit. */
static rnnt_status check_inputs(const rnnt_runner *r, int n, const rnnt_input *inputs, const void *results, char *err,
                                size_t errlen)
{
    const struct rnnt_model *m = r->m;
    if (n < 1 || n > r->p.max_batch)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%d utterances in one batch, the runner takes 1 to %d", n, r->p.max_batch);
    if (!inputs || !results) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no inputs or results given");
    for (int b = 0; b < n; b++) {
        const rnnt_input *in = &inputs[b];
        if (in->frames < 0) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "utterance %d: negative frame count", b);
        if (in->frames > r->p.max_frames)
            return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "utterance %d: %d frames, the runner takes at most %d", b, in->frames,
                                r->p.max_frames);
        if (in->frames && !in->features) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "utterance %d: no features", b);
        size_t count = (size_t)in->frames * m->feature_dim;
        size_t bad = in->finite_checked ? count : first_nonfinite(in->features, count);
        if (bad < count)
            return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "utterance %d: non-finite feature at frame %zu, feature %zu", b,
                                bad / m->feature_dim, bad % m->feature_dim);
    }
    return RNNT_OK;
}

/* Results sized for a checked batch's utterances. */
static rnnt_status alloc_batch_results(rnnt_runner *r, int n, const rnnt_input *inputs, rnnt_result *results, char *err, size_t errlen)
{
    int *frames = malloc(sizeof(int) * (size_t)n);
    if (!frames) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    for (int b = 0; b < n; b++) frames[b] = inputs[b].frames;
    rnnt_status st = alloc_results(r, n, frames, results, err, errlen);
    free(frames);
    return st;
}

/* The inputs the backend sees: with normalize: per_feature each utterance normalised (feature_norm.c)
 * into a copy padded to whole stacks (the backend sees no normalisation: the model has no mean/std);
 * with stacking_tail: drop whole groups of frame_stacking frames only; else the caller's own.
 * *out: NULL when the caller's inputs are used as they are; else give it back with free_prepared. */
static rnnt_status prepare_inputs(rnnt_runner *r, int n, const rnnt_input *inputs, rnnt_input **out, char *err, size_t errlen)
{
    const struct rnnt_model *m = r->m;
    *out = NULL;
    int per_feature = m->fe.normalize >= RNNT_NORM_PER_FEATURE;
    if (!per_feature && !m->stacking_drop) return RNNT_OK;
    rnnt_input *x = calloc((size_t)n, sizeof *x);
    if (!x) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    rnnt_status st = RNNT_OK;
    for (int b = 0; b < n && !st; b++) {
        if (!per_feature) {
            x[b] = inputs[b];
            x[b].frames = inputs[b].frames / m->stacking * m->stacking;
            continue;
        }
        float *y;
        st = rnnt_feature_norm_per_feature(m, inputs[b].features, inputs[b].frames, &y, &x[b].frames, err, errlen);
        x[b].features = y;
        if (m->stacking_drop) x[b].frames = inputs[b].frames / m->stacking * m->stacking; /* after the statistics */
        x[b].finite_checked = 1; /* checked above; a non-finite joint output still fails its utterance */
        if (!st && x[b].frames > r->p.max_frames)
            st = rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "utterance %d: %d frames padded to whole stacks of %d are %d, the runner takes at most %d",
                              b, inputs[b].frames, m->stacking, x[b].frames, r->p.max_frames);
    }
    *out = x;
    return st;
}

static void free_prepared(const rnnt_runner *r, int n, rnnt_input *x)
{
    if (!x) return;
    if (r->m->fe.normalize >= RNNT_NORM_PER_FEATURE)
        for (int b = 0; b < n; b++) free((void *)x[b].features);
    free(x);
}

rnnt_status rnnt_runner_decode(rnnt_runner *r, int n, const rnnt_input *inputs, rnnt_result *results, rnnt_timing *timing, char *err,
                               size_t errlen)
{
    rnnt_status st = refuse_if_pending(r, err, errlen);
    if (!st) st = check_inputs(r, n, inputs, results, err, errlen);
    if (!st) st = alloc_batch_results(r, n, inputs, results, err, errlen);
    if (st) return st;
    rnnt_input *x;
    st = prepare_inputs(r, n, inputs, &x, err, errlen);
    if (!st) st = r->ops->decode(r->state, n, x ? x : inputs, results, timing, err, errlen);
    free_prepared(r, n, x);
    return finish_results(r, n, st, results, err, errlen);
}

/* ---- asynchronous batches (rnnt.h: rnnt_runner_submit / rnnt_runner_collect) ---- */

int rnnt_runner_pending(const rnnt_runner *r) { return r ? r->n_pend : 0; }
int rnnt_runner_overlaps(const rnnt_runner *r) { return r && r->ops->submit != NULL; }

rnnt_status rnnt_runner_submit(rnnt_runner *r, int n, const rnnt_input *inputs, char *err, size_t errlen)
{
    if (r->n_pend == RNNT_RUNNER_MAX_PENDING)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%d batches submitted and not collected: collect one first",
                            RNNT_RUNNER_MAX_PENDING);
    runner_batch *q = &r->pend[(r->pend_head + r->n_pend) % RNNT_RUNNER_MAX_PENDING];
    if (!q->res && !(q->res = calloc((size_t)r->p.max_batch, sizeof *q->res)))
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    rnnt_status st = check_inputs(r, n, inputs, q->res, err, errlen);
    if (!st) st = alloc_batch_results(r, n, inputs, q->res, err, errlen);
    if (st) return st;
    rnnt_input *x;
    st = prepare_inputs(r, n, inputs, &x, err, errlen);
    memset(&q->timing, 0, sizeof q->timing);
    if (!st) {
        /* the CPU decodes now: the batch waits, decoded, for its collect */
        st = r->ops->submit ? r->ops->submit(r->state, n, x ? x : inputs, err, errlen)
                            : r->ops->decode(r->state, n, x ? x : inputs, q->res, &q->timing, err, errlen);
    }
    free_prepared(r, n, x);
    if (st) {
        for (int b = 0; b < n; b++) rnnt_result_clear(&q->res[b]);
        return st;
    }
    q->n = n;
    r->n_pend++;
    return RNNT_OK;
}

rnnt_status rnnt_runner_collect(rnnt_runner *r, rnnt_result *results, int *n_out, rnnt_timing *timing, char *err, size_t errlen)
{
    if (n_out) *n_out = 0;
    if (r->n_pend == 0) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no batch submitted and not collected");
    if (!results) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no results given");
    runner_batch *q = &r->pend[r->pend_head];
    int n = q->n;
    rnnt_timing tm = q->timing;
    rnnt_status st = r->ops->collect ? r->ops->collect(r->state, q->res, &tm, err, errlen) : RNNT_OK;
    r->pend_head = (r->pend_head + 1) % RNNT_RUNNER_MAX_PENDING;
    r->n_pend--;
    st = finish_results(r, n, st, q->res, err, errlen);
    for (int b = 0; b < n; b++) {
        rnnt_result_clear(&results[b]);
        if (!st) results[b] = q->res[b]; /* the caller owns the arrays now */
        memset(&q->res[b], 0, sizeof q->res[b]);
    }
    if (st) return st;
    if (timing) *timing = tm;
    if (n_out) *n_out = n;
    return RNNT_OK;
}

/* Sizes each result's arrays for its utterance's frames (the backends fill them). */
static rnnt_status alloc_results(rnnt_runner *r, int n, const int *frames, rnnt_result *results, char *err, size_t errlen)
{
    const struct rnnt_model *m = r->m;
    for (int b = 0; b < n; b++) {
        rnnt_result_clear(&results[b]);
        size_t cap = (size_t)rnnt_model_encoder_frames(m, frames[b]) * m->max_symbols + 1;
        results[b].tokens = malloc(cap * sizeof(int));
        results[b].frames = malloc(cap * sizeof(int));
        results[b].probs = malloc(cap * sizeof(float)); /* every backend reports each label's probability */
        int injected = b == n - 1 && rnnt_fault_hit("engine_nomem");
        if (!results[b].tokens || !results[b].frames || !results[b].probs || injected) {
            for (int i = 0; i <= b; i++) rnnt_result_clear(&results[i]);
            return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for the results%s",
                                injected ? " (injected fault engine_nomem)" : "");
        }
    }
    return RNNT_OK;
}

/* After the backend: injected faults, text, and on any failure no result left half filled. */
static rnnt_status finish_results(rnnt_runner *r, int n, rnnt_status st, rnnt_result *results, char *err, size_t errlen)
{
    const struct rnnt_model *m = r->m;
    /* Injected after the backend ran, so its state is left as a failed launch would leave it. */
    if (!st && rnnt_fault_hit("engine_error"))
        st = rnnt_set_err(err, errlen, RNNT_ERR_DEVICE, "%s backend: kernel launch failed (injected fault engine_error)",
                          r->ops->name);
    for (int b = 0; b < n && !st; b++) {
        if (results[b].status != RNNT_OK) continue;
        results[b].text = rnnt_model_detokenize(m, results[b].tokens, results[b].n_tokens);
        if (!results[b].text) st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for the transcript");
    }
    if (st)
        for (int b = 0; b < n; b++) rnnt_result_clear(&results[b]);
    return st;
}

static double runner_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A frontend that frames the whole utterance at once (center: true, length: hop_ceil): through
 * rnnt_frontend_compute_f32, 16-bit PCM as x / 32768 first, as the feeds read it. */
static rnnt_status whole_utterance_features(const rnnt_frontend *fe, const rnnt_audio_input *in, float *x, int T, char *err, size_t errlen)
{
    float *tmp = NULL;
    const float *src = in->samples;
    if (!src) {
        if (!(tmp = malloc(sizeof(float) * (in->n_samples ? in->n_samples : 1)))) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < in->n_samples; i++) tmp[i] = (float)in->pcm16[i] * (1.0f / 32768.0f);
        src = tmp;
    }
    float *feats = NULL;
    int got = 0;
    rnnt_status st = rnnt_frontend_compute_f32(fe, src, in->n_samples, T, &feats, &got, err, errlen);
    if (!st && got != T) st = rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "frontend: %d frames, expected %d", got, T);
    if (!st) memcpy(x, feats, sizeof(float) * (size_t)T * (size_t)rnnt_frontend_dim(fe));
    free(feats);
    free(tmp);
    return st;
}

/* The CPU path of rnnt_runner_decode_audio: features by the CPU frontend, then the feature path. */
static rnnt_status decode_audio_cpu(rnnt_runner *r, int n, const rnnt_audio_input *in, rnnt_result *results, rnnt_timing *timing,
                                    double *frontend_s, char *err, size_t errlen)
{
    double t0 = runner_now_s();
    int F = rnnt_frontend_dim(r->fe), whole = r->m->fe.center || r->m->fe.length_hop_ceil;
    rnnt_input *feats = calloc((size_t)n, sizeof *feats);
    rnnt_frontend_stream *s = NULL;
    rnnt_status st = feats ? rnnt_frontend_stream_create(r->fe, 0, &s, err, errlen)
                           : rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    for (int b = 0; b < n && !st; b++) {
        int T = r->audio_frames[b];
        feats[b].frames = T;
        feats[b].finite_checked = 1; /* the frontend's output of finite samples is finite */
        if (T == 0) continue;
        float *x = malloc(sizeof(float) * (size_t)T * (size_t)F);
        if (!x) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for the features of utterance %d", b);
            break;
        }
        feats[b].features = x;
        int made = 0;
        if (whole) {
            st = whole_utterance_features(r->fe, &in[b], x, T, err, errlen);
            continue;
        }
        rnnt_frontend_stream_reset(s);
        st = in[b].samples ? rnnt_frontend_feed_f32(s, in[b].samples, in[b].n_samples, x, T, &made, err, errlen)
                           : rnnt_frontend_feed_s16(s, in[b].pcm16, in[b].n_samples, x, T, &made, err, errlen);
    }
    rnnt_frontend_stream_free(s);
    if (frontend_s) *frontend_s = runner_now_s() - t0;
    if (!st) st = rnnt_runner_decode(r, n, feats, results, timing, err, errlen);
    for (int b = 0; feats && b < n; b++) free((void *)feats[b].features);
    free(feats);
    return st;
}

rnnt_status rnnt_runner_decode_audio(rnnt_runner *r, int n, const rnnt_audio_input *inputs, rnnt_result *results, rnnt_timing *timing,
                                     double *frontend_s, char *err, size_t errlen)
{
    if (frontend_s) *frontend_s = 0;
    rnnt_status pst = refuse_if_pending(r, err, errlen);
    if (pst) return pst;
    if (n < 1 || n > r->p.max_batch)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%d utterances in one batch, the runner takes 1 to %d", n, r->p.max_batch);
    if (!inputs || !results) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no inputs or results given");
    if (!r->fe) {
        rnnt_status st = rnnt_frontend_create(r->m, &r->fe, err, errlen);
        if (st) return st;
    }
    if (!r->audio_frames && !(r->audio_frames = malloc(sizeof(int) * (size_t)r->p.max_batch)))
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    for (int b = 0; b < n; b++) {
        const rnnt_audio_input *in = &inputs[b];
        if (in->n_samples && !in->samples == !in->pcm16)
            return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "utterance %d: give exactly one of samples and pcm16", b);
        long long T = rnnt_frontend_frames(r->fe, (long long)in->n_samples);
        if (T > r->p.max_frames)
            return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "utterance %d: %zu samples give %lld frames, the runner takes at most %d", b,
                                in->n_samples, T, r->p.max_frames);
        if (in->samples && !in->finite_checked) {
            size_t bad = first_nonfinite(in->samples, in->n_samples);
            if (bad < in->n_samples) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "utterance %d: sample %zu is not finite", b, bad);
        }
        r->audio_frames[b] = (int)T;
    }
    /* A model whose frontend options the GPU frontend lacks (or that normalises per utterance) takes
     * the CPU frontend on every backend; its features then go through the backend's feature path. */
    if (!r->ops->decode_audio || rnnt_frontend_cfg_cpu_only(&r->m->fe))
        return decode_audio_cpu(r, n, inputs, results, timing, frontend_s, err, errlen);
    rnnt_status st = alloc_results(r, n, r->audio_frames, results, err, errlen);
    if (st) return st;
    st = r->ops->decode_audio(r->state, n, inputs, results, timing, frontend_s, err, errlen);
    if (st == RNNT_ERR_UNSUPPORTED) {
        for (int b = 0; b < n; b++) rnnt_result_clear(&results[b]);
        return decode_audio_cpu(r, n, inputs, results, timing, frontend_s, err, errlen);
    }
    return finish_results(r, n, st, results, err, errlen);
}
