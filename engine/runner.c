/* runner.c — the public decoding entry points: picks a backend, validates every input, sizes the
 * results, and turns tokens into text. Backends only compute. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

struct rnnt_runner {
    const struct rnnt_model *m;
    rnnt_runner_params p;
    const rnnt_backend_ops *ops;
    void *state;
};

#define MAX_BATCH_LIMIT 4096
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

int rnnt_cuda_available(void)
{
#ifdef RNNT_WITH_CUDA
    return rnnt_cuda_device_count() > 0;
#else
    return 0;
#endif
}

rnnt_status rnnt_runner_create(const rnnt_model *m, const rnnt_runner_params *p, rnnt_runner **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!m || !p) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no model or parameters given");
    if (p->max_batch < 1 || p->max_batch > MAX_BATCH_LIMIT)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "max_batch %d is not in [1, %d]", p->max_batch, MAX_BATCH_LIMIT);
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
    if (r && r->ops == &rnnt_backend_cpu) rnnt_cpu_trim(r->state);
}

void rnnt_runner_free(rnnt_runner *r)
{
    if (!r) return;
    r->ops->destroy(r->state);
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
    free(res->text);
    memset(res, 0, sizeof *res);
}

rnnt_status rnnt_runner_decode(rnnt_runner *r, int n, const rnnt_input *inputs, rnnt_result *results, rnnt_timing *timing, char *err,
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
    for (int b = 0; b < n; b++) {
        rnnt_result_clear(&results[b]);
        size_t cap = (size_t)rnnt_model_encoder_frames(m, inputs[b].frames) * m->max_symbols + 1;
        results[b].tokens = malloc(cap * sizeof(int));
        results[b].frames = malloc(cap * sizeof(int));
        int injected = b == n - 1 && rnnt_fault_hit("engine_nomem");
        if (!results[b].tokens || !results[b].frames || injected) {
            for (int i = 0; i <= b; i++) rnnt_result_clear(&results[i]);
            return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for the results%s",
                                injected ? " (injected fault engine_nomem)" : "");
        }
    }
    rnnt_status st = r->ops->decode(r->state, n, inputs, results, timing, err, errlen);
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
