/* test_nemo.c — NeMo LSTM transducers converted by `python3 -m rnntd_import.nemo` (committed under
 * tests/data/nemo/imported/, held to a fresh conversion by tests/models/test_import.py) transcribe the
 * committed clips exactly as NeMo 2.1.0's own greedy decoding did (tests/data/nemo/models/index.json,
 * written with NeMo by models/rnntd_import/make_nemo_fixture.py): the same token ids and encoder frames,
 * for the plain RNN-T and the multi-blank [2, 4] model, from 16-bit PCM through the whole engine (centred
 * STFT, per-feature statistics, stacking with the partial tail dropped, projection LSTMs + LayerNorm).
 * Each model decodes the clips once as one batch and once one at a time (the same tokens).
 * RNNT_TEST_BACKEND=cuda runs it on the CUDA backend in fp32 (ctest gpu_test_nemo; exit 77 without a
 * device); the default is the CPU backend (ctest engine_test_nemo). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "rnnt.h"
#include "rnnt_audio.h"
#include "test_util.h"

#define MAX_CLIPS 16

static rnnt_backend_kind g_backend = RNNT_BACKEND_CPU;

static void decode_clips(rnnt_runner *r, int n, const rnnt_audio_input *in, rnnt_result *res)
{
    char err[512];
    memset(res, 0, sizeof *res * (size_t)n);
    if (rnnt_runner_decode_audio(r, n, in, res, NULL, NULL, err, sizeof err)) fail_msg("decode: %s", err);
}

static void check_model(const char *root, const char *name, json_t *model, json_t *clips)
{
    char dir[8192], err[512];
    snprintf(dir, sizeof dir, "%s/tests/data/nemo/imported/%s", root, name);
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    json_t *ref = json_object_get(json_object_get(model, "transcripts"), "greedy");
    int n = (int)json_array_size(clips);
    assert_true(n > 0 && n <= MAX_CLIPS);
    assert_int_equal((int)json_array_size(ref), n);
    rnnt_audio_input in[MAX_CLIPS];
    float *wav[MAX_CLIPS];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", root, json_string_value(json_array_get(clips, i)));
        size_t len;
        if (rnnt_audio_load_file(path, 16000, NULL, &wav[i], &len, NULL, err, sizeof err)) fail_msg("%s", err);
        in[i].samples = wav[i];
        in[i].n_samples = len;
    }
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = g_backend;
    p.precision = RNNT_PRECISION_FP32;
    p.max_batch = n;
    p.max_frames = 4096;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    rnnt_result batch[MAX_CLIPS], one[MAX_CLIPS];
    decode_clips(r, n, in, batch);
    for (int i = 0; i < n; i++) decode_clips(r, 1, &in[i], &one[i]);
    int tokens = 0;
    for (int i = 0; i < n; i++) {
        json_t *u = json_array_get(ref, i), *want = json_object_get(u, "tokens");
        const char *clip = json_string_value(json_array_get(clips, i));
        for (int k = 0; k < 2; k++) {
            const rnnt_result *g = k ? &one[i] : &batch[i];
            assert_int_equal(g->status, RNNT_OK);
            if (g->encoder_frames != (int)json_integer_value(json_object_get(u, "encoder_frames")))
                fail_msg("%s %s: %d encoder frames, NeMo %lld", name, clip, g->encoder_frames,
                         (long long)json_integer_value(json_object_get(u, "encoder_frames")));
            int same = g->n_tokens == (int)json_array_size(want);
            for (int t = 0; same && t < g->n_tokens; t++) same = g->tokens[t] == (int)json_integer_value(json_array_get(want, t));
            if (!same)
                fail_msg("%s %s (%s): %d tokens differ from NeMo's greedy (%zu tokens)", name, clip, k ? "alone" : "in the batch",
                         g->n_tokens, json_array_size(want));
        }
        tokens += batch[i].n_tokens;
    }
    printf("%s: %d clips, %d tokens equal to NeMo's greedy transcripts (%s, batch of %d and one at a time)\n", name, n, tokens,
           g_backend == RNNT_BACKEND_CUDA ? "cuda fp32" : "cpu", n);
    for (int i = 0; i < n; i++) {
        rnnt_result_clear(&batch[i]);
        rnnt_result_clear(&one[i]);
        free(wav[i]);
    }
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

static void test_nemo_fixtures(void **state)
{
    (void)state;
    char root[4096], path[4200];
    snprintf(root, sizeof root, "%s/../..", tu_data_dir());
    snprintf(path, sizeof path, "%s/tests/data/nemo/models/index.json", root);
    json_error_t je;
    json_t *index = json_load_file(path, 0, &je);
    if (!index) fail_msg("%s:%d: %s", path, je.line, je.text);
    json_t *models = json_object_get(index, "models"), *clips = json_object_get(index, "clips");
    const char *name;
    json_t *model;
    int n = 0;
    json_object_foreach(models, name, model) {
        check_model(root, name, model, clips);
        n++;
    }
    assert_int_equal(n, 3);
    json_decref(index);
}

int main(void)
{
    const char *be = getenv("RNNT_TEST_BACKEND");
    if (be && !strcmp(be, "cuda")) {
        if (!rnnt_cuda_available()) {
            printf("no usable CUDA device: skipped\n");
            return 77;
        }
        g_backend = RNNT_BACKEND_CUDA;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_nemo_fixtures)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
