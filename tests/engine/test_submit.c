/* test_submit.c — asynchronous batches (rnnt_runner_submit / rnnt_runner_collect, rnnt.h).
 *
 * On every golden model, fresh random utterances (lengths 0 to 90, odd ones included) are decoded one
 * batch at a time with rnnt_runner_decode, then again through submit/collect with two batches in flight
 * (submit k + 1 before collecting k), the inputs overwritten with garbage as soon as submit returns:
 * every result (status, tokens, frames, probabilities, text, encoder frames, steps, skips) must be
 * identical, and the batches come back in submission order with their sizes. Then the rules: collect
 * with nothing pending, a third submit, bad input at submit (nothing pending after it), decode,
 * decode_audio and advance_streams while a batch is pending (all refused, the pending batches intact),
 * and rnnt_runner_free with uncollected batches (no leak under ASan).
 *
 * RNNT_TEST_BACKEND=cuda runs the same checks on the CUDA backend (ctest gpu_test_submit, exit 77
 * without a device), fp32 by default, fp16 with RNNT_TEST_PRECISION=fp16 (the same runner and path
 * either way, so identical bits are required in both). The seed is printed; RNNT_TEST_SEED replays. */
#include <dirent.h>
#include <math.h>
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

#define N_UTT 48
#define MAX_B 16

static uint64_t g_seed;
static rnnt_backend_kind g_backend = RNNT_BACKEND_CPU;
static rnnt_precision g_precision = RNNT_PRECISION_FP32;

static rnnt_runner *make_runner(const rnnt_model *m, int max_batch)
{
    char err[512];
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = g_backend;
    p.precision = g_precision;
    p.max_batch = max_batch;
    p.max_frames = 200;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    return r;
}

static void random_utterance(const rnnt_model *m, uint64_t *seed, int T, float *x)
{
    int F = m->feature_dim;
    for (int t = 0; t < T; t++)
        for (int f = 0; f < F; f++) {
            float u = 1.7f * tu_randu(seed);
            x[(size_t)t * F + f] = m->fe_mean ? m->fe_mean[f] + m->fe_std[f] * u : u;
        }
}

static void assert_same(const rnnt_result *a, const rnnt_result *b, const char *what, int i)
{
    char msg[400];
    if (tu_result_diff(a, b, i, msg, sizeof msg)) fail_msg("%s %s", what, msg);
}

/* Batches of these sizes, in this order, over the utterances. */
static const int k_sizes[] = {3, 1, 7, 16, 5, 2, 9, 5};
#define N_BATCHES ((int)(sizeof k_sizes / sizeof k_sizes[0]))

