/* test_concurrent.c — runners of one model decoding at once on several threads (rnnt.h: "one runner per
 * thread"), as the daemon's workers and their small-batch runners do.
 *
 * On every golden model and the shipped model, three runners of different max_batch (16, 64, 64) each
 * decode their own list of batch sizes (chosen so that on a GPU the persistent and layer-stream encoders,
 * the cluster and grid decode loops all run, with different shared-memory amounts per launch) first alone,
 * then all three on their own threads at once, many times over: every concurrent result must equal the
 * same runner's result alone, bit for bit (status, tokens, frames, probabilities, text, steps). The daemon
 * found this class of bug on the H100: kernels whose dynamic shared-memory limit was set per launch by one
 * runner while another runner's launch of the same kernel needed more ("too many resources requested
 * for launch": a whole batch answered 500).
 *
 * RNNT_TEST_BACKEND=cuda (ctest gpu_test_concurrent, exit 77 without a device) runs on the GPU for about
 * RNNT_TEST_SECONDS (default 2) per model; the CPU runs one round. RNNT_TEST_PRECISION=fp16 too. The seed
 * is printed; RNNT_TEST_SEED replays. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "model.h"
#include "test_util.h"

#define N_RUNNERS 3
#define MAX_SIZES 4
#define MAX_UTT 200

static uint64_t g_seed;
static rnnt_backend_kind g_backend = RNNT_BACKEND_CPU;
static rnnt_precision g_precision = RNNT_PRECISION_FP32;
static double g_seconds = 2.0;

static const int k_max_batch[N_RUNNERS] = {16, 64, 64};
static const int k_sizes[N_RUNNERS][MAX_SIZES] = {{1, 5, 16, 3}, {17, 64, 33, 24}, {40, 2, 12, 64}};

typedef struct {
    rnnt_runner *r;
    int n_utt;
    int first[MAX_SIZES + 1];
    rnnt_input in[MAX_UTT];
    rnnt_result want[MAX_UTT];
    double stop_at; /* monotonic seconds; on the CPU one round */
    int rounds;
    char fail[1000];
} job;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *run_job(void *arg)
{
    job *j = arg;
    rnnt_result got[64];
    char err[512], why[400];
    for (;;) {
        for (int k = 0; k < MAX_SIZES; k++) {
            int n = j->first[k + 1] - j->first[k];
            memset(got, 0, sizeof got);
            if (rnnt_runner_decode(j->r, n, &j->in[j->first[k]], got, NULL, err, sizeof err)) {
                snprintf(j->fail, sizeof j->fail, "round %d, batch of %d: %s", j->rounds, n, err);
                return NULL;
            }
            for (int i = 0; i < n && !j->fail[0]; i++) {
                if (tu_result_diff(&got[i], &j->want[j->first[k] + i], j->first[k] + i, why, sizeof why))
                    snprintf(j->fail, sizeof j->fail, "round %d, batch of %d: %s", j->rounds, n, why);
            }
            for (int i = 0; i < n; i++) rnnt_result_clear(&got[i]);
            if (j->fail[0]) return NULL;
        }
        j->rounds++;
        if (g_backend == RNNT_BACKEND_CPU ? j->rounds >= 1 : now_s() >= j->stop_at) return NULL;
    }
}

