/* test_batch.c — batch invariance: on every golden model, fresh random utterances (lengths 0 to 90,
 * odd ones included) are decoded one by one, then shuffled into batches of 1, 3, 7 and 16; every
 * utterance's tokens and frames must be identical in all of them. The seed is printed; set
 * RNNT_TEST_SEED to replay one. */
#include <dirent.h>
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

#define N_UTT 40

static void check_model(const char *dir, uint64_t seed)
{
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    int F = m->feature_dim;
    rnnt_input in[N_UTT];
    float *x[N_UTT];
    for (int i = 0; i < N_UTT; i++) {
        int T = i == 0 ? 0 : i == 1 ? 1 : (int)(tu_rand_next(&seed) % 91);
        x[i] = malloc(((size_t)T * F + 1) * sizeof(float));
        for (int t = 0; t < T; t++)
            for (int f = 0; f < F; f++) {
                float u = 1.7f * tu_randu(&seed);
                x[i][(size_t)t * F + f] = m->fe_mean ? m->fe_mean[f] + m->fe_std[f] * u : u;
            }
        in[i] = (rnnt_input){x[i], T, 0};
    }
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = 16;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    rnnt_result alone[N_UTT];
    memset(alone, 0, sizeof alone);
    int labels = 0;
    for (int i = 0; i < N_UTT; i++) {
        if (rnnt_runner_decode(r, 1, &in[i], &alone[i], NULL, err, sizeof err)) fail_msg("%s", err);
        labels += alone[i].n_tokens;
    }
    assert_true(labels > 0);
    static const int sizes[] = {1, 3, 7, 16};
    for (int s = 0; s < 4; s++) {
        int order[N_UTT];
        for (int i = 0; i < N_UTT; i++) order[i] = i;
        for (int i = N_UTT - 1; i > 0; i--) {
            int j = (int)(tu_rand_next(&seed) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int first = 0; first < N_UTT; first += sizes[s]) {
            int nb = N_UTT - first < sizes[s] ? N_UTT - first : sizes[s];
            rnnt_input bin[16];
            rnnt_result res[16];
            memset(res, 0, sizeof res);
            for (int k = 0; k < nb; k++) bin[k] = in[order[first + k]];
            if (rnnt_runner_decode(r, nb, bin, res, NULL, err, sizeof err)) fail_msg("%s", err);
            for (int k = 0; k < nb; k++) {
                const rnnt_result *a = &alone[order[first + k]];
                if (res[k].n_tokens != a->n_tokens || memcmp(res[k].tokens, a->tokens, sizeof(int) * (size_t)a->n_tokens) ||
                    memcmp(res[k].frames, a->frames, sizeof(int) * (size_t)a->n_tokens) || strcmp(res[k].text, a->text))
                    fail_msg("%s: utterance %d (T=%d) differs in a batch of %d (seed %llu)", dir, order[first + k], in[order[first + k]].frames,
                             sizes[s], (unsigned long long)seed);
                rnnt_result_clear(&res[k]);
            }
        }
    }
    printf("%s: %d utterances, %d labels, identical alone and in batches of 1/3/7/16\n", dir, N_UTT, labels);
    for (int i = 0; i < N_UTT; i++) {
        rnnt_result_clear(&alone[i]);
        free(x[i]);
    }
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

static void test_batch_invariance(void **state)
{
    uint64_t seed = getenv("RNNT_TEST_SEED") ? strtoull(getenv("RNNT_TEST_SEED"), NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed);
    char root[4096];
    snprintf(root, sizeof root, "%s/golden", tu_data_dir());
    DIR *d = opendir(root);
    if (!d) fail_msg("no golden directory %s", root);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[4096 + 256], probe[4400];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        snprintf(probe, sizeof probe, "%s/model.yaml", dir);
        FILE *f = fopen(probe, "rb");
        if (!f) continue;
        fclose(f);
        check_model(dir, seed + (uint64_t)n);
        n++;
    }
    closedir(d);
    assert_true(n >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_batch_invariance)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