static void check_model(const char *dir)
{
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    int F = m->feature_dim;
    uint64_t seed = g_seed ^ (uint64_t)strlen(dir) * 0x9e3779b97f4a7c15ull;
    int T[N_UTT];
    float *x[N_UTT], *orig[N_UTT];
    for (int i = 0; i < N_UTT; i++) {
        T[i] = i == 0 ? 0 : i == 1 ? 1 : (int)(tu_rand_next(&seed) % 91);
        x[i] = malloc(((size_t)T[i] * F + 1) * sizeof(float));
        orig[i] = malloc(((size_t)T[i] * F + 1) * sizeof(float));
        random_utterance(m, &seed, T[i], orig[i]);
    }
    rnnt_runner *r = make_runner(m, MAX_B);
    /* reference: each batch by rnnt_runner_decode */
    rnnt_result want[N_UTT], got[N_UTT];
    memset(want, 0, sizeof want);
    memset(got, 0, sizeof got);
    rnnt_input in[N_UTT];
    int first[N_BATCHES + 1];
    first[0] = 0;
    for (int k = 0; k < N_BATCHES; k++) first[k + 1] = first[k] + k_sizes[k];
    assert_true(first[N_BATCHES] <= N_UTT);
    int labels = 0;
    for (int k = 0; k < N_BATCHES; k++) {
        for (int i = first[k]; i < first[k + 1]; i++) {
            memcpy(x[i], orig[i], (size_t)T[i] * F * sizeof(float));
            in[i] = (rnnt_input){x[i], T[i], 0};
        }
        if (rnnt_runner_decode(r, k_sizes[k], &in[first[k]], &want[first[k]], NULL, err, sizeof err)) fail_msg("%s", err);
        for (int i = first[k]; i < first[k + 1]; i++) labels += want[i].n_tokens;
    }
    assert_true(labels > 0);
    /* two in flight: submit k + 1, then collect k; the inputs are garbage once submit returned */
    int collected = 0;
    for (int k = 0; k <= N_BATCHES; k++) {
        if (k < N_BATCHES) {
            for (int i = first[k]; i < first[k + 1]; i++) {
                memcpy(x[i], orig[i], (size_t)T[i] * F * sizeof(float));
                in[i] = (rnnt_input){x[i], T[i], 0};
            }
            if (rnnt_runner_submit(r, k_sizes[k], &in[first[k]], err, sizeof err)) fail_msg("submit %d: %s", k, err);
            for (int i = first[k]; i < first[k + 1]; i++)
                for (size_t j = 0; j < (size_t)T[i] * F; j++) x[i][j] = NAN; /* the runner holds its own copy */
            assert_int_equal(rnnt_runner_pending(r), k == 0 ? 1 : 2);
        }
        if (k == 0) continue;
        int n = -1;
        rnnt_timing tm;
        if (rnnt_runner_collect(r, &got[first[collected]], &n, &tm, err, sizeof err)) fail_msg("collect %d: %s", collected, err);
        assert_int_equal(n, k_sizes[collected]);
        assert_true(tm.total_s >= 0);
        collected++;
    }
    assert_int_equal(collected, N_BATCHES);
    assert_int_equal(rnnt_runner_pending(r), 0);
    for (int i = 0; i < first[N_BATCHES]; i++) assert_same(&got[i], &want[i], dir, i);
    /* one at a time, each collected before the next (no overlap): the same again */
    for (int k = 0; k < N_BATCHES; k++) {
        for (int i = first[k]; i < first[k + 1]; i++) {
            memcpy(x[i], orig[i], (size_t)T[i] * F * sizeof(float));
            in[i] = (rnnt_input){x[i], T[i], 0};
        }
        if (rnnt_runner_submit(r, k_sizes[k], &in[first[k]], err, sizeof err)) fail_msg("%s", err);
        if (rnnt_runner_collect(r, &got[first[k]], NULL, NULL, err, sizeof err)) fail_msg("%s", err);
    }
    for (int i = 0; i < first[N_BATCHES]; i++) assert_same(&got[i], &want[i], dir, i);
    /* and the synchronous call still works after it */
    for (int i = 0; i < 3; i++) memcpy(x[i], orig[i], (size_t)T[i] * F * sizeof(float));
    if (rnnt_runner_decode(r, 3, in, got, NULL, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < 3; i++) assert_same(&got[i], &want[i], dir, i);
    for (int i = 0; i < N_UTT; i++) {
        rnnt_result_clear(&want[i]);
        rnnt_result_clear(&got[i]);
        free(x[i]);
        free(orig[i]);
    }
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

static void test_submit_matches_decode(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/golden", tu_data_dir());
    DIR *d = opendir(path);
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char dir[8192];
        snprintf(dir, sizeof dir, "%s/%s", path, de->d_name);
        char probe[8300];
        snprintf(probe, sizeof probe, "%s/model.yaml", dir);
        FILE *f = fopen(probe, "r");
        if (!f) continue;
        fclose(f);
        check_model(dir);
        n++;
    }
    closedir(d);
    assert_true(n >= 3);
}

static void test_submit_rules(void **state)
{
    (void)state;
    char err[512], dir[4200];
    snprintf(dir, sizeof dir, "%s/golden/hard_bb", tu_data_dir());
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    int F = m->feature_dim;
    uint64_t seed = g_seed + 1;
    float *x = malloc(sizeof(float) * 50 * F), *bad = malloc(sizeof(float) * 50 * F);
    random_utterance(m, &seed, 50, x);
    memcpy(bad, x, sizeof(float) * 50 * F);
    bad[17 * F + 3] = NAN;
    rnnt_input in[2] = {{x, 50, 0}, {x, 31, 0}}, nan_in = {bad, 50, 0};
    rnnt_result res[4];
    memset(res, 0, sizeof res);
    rnnt_runner *r = make_runner(m, 2);
    int n = 7;
    /* nothing pending */
    assert_int_equal(rnnt_runner_collect(r, res, &n, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err, "no batch"));
    /* bad input: refused at submit, nothing pending */
    assert_int_equal(rnnt_runner_submit(r, 1, &nan_in, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "non-finite"));
    assert_int_equal(rnnt_runner_submit(r, 3, in, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(rnnt_runner_submit(r, 0, in, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(rnnt_runner_submit(r, 1, NULL, err, sizeof err), RNNT_ERR_INVALID);
    rnnt_input too_long = {x, 201, 1};
    assert_int_equal(rnnt_runner_submit(r, 1, &too_long, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(rnnt_runner_pending(r), 0);
    /* two pending; a third refused */
    assert_int_equal(rnnt_runner_submit(r, 2, in, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_runner_submit(r, 1, &in[1], err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_runner_submit(r, 1, in, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_runner_pending(r), 2);
    /* the other decoding calls are refused while batches are pending */
    assert_int_equal(rnnt_runner_decode(r, 1, in, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "collect"));
    float pcm[400] = {0};
    rnnt_audio_input a = {pcm, NULL, 400, 1};
    assert_int_equal(rnnt_runner_decode_audio(r, 1, &a, res, NULL, NULL, err, sizeof err), RNNT_ERR_INVALID);
    rnnt_stream *s;
    if (rnnt_stream_create(m, &s, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(rnnt_runner_advance_streams(r, 1, &s, NULL, err, sizeof err), RNNT_ERR_INVALID);
    rnnt_stream_free(s);
    rnnt_runner_trim(r); /* a no-op while pending */
    /* the pending batches are intact: decode gives the same */
    rnnt_result want[3];
    memset(want, 0, sizeof want);
    assert_int_equal(rnnt_runner_collect(r, res, &n, NULL, err, sizeof err), RNNT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rnnt_runner_collect(r, res + 2, &n, NULL, err, sizeof err), RNNT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rnnt_runner_decode(r, 2, in, want, NULL, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_runner_decode(r, 1, &in[1], want + 2, NULL, err, sizeof err), RNNT_OK);
    for (int i = 0; i < 3; i++) assert_same(&res[i], &want[i], "rules", i);
    for (int i = 0; i < 3; i++) {
        rnnt_result_clear(&res[i]);
        rnnt_result_clear(&want[i]);
    }
    /* freed with batches pending: nothing leaks (ASan), nothing waits forever */
    assert_int_equal(rnnt_runner_submit(r, 2, in, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_runner_submit(r, 2, in, err, sizeof err), RNNT_OK);
    rnnt_runner_free(r);
    /* the read-only queries take NULL */
    assert_int_equal(rnnt_runner_pending(NULL), 0);
    assert_int_equal(rnnt_runner_overlaps(NULL), 0);
    free(x);
    free(bad);
    rnnt_model_free(m);
}

int main(void)
{
    const char *be = getenv("RNNT_TEST_BACKEND"), *pr = getenv("RNNT_TEST_PRECISION");
    if (be && !strcmp(be, "cuda")) {
        if (!rnnt_cuda_available()) {
            printf("SKIP: no CUDA device\n");
            return 77;
        }
        g_backend = RNNT_BACKEND_CUDA;
        if (pr && !strcmp(pr, "fp16")) g_precision = RNNT_PRECISION_FP16;
    }
    const char *sv = getenv("RNNT_TEST_SEED");
    g_seed = sv ? strtoull(sv, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    printf("seed %llu, backend %s %s\n", (unsigned long long)g_seed, g_backend == RNNT_BACKEND_CUDA ? "cuda" : "cpu",
           g_precision == RNNT_PRECISION_FP16 ? "fp16" : "fp32");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_matches_decode),
        cmocka_unit_test(test_submit_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