static void check_model(const char *dir)
{
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s: %s", dir, err);
    int F = m->feature_dim;
    uint64_t seed = g_seed ^ (uint64_t)strlen(dir) * 0x9e3779b97f4a7c15ull;
    static job jobs[N_RUNNERS];
    memset(jobs, 0, sizeof jobs);
    int labels = 0;
    for (int r = 0; r < N_RUNNERS; r++) {
        job *j = &jobs[r];
        rnnt_runner_params p = rnnt_runner_default_params();
        p.backend = g_backend;
        p.precision = g_precision;
        p.max_batch = k_max_batch[r];
        p.max_frames = 150;
        if (rnnt_runner_create(m, &p, &j->r, err, sizeof err)) fail_msg("%s: %s", dir, err);
        j->first[0] = 0;
        for (int k = 0; k < MAX_SIZES; k++) j->first[k + 1] = j->first[k] + k_sizes[r][k];
        j->n_utt = j->first[MAX_SIZES];
        assert_true(j->n_utt <= MAX_UTT);
        for (int i = 0; i < j->n_utt; i++) {
            int T = 1 + (int)(tu_rand_next(&seed) % 150);
            float *x = malloc((size_t)T * F * sizeof(float));
            for (int t = 0; t < T * F; t++) {
                float u = 1.7f * tu_randu(&seed);
                x[t] = m->fe_mean ? m->fe_mean[t % F] + m->fe_std[t % F] * u : u;
            }
            j->in[i] = (rnnt_input){x, T, 0};
        }
        /* alone: the reference */
        for (int k = 0; k < MAX_SIZES; k++)
            if (rnnt_runner_decode(j->r, k_sizes[r][k], &j->in[j->first[k]], &j->want[j->first[k]], NULL, err, sizeof err))
                fail_msg("%s: runner %d alone, batch of %d: %s", dir, r, k_sizes[r][k], err);
        for (int i = 0; i < j->n_utt; i++) labels += j->want[i].n_tokens;
    }
    assert_true(labels > 0);
    double stop_at = now_s() + g_seconds;
    pthread_t th[N_RUNNERS];
    for (int r = 0; r < N_RUNNERS; r++) {
        jobs[r].stop_at = stop_at;
        assert_int_equal(pthread_create(&th[r], NULL, run_job, &jobs[r]), 0);
    }
    for (int r = 0; r < N_RUNNERS; r++) pthread_join(th[r], NULL);
    char fail[2000] = "";
    for (int r = 0; r < N_RUNNERS; r++) {
        job *j = &jobs[r];
        printf("%s: runner %d (max_batch %d): %d rounds at once%s%s\n", dir, r, k_max_batch[r], j->rounds,
               j->fail[0] ? ": " : ", every result as alone", j->fail);
        if (j->fail[0] && !fail[0]) snprintf(fail, sizeof fail, "%s: runner %d: %s", dir, r, j->fail);
        for (int i = 0; i < j->n_utt; i++) {
            rnnt_result_clear(&j->want[i]);
            free((void *)j->in[i].features);
        }
        rnnt_runner_free(j->r);
    }
    rnnt_model_free(m);
    if (fail[0]) fail_msg("%s", fail);
}

static void test_golden_models(void **state)
{
    (void)state;
    char root[1024];
    snprintf(root, sizeof root, "%s/golden", tu_data_dir());
    DIR *d = opendir(root);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[1400], yaml[1500];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        snprintf(yaml, sizeof yaml, "%s/model.yaml", dir);
        FILE *f = fopen(yaml, "r");
        if (!f) continue;
        fclose(f);
        check_model(dir);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

static void test_shipped_model(void **state)
{
    (void)state;
    const char *dir = getenv("RNNT_TEST_SHIPPED");
    if (!dir || !*dir) skip();
    check_model(dir);
}

int main(void)
{
    const char *b = getenv("RNNT_TEST_BACKEND");
    if (b && !strcmp(b, "cuda")) {
        if (!rnnt_cuda_available()) {
            printf("SKIP: no CUDA device\n");
            return 77;
        }
        g_backend = RNNT_BACKEND_CUDA;
    }
    const char *p = getenv("RNNT_TEST_PRECISION");
    if (p && !strcmp(p, "fp16")) g_precision = RNNT_PRECISION_FP16;
    const char *s = getenv("RNNT_TEST_SECONDS");
    if (s) g_seconds = atof(s);
    const char *seed = getenv("RNNT_TEST_SEED");
    g_seed = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
    printf("seed %llu (RNNT_TEST_SEED replays)\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_models),
        cmocka_unit_test(test_shipped_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
