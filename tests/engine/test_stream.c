/* test_stream.c — rnnt_stream: chunk invariance and the stream calls' errors.
 *
 * Chunk invariance: an utterance fed to a stream in any chunks (1 frame at a time, 7 frames, random
 * sizes with empty chunks among them, all at once), advanced alone or in one batch with other streams
 * fed differently, must end with the tokens, frames, text, encoder frame count, frames skipped and
 * joint evaluations that rnnt_runner_decode gives for the whole utterance. Checked on every golden
 * model (hard/soft, big blanks, frame and time stacking), on freshly generated random models in
 * several variants, and on the shipped model with its sample features. While a stream runs, its
 * partial results only grow, are prefixes of the final one, and emit from encoder frames that exist
 * only. The seed is printed; set RNNT_TEST_SEED to replay one.
 *
 * RNNT_TEST_BACKEND=cuda runs the same checks on the CUDA backend (ctest gpu_test_stream; exit 77
 * without a device), in fp32, or in fp16 with RNNT_TEST_PRECISION=fp16 (with RNNT_CUDA_PERSIST=0, so
 * whole utterances take the per-step recurrence that streams take); the CPU-only checks (the layer
 * kernel, the argument errors, and in fp16 the overflowing model) are left out there; two run only
 * there: a stream bound to one CUDA runner (or encoded by a CPU runner) is refused by another, nothing
 * changed (test_cuda_other_runner), and more live streams than the slot pool starts with
 * (test_many_streams, also on the CPU). */
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

#include "rnnt_audio.h"
#include "cpu_ops.h"
#include "model.h"
#include "rnnt_npy.h"
#include "stream.h"
#include "test_util.h"

static uint64_t g_seed;
static rnnt_backend_kind g_backend = RNNT_BACKEND_CPU;
static rnnt_precision g_precision = RNNT_PRECISION_FP32;

typedef struct {
    const float *x;
    int T;
} utt;

/* Chunkings: >0 a fixed size, 0 random sizes in [0, 20] (empty chunks included), -1 all at once. */
static const int chunkings[] = {1, 7, 0, -1};
#define N_CHUNKINGS 4

static int next_chunk(int how, int left, uint64_t *rng)
{
    int c = how > 0 ? how : how == 0 ? (int)(tu_rand_next(rng) % 21) : left;
    return c < left ? c : left;
}

/* Encoder frames that exist after `frames` input frames, input not finished (whole groups only). */
static int frames_ready(const rnnt_model *m, int frames)
{
    int r = frames / m->stacking;
    for (int l = 0; l < m->n_enc - 1; l++) r /= m->enc[l].time_stack;
    return r;
}

static void expect_same(const rnnt_result *got, const rnnt_result *want, const char *what)
{
    if (got->status != want->status || got->n_tokens != want->n_tokens ||
        memcmp(got->tokens, want->tokens, sizeof(int) * (size_t)want->n_tokens) ||
        memcmp(got->frames, want->frames, sizeof(int) * (size_t)want->n_tokens) ||
        strcmp(got->text ? got->text : "", want->text ? want->text : "") || got->encoder_frames != want->encoder_frames ||
        got->frames_skipped != want->frames_skipped || got->decode_steps != want->decode_steps)
        fail_msg("%s: stream gives %d tokens '%s' (T_enc %d, skipped %d, steps %d), the whole utterance %d '%s' (%d, %d, %d); seed %llu",
                 what, got->n_tokens, got->text ? got->text : "", got->encoder_frames, got->frames_skipped, got->decode_steps,
                 want->n_tokens, want->text ? want->text : "", want->encoder_frames, want->frames_skipped, want->decode_steps,
                 (unsigned long long)g_seed);
}

/* Partial result checks: a prefix of the final result, growing, from frames that exist. */
static void check_partial(const rnnt_model *m, rnnt_stream *s, const rnnt_result *want, int fed, int *prev_tokens, const char *what)
{
    char err[256];
    rnnt_result part = {0};
    if (rnnt_stream_get_result(s, &part, err, sizeof err)) fail_msg("%s", err);
    if (!rnnt_stream_is_final(s)) assert_int_equal(part.encoder_frames, frames_ready(m, fed));
    if (part.n_tokens < *prev_tokens || part.n_tokens > want->n_tokens ||
        memcmp(part.tokens, want->tokens, sizeof(int) * (size_t)part.n_tokens) ||
        memcmp(part.frames, want->frames, sizeof(int) * (size_t)part.n_tokens))
        fail_msg("%s: partial result after %d frames is not a growing prefix of the final one (seed %llu)", what, fed,
                 (unsigned long long)g_seed);
    for (int i = 0; i < part.n_tokens; i++) assert_true(part.frames[i] < part.encoder_frames);
    *prev_tokens = part.n_tokens;
    rnnt_result_clear(&part);
}

#define MAX_STREAMS 96

/* A runner of the test's backend and precision; max_frames 0: the default. */
static rnnt_runner *test_runner(const rnnt_model *m, int max_batch, int max_frames)
{
    char err[512];
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = g_backend;
    p.precision = g_precision;
    p.max_batch = max_batch;
    if (max_frames > 0) p.max_frames = max_frames;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    return r;
}

/* One stream per utterance, each fed by its own chunking, all advanced together each round (streams
 * that have finished stay in the batch). Each final result must equal want[i]. */
static void run_streams(const rnnt_model *m, rnnt_runner *r, int n, const utt *u, const int *how, const rnnt_result *want, const char *what)
{
    char err[256];
    rnnt_stream *s[MAX_STREAMS];
    int fed[MAX_STREAMS], prev[MAX_STREAMS];
    assert_true(n <= MAX_STREAMS);
    uint64_t rng = g_seed ^ 0x5bd1e995u;
    for (int i = 0; i < n; i++) {
        if (rnnt_stream_create(m, &s[i], err, sizeof err)) fail_msg("%s", err);
        fed[i] = prev[i] = 0;
    }
    for (int done = 0; done < n;) {
        for (int i = 0; i < n; i++) {
            if (rnnt_stream_is_final(s[i])) continue;
            if (fed[i] < u[i].T || !u[i].T) {
                int c = next_chunk(how[i], u[i].T - fed[i], &rng);
                if (rnnt_stream_accept_features(s[i], u[i].x + (size_t)fed[i] * m->feature_dim, c, m->feature_dim, 0, err, sizeof err))
                    fail_msg("%s", err);
                fed[i] += c;
            }
            if (fed[i] == u[i].T && rnnt_stream_input_finished(s[i], err, sizeof err)) fail_msg("%s", err);
        }
        for (int first = 0; first < n; first += rnnt_runner_get_params(r)->max_batch) {
            int nb = n - first < rnnt_runner_get_params(r)->max_batch ? n - first : rnnt_runner_get_params(r)->max_batch;
            if (rnnt_runner_advance_streams(r, nb, s + first, NULL, err, sizeof err)) fail_msg("%s", err);
        }
        done = 0;
        for (int i = 0; i < n; i++) {
            check_partial(m, s[i], &want[i], fed[i], &prev[i], what);
            done += rnnt_stream_is_final(s[i]);
        }
    }
    for (int i = 0; i < n; i++) {
        rnnt_result res = {0};
        if (rnnt_stream_get_result(s[i], &res, err, sizeof err)) fail_msg("%s", err);
        char w[600];
        snprintf(w, sizeof w, "%.400s, utterance %d (T=%d, chunking %d, %d streams)", what, i, u[i].T, how[i], n);
        expect_same(&res, &want[i], w);
        assert_false(rnnt_stream_ready(s[i]));
        rnnt_result_clear(&res);
        rnnt_stream_free(s[i]);
    }
}

/* Every utterance alone under every chunking, then all of them in one batch with mixed chunkings.
 * Returns the labels of the whole-utterance decodes. */
static int check_utterances(const rnnt_model *m, int n, const utt *u, const char *what)
{
    char err[512];
    int maxT = 1;
    for (int i = 0; i < n; i++)
        if (u[i].T > maxT) maxT = u[i].T;
    rnnt_runner *r = test_runner(m, 16, maxT);
    rnnt_result *want = calloc((size_t)n, sizeof *want);
    int labels = 0;
    for (int i = 0; i < n; i++) {
        rnnt_input in = {u[i].x, u[i].T, 0};
        if (rnnt_runner_decode(r, 1, &in, &want[i], NULL, err, sizeof err)) fail_msg("%s", err);
        labels += want[i].n_tokens;
    }
    for (int c = 0; c < N_CHUNKINGS; c++)
        for (int i = 0; i < n; i++) {
            char w[600];
            snprintf(w, sizeof w, "%s alone", what);
            run_streams(m, r, 1, &u[i], &chunkings[c], &want[i], w);
        }
    int how[64];
    for (int i = 0; i < n; i++) how[i] = chunkings[(i + (int)(g_seed % N_CHUNKINGS)) % N_CHUNKINGS];
    char w[600];
    snprintf(w, sizeof w, "%s mixed", what);
    run_streams(m, r, n, u, how, want, w);
    for (int i = 0; i < n; i++) rnnt_result_clear(&want[i]);
    free(want);
    rnnt_runner_free(r);
    return labels;
}

/* Fresh random features around the model's normalisation, lengths 0, 1 and random up to max_T. */
static float *random_utts_upto(const rnnt_model *m, int n, int max_T, utt *u, uint64_t *seed)
{
    int F = m->feature_dim, total = 0, T[MAX_STREAMS];
    assert_true(n <= MAX_STREAMS);
    for (int i = 0; i < n; i++) {
        T[i] = i == 0 ? 0 : i == 1 ? 1 : (int)(tu_rand_next(seed) % (uint64_t)(max_T + 1));
        total += T[i];
    }
    float *x = malloc(((size_t)total * F + 1) * sizeof(float)), *p = x;
    for (int i = 0; i < n; i++) {
        for (int t = 0; t < T[i]; t++)
            for (int f = 0; f < F; f++) {
                float v = 1.7f * tu_randu(seed);
                p[(size_t)t * F + f] = m->fe_mean ? m->fe_mean[f] + m->fe_std[f] * v : v;
            }
        u[i] = (utt){p, T[i]};
        p += (size_t)T[i] * F;
    }
    return x;
}

static float *random_utts(const rnnt_model *m, int n, utt *u, uint64_t *seed) { return random_utts_upto(m, n, 90, u, seed); }

static void test_golden_models(void **state)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/golden", tu_data_dir());
    DIR *d = opendir(root);
    if (!d) fail_msg("no golden directory %s", root);
    struct dirent *e;
    int n_models = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[4096 + 256], path[4400], err[512];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        snprintf(path, sizeof path, "%s/model.yaml", dir);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fclose(f);
        rnnt_model *m;
        if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
        int plain = 1;
        for (int l = 0; l < m->n_enc; l++) plain &= rnnt_lstm_layer_plain(&m->enc[l]);
        if (!plain && g_backend == RNNT_BACKEND_CUDA) { /* CUDA streams refuse them (kernels/cu_stream.cu) */
            printf("golden %s: projection LSTMs / LayerNorm: no CUDA streams, skipped\n", e->d_name);
            rnnt_model_free(m);
            continue;
        }
        /* The reference's utterances, then fresh random ones. */
        rnnt_npy a[16];
        utt u[32];
        int n = 0;
        for (; n < 16; n++) {
            snprintf(path, sizeof path, "%s/utt%d.npy", dir, n);
            if (!(f = fopen(path, "rb"))) break;
            fclose(f);
            if (rnnt_npy_load(path, m->feature_dim, 0, 0, &a[n], err, sizeof err)) fail_msg("%s", err);
            u[n] = (utt){a[n].data, a[n].rows};
        }
        assert_true(n >= 4);
        uint64_t seed = g_seed + (uint64_t)n_models;
        float *x = random_utts(m, 10, u + n, &seed);
        int labels = check_utterances(m, n + 10, u, e->d_name);
        assert_true(labels > 0);
        printf("%s: %d utterances, %d labels: identical under every chunking, alone and mixed\n", e->d_name, n + 10, labels);
        for (int i = 0; i < n; i++) rnnt_npy_free(&a[i]);
        free(x);
        rnnt_model_free(m);
        n_models++;
    }
    closedir(d);
    assert_true(n_models >= 6);
}

/* The generated model of test_util in variants: activations, joint, max_symbols, big-blank durations. */
static void test_generated_models(void **state)
{
    static const struct {
        const char *from, *to;
    } variants[] = {
        {NULL, NULL},
        {"lstm_activation: hard", "lstm_activation: soft"},
        {"max_symbols: 3", "max_symbols: 1"},
        {"activation: relu", "activation: tanh"},
        {"big_blank_durations: [2, 3]", "big_blank_durations: [5, 9]"},
    };
    int labels = 0;
    for (int v = 0; v < 5; v++)
        for (int rep = 0; rep < 2; rep++) {
            char *yaml = strdup(tu_small_yaml);
            if (variants[v].from) {
                char *at = strstr(yaml, variants[v].from);
                assert_non_null(at);
                char *y2 = malloc(strlen(yaml) + 64);
                sprintf(y2, "%.*s%s%s", (int)(at - yaml), yaml, variants[v].to, at + strlen(variants[v].from));
                free(yaml);
                yaml = y2;
            }
            char *dir = tu_tmpdir(), err[512];
            uint64_t seed = g_seed * 31 + (uint64_t)(v * 2 + rep);
            tu_write_small_model(dir, seed, yaml);
            rnnt_model *m;
            if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
            utt u[12];
            float *x = random_utts(m, 12, u, &seed);
            char what[128];
            snprintf(what, sizeof what, "generated model, variant %d, seed %llu", v, (unsigned long long)seed);
            labels += check_utterances(m, 12, u, what);
            free(x);
            rnnt_model_free(m);
            tu_rmdir(dir);
            free(yaml);
        }
    printf("generated models: 10 models, %d labels: identical under every chunking\n", labels);
    assert_true(labels > 0);
}

static rnnt_model *load_shipped(void)
{
    char dir[4096], err[512];
    snprintf(dir, sizeof dir, "%s/../../models/en-char-small", tu_data_dir());
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    return m;
}

/* A runner of the tested backend and precision taking max_batch streams. */
static void test_shipped_model(void **state)
{
    rnnt_model *m = load_shipped();
    static const char *names[] = {"01-flite-kal16", "02-espeak-en-gb-x-rp-klatt", "03-festival-kal-diphone", "04-flite-rms"};
    rnnt_npy a[4];
    utt u[4];
    for (int i = 0; i < 4; i++) {
        char path[4400], err[512];
        snprintf(path, sizeof path, "%s/../../models/en-char-small/samples/%s.npy", tu_data_dir(), names[i]);
        if (rnnt_npy_load(path, m->feature_dim, 0, 0, &a[i], err, sizeof err)) fail_msg("%s", err);
        u[i] = (utt){a[i].data, a[i].rows};
    }
    int labels = check_utterances(m, 4, u, "en-char-small");
    /* 160 ms chunks (16 frames), the daemon's expected size, all four in one batch. */
    char err[512];
    rnnt_runner *r = test_runner(m, 4, 0);
    rnnt_result want[4] = {{0}};
    rnnt_input in[4];
    for (int i = 0; i < 4; i++) in[i] = (rnnt_input){u[i].x, u[i].T, 0};
    if (rnnt_runner_decode(r, 4, in, want, NULL, err, sizeof err)) fail_msg("%s", err);
    int how[4] = {16, 16, 16, 16};
    run_streams(m, r, 4, u, how, want, "en-char-small, 160 ms chunks");
    printf("en-char-small: 4 samples, %d labels, e.g. '%s': identical under every chunking\n", labels, want[0].text);
    assert_true(labels > 20);
    for (int i = 0; i < 4; i++) {
        rnnt_result_clear(&want[i]);
        rnnt_npy_free(&a[i]);
    }
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

/* A runner whose max_frames is smaller than a stream's input takes it in several advances. */
static void test_chunk_larger_than_runner(void **state)
{
    char *dir = tu_tmpdir(), err[512];
    tu_write_small_model(dir, g_seed + 77, NULL);
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    uint64_t seed = g_seed + 78;
    utt u[8];
    float *x = random_utts(m, 8, u, &seed);
    rnnt_runner *whole = test_runner(m, 8, 0), *small = test_runner(m, 8, 5);
    for (int i = 0; i < 8; i++) {
        rnnt_input in = {u[i].x, u[i].T, 0};
        rnnt_result want = {0}, got = {0};
        if (rnnt_runner_decode(whole, 1, &in, &want, NULL, err, sizeof err)) fail_msg("%s", err);
        rnnt_stream *s;
        if (rnnt_stream_create(m, &s, err, sizeof err)) fail_msg("%s", err);
        if (rnnt_stream_accept_features(s, u[i].x, u[i].T, m->feature_dim, 0, err, sizeof err)) fail_msg("%s", err);
        if (rnnt_stream_input_finished(s, err, sizeof err)) fail_msg("%s", err);
        int calls = 0;
        while (!rnnt_stream_is_final(s)) {
            assert_true(rnnt_stream_ready(s));
            if (rnnt_runner_advance_streams(small, 1, &s, NULL, err, sizeof err)) fail_msg("%s", err);
            assert_true(++calls <= u[i].T / 4 + 2); /* 4 frames a call: whole stacks of 2 */
        }
        assert_int_equal(rnnt_stream_pending_frames(s), 0);
        if (rnnt_stream_get_result(s, &got, err, sizeof err)) fail_msg("%s", err);
        expect_same(&got, &want, "max_frames 5");
        rnnt_result_clear(&want);
        rnnt_result_clear(&got);
        rnnt_stream_free(s);
    }
    free(x);
    rnnt_runner_free(whole);
    rnnt_runner_free(small);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

static void test_empty_and_zero_chunks(void **state)
{
    rnnt_model *m = load_shipped();
    char err[512];
    rnnt_runner *r = test_runner(m, 2, 0);
    rnnt_stream *s[2];
    for (int i = 0; i < 2; i++)
        if (rnnt_stream_create(m, &s[i], err, sizeof err)) fail_msg("%s", err);
    /* Nothing fed: nothing to do, an empty partial result. */
    assert_false(rnnt_stream_ready(s[0]));
    assert_false(rnnt_stream_is_final(s[0]));
    if (rnnt_runner_advance_streams(r, 2, s, NULL, err, sizeof err)) fail_msg("%s", err);
    rnnt_result res = {0};
    if (rnnt_stream_get_result(s[0], &res, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(res.n_tokens, 0);
    assert_int_equal(res.encoder_frames, 0);
    assert_string_equal(res.text, "");
    /* A chunk of 0 frames is accepted (features may be NULL) and changes nothing. */
    assert_int_equal(rnnt_stream_accept_features(s[1], NULL, 0, m->feature_dim, 0, err, sizeof err), RNNT_OK);
    float frame[80] = {0};
    for (int i = 0; i < 5; i++) /* 5 frames: one stacked frame of 3, no encoder frame yet (time stack 2) */
        assert_int_equal(rnnt_stream_accept_features(s[1], frame, 1, 80, 0, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_stream_pending_frames(s[1]), 5);
    assert_true(rnnt_stream_ready(s[1]));
    if (rnnt_runner_advance_streams(r, 2, s, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(rnnt_stream_pending_frames(s[1]), 2); /* the frame-stacking remainder waits */
    if (rnnt_stream_get_result(s[1], &res, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(res.encoder_frames, 0);
    /* Finish with no input at all: final at once, no tokens. */
    if (rnnt_stream_input_finished(s[0], err, sizeof err)) fail_msg("%s", err);
    assert_true(rnnt_stream_ready(s[0]));
    if (rnnt_stream_input_finished(s[1], err, sizeof err)) fail_msg("%s", err);
    if (rnnt_runner_advance_streams(r, 2, s, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_true(rnnt_stream_is_final(s[0]));
    assert_true(rnnt_stream_is_final(s[1]));
    if (rnnt_stream_get_result(s[0], &res, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(res.n_tokens, 0);
    assert_int_equal(res.encoder_frames, 0);
    assert_int_equal(res.status, RNNT_OK);
    if (rnnt_stream_get_result(s[1], &res, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(res.encoder_frames, rnnt_model_encoder_frames(m, 5)); /* padded: 5 frames -> 1 */
    /* Advancing final streams again changes nothing. */
    if (rnnt_runner_advance_streams(r, 2, s, NULL, err, sizeof err)) fail_msg("%s", err);
    rnnt_result again = {0};
    if (rnnt_stream_get_result(s[1], &again, err, sizeof err)) fail_msg("%s", err);
    expect_same(&again, &res, "advanced after the end");
    rnnt_result_clear(&again);
    rnnt_result_clear(&res);
    for (int i = 0; i < 2; i++) rnnt_stream_free(s[i]);
    rnnt_stream_free(NULL);
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

static void test_errors(void **state)
{
    rnnt_model *m = load_shipped();
    char *dir = tu_tmpdir(), err[512];
    tu_write_small_model(dir, 5, NULL);
    rnnt_model *other;
    if (rnnt_model_load(dir, &other, err, sizeof err)) fail_msg("%s", err);
    rnnt_runner *r = test_runner(m, 2, 0);
    rnnt_stream *s, *t, *o;
    assert_int_equal(rnnt_stream_create(NULL, &s, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_create(m, NULL, err, sizeof err), RNNT_ERR_INVALID);
    if (rnnt_stream_create(m, &s, err, sizeof err) || rnnt_stream_create(other, &t, err, sizeof err) ||
        rnnt_stream_create(other, &o, err, sizeof err))
        fail_msg("%s", err);
    float x[3 * 80];
    for (int i = 0; i < 3 * 80; i++) x[i] = 0.25f * (float)(i % 7);
    /* Wrong width. */
    assert_int_equal(rnnt_stream_accept_features(s, x, 3, 40, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "40 features per frame, the model expects 80"));
    /* Negative count, no data. */
    assert_int_equal(rnnt_stream_accept_features(s, x, -1, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_accept_features(s, NULL, 2, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    /* Non-finite values: refused with the frame and feature (counted over the stream), nothing kept. */
    assert_int_equal(rnnt_stream_accept_features(s, x, 3, 80, 0, err, sizeof err), RNNT_OK);
    float bad[2 * 80];
    memcpy(bad, x, sizeof bad);
    bad[80 + 17] = 0.0f / 0.0f;
    assert_int_equal(rnnt_stream_accept_features(s, bad, 2, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "non-finite feature at frame 4, feature 17"));
    bad[80 + 17] = 1.0f / 0.0f;
    assert_int_equal(rnnt_stream_accept_features(s, bad, 2, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_pending_frames(s), 3);
    /* Batch errors: nothing advanced. */
    rnnt_stream *dup[2] = {s, s}, *mixed[2] = {s, o}, *nul[2] = {s, NULL}, *three[3] = {s, t, t};
    assert_int_equal(rnnt_runner_advance_streams(r, 2, dup, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "stream 1 is also stream 0"));
    assert_int_equal(rnnt_runner_advance_streams(r, 2, mixed, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "another model"));
    assert_int_equal(rnnt_runner_advance_streams(r, 2, nul, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_runner_advance_streams(r, 3, three, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(rnnt_runner_advance_streams(r, 0, three, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(rnnt_stream_pending_frames(s), 3);
    /* Too much input waiting unadvanced (on the 6-feature model: 8.6 MB). */
    float *big = calloc((size_t)RNNT_STREAM_MAX_PENDING * 6, sizeof(float));
    assert_non_null(big);
    assert_int_equal(rnnt_stream_accept_features(t, big, RNNT_STREAM_MAX_PENDING - 1, 6, 1, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_stream_accept_features(t, big, 2, 6, 1, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_non_null(strstr(err, "would wait unencoded"));
    assert_int_equal(rnnt_stream_accept_features(t, big, 1, 6, 1, err, sizeof err), RNNT_OK);
    free(big);
    /* Features after the end of input. */
    assert_int_equal(rnnt_stream_input_finished(s, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_stream_accept_features(s, x, 1, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "after the end of input"));
    assert_int_equal(rnnt_stream_accept_features(s, NULL, 0, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_runner_advance_streams(r, 1, &s, NULL, err, sizeof err), RNNT_OK);
    assert_true(rnnt_stream_is_final(s));
    rnnt_result res = {0};
    assert_int_equal(rnnt_stream_get_result(s, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_get_result(NULL, &res, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_input_finished(NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_accept_features(NULL, x, 1, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    rnnt_stream_free(s);
    rnnt_stream_free(t);
    rnnt_stream_free(o);
    rnnt_runner_free(r);
    rnnt_model_free(other);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

/* The encoder layer itself, bitwise: rows projected and run in chunks with carried state give the
 * same bits as all rows at once, whatever shares the batch (fails with OpenBLAS for the input
 * projection: its 1- and 3-row sgemm give other bits on this project's machine). */
static void test_layer_chunks_bitwise(void **state)
{
    uint64_t seed = g_seed + 99;
    for (int act = 0; act < 2; act++) {
        const int I = 37, H = 29, G = 4 * H, T = 61;
        float *w = malloc(sizeof(float) * ((size_t)G * I + (size_t)G * H + G));
        for (size_t i = 0; i < (size_t)G * I + (size_t)G * H + G; i++) w[i] = 0.4f * tu_randu(&seed);
        rnnt_lstm_layer L = {.input = I, .hidden = H, .time_stack = 1, .w_ih = w, .w_hh = w + (size_t)G * I, .bias = w + (size_t)G * (I + H)};
        float x[T * I], y_whole[T * H], y_chunk[T * H + 1], pre[T * G], h0[H], c0[H], h1[H], c1[H];
        for (int i = 0; i < T * I; i++) x[i] = 2.0f * tu_randu(&seed);
        float *work = malloc(sizeof(float) * rnnt_cpu_lstm_layer_batch_work(&L, 3));
        memset(h0, 0, sizeof h0);
        memset(c0, 0, sizeof c0);
        {
            int rows = T;
            const float *xs = x;
            float *ys = y_whole, *hs = h0, *cs = c0, *ps = pre;
            rnnt_cpu_lstm_layer_batch(&L, (rnnt_lstm_act)act, 1, &rows, &xs, &ys, &hs, &cs, &ps, work);
        }
        for (int how = 0; how < 4; how++) {
            memset(h1, 0, sizeof h1);
            memset(c1, 0, sizeof c1);
            /* Two other utterances share every call, with other lengths and states. */
            float ox[2][20 * I], oy[2][20 * H], oh[2][H], oc[2][H], opre[2][20 * G];
            for (int i = 0; i < 2 * 20 * I; i++) ox[i / (20 * I)][i % (20 * I)] = tu_randu(&seed);
            for (int i = 0; i < 2 * H; i++) oh[i / H][i % H] = oc[i / H][i % H] = 0.5f * tu_randu(&seed);
            for (int t0 = 0; t0 < T;) {
                int c = how == 0 ? 1 : how == 1 ? 3 : how == 2 ? 7 : 1 + (int)(tu_rand_next(&seed) % 9);
                if (c > T - t0) c = T - t0;
                int rows[3] = {(int)(tu_rand_next(&seed) % 21), c, (int)(tu_rand_next(&seed) % 21)};
                const float *xs[3] = {ox[0], x + (size_t)t0 * I, ox[1]};
                float *ys[3] = {oy[0], y_chunk + (size_t)t0 * H, oy[1]}, *hs[3] = {oh[0], h1, oh[1]}, *cs[3] = {oc[0], c1, oc[1]};
                float *ps[3] = {opre[0], pre, opre[1]};
                rnnt_cpu_lstm_layer_batch(&L, (rnnt_lstm_act)act, 3, rows, xs, ys, hs, cs, ps, work);
                t0 += c;
            }
            if (memcmp(y_chunk, y_whole, sizeof(float) * T * H) || memcmp(h1, h0, sizeof h0) || memcmp(c1, c0, sizeof c0))
                fail_msg("layer outputs or state differ in chunks (chunking %d, act %d, seed %llu)", how, act, (unsigned long long)g_seed);
        }
        free(work);
        free(w);
    }
}

/* A model whose joint output overflows: the stream stops with RNNT_ERR_NUMERIC as the whole decode
 * does, is final and refuses more input with that status; a stream without input in the same batch
 * is untouched. */
static void test_numeric_failure(void **state)
{
    if (g_precision == RNNT_PRECISION_FP16) skip(); /* its 3e38 weights fit no fp16 */
    char *dir = tu_tmpdir(), err[512];
    tu_tensor *t;
    int nt = tu_small_tensors(g_seed + 5, &t);
    for (int i = 0; i < nt; i++) { /* every joint hidden unit >= 90 (relu keeps it), every output weight 3e38 */
        float v = !strcmp(t[i].name, "joint.out.weight") ? 3e38f : !strcmp(t[i].name, "joint.enc.bias") ? 100.0f : 0.0f;
        if (v != 0.0f)
            for (size_t j = 0; j < t[i].nbytes / 4; j++) ((float *)t[i].data)[j] = v;
    }
    char path[4400];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    tu_write_safetensors(path, t, nt);
    tu_free_tensors(t, nt);
    tu_write_file(dir, "model.yaml", tu_small_yaml, strlen(tu_small_yaml));
    tu_write_file(dir, "tokens.txt", "\xe2\x96\x81\na\nb\nc\n", 10);
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    uint64_t seed = g_seed + 7;
    float x[20 * 6];
    for (int i = 0; i < 20 * 6; i++) x[i] = 2.0f * tu_randu(&seed);
    rnnt_runner *r = test_runner(m, 2, 0);
    rnnt_input in = {x, 20, 0};
    rnnt_result want = {0}, got = {0};
    if (rnnt_runner_decode(r, 1, &in, &want, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(want.status, RNNT_ERR_NUMERIC);
    rnnt_stream *s[2];
    if (rnnt_stream_create(m, &s[0], err, sizeof err) || rnnt_stream_create(m, &s[1], err, sizeof err)) fail_msg("%s", err);
    if (rnnt_stream_accept_features(s[0], x, 20, 6, 0, err, sizeof err)) fail_msg("%s", err);
    if (rnnt_runner_advance_streams(r, 2, s, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_true(rnnt_stream_is_final(s[0]));
    assert_false(rnnt_stream_ready(s[0]));
    if (rnnt_stream_get_result(s[0], &got, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(got.status, RNNT_ERR_NUMERIC);
    assert_null(got.text);
    assert_int_equal(got.n_tokens, want.n_tokens);
    assert_int_equal(rnnt_stream_accept_features(s[0], x, 1, 6, 0, err, sizeof err), RNNT_ERR_NUMERIC);
    assert_non_null(strstr(err, "the stream has stopped"));
    assert_false(rnnt_stream_is_final(s[1]));
    if (rnnt_stream_get_result(s[1], &got, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(got.status, RNNT_OK);
    assert_int_equal(got.encoder_frames, 0);
    rnnt_result_clear(&got);
    rnnt_result_clear(&want);
    rnnt_stream_free(s[0]);
    rnnt_stream_free(s[1]);
    rnnt_runner_free(r);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

/* A stream bound to a backend that keeps its state on a device (the CUDA backend's slot, stream.h dev)
 * is refused by another backend, unchanged, and rnnt_stream_free gives the slot back once. */
static int g_released, g_released_slot;
static void fake_release(void *owner, int slot)
{
    g_released++;
    g_released_slot = slot + (owner == &g_released ? 1000 : 0);
}

static void test_device_binding(void **state)
{
    rnnt_model *m = load_shipped();
    char err[512];
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = 2;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    rnnt_stream *s[2];
    for (int i = 0; i < 2; i++)
        if (rnnt_stream_create(m, &s[i], err, sizeof err)) fail_msg("%s", err);
    float x[6 * 80];
    for (int i = 0; i < 6 * 80; i++) x[i] = 0.125f * (float)(i % 5);
    for (int i = 0; i < 2; i++)
        if (rnnt_stream_accept_features(s[i], x, 6, 80, 0, err, sizeof err)) fail_msg("%s", err);
    static const int other_backend = 0;
    s[1]->dev.ops = &other_backend;
    s[1]->dev.owner = &g_released;
    s[1]->dev.slot = 7;
    s[1]->dev.release = fake_release;
    assert_int_equal(rnnt_runner_advance_streams(r, 2, s, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "stream 1's state lives on another backend's device"));
    assert_int_equal(rnnt_stream_pending_frames(s[0]), 6); /* nothing advanced */
    assert_int_equal(rnnt_stream_pending_frames(s[1]), 6);
    assert_int_equal(rnnt_runner_advance_streams(r, 1, s, NULL, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_stream_pending_frames(s[0]), 0);
    g_released = 0;
    rnnt_stream_free(s[0]);
    assert_int_equal(g_released, 0);
    rnnt_stream_free(s[1]);
    assert_int_equal(g_released, 1);
    assert_int_equal(g_released_slot, 1007);
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

/* CUDA: a stream lives in a slot of the runner that first advanced it. Another runner (of the same
 * model) refuses a batch holding it with RNNT_ERR_INVALID and changes nothing: neither that stream nor
 * the fresh stream before it in the batch (which takes no slot there); the owner then finishes both,
 * equal to the whole-utterance decodes. */
static void test_cuda_other_runner(void **state)
{
    rnnt_model *m = load_shipped();
    char err[512];
    rnnt_runner *ra = test_runner(m, 2, 0), *rb = test_runner(m, 2, 0);
    rnnt_npy a;
    char path[4400];
    snprintf(path, sizeof path, "%s/../../models/en-char-small/samples/01-flite-kal16.npy", tu_data_dir());
    if (rnnt_npy_load(path, m->feature_dim, 0, 0, &a, err, sizeof err)) fail_msg("%s", err);
    const int T = a.rows, F = m->feature_dim, half = T / 2;
    rnnt_result want = {0};
    rnnt_input in = {a.data, T, 0};
    if (rnnt_runner_decode(ra, 1, &in, &want, NULL, err, sizeof err)) fail_msg("%s", err);
    rnnt_stream *s[2]; /* s[0] fresh, s[1] bound to ra */
    for (int i = 0; i < 2; i++)
        if (rnnt_stream_create(m, &s[i], err, sizeof err)) fail_msg("%s", err);
    if (rnnt_stream_accept_features(s[1], a.data, half, F, 0, err, sizeof err) ||
        rnnt_runner_advance_streams(ra, 1, &s[1], NULL, err, sizeof err))
        fail_msg("%s", err);
    rnnt_result before = {0}, after = {0};
    if (rnnt_stream_get_result(s[1], &before, err, sizeof err)) fail_msg("%s", err);
    assert_true(before.encoder_frames > 0);
    if (rnnt_stream_accept_features(s[0], a.data, T, F, 0, err, sizeof err) ||
        rnnt_stream_accept_features(s[1], a.data + (size_t)half * F, T - half, F, 0, err, sizeof err))
        fail_msg("%s", err);
    int pending0 = rnnt_stream_pending_frames(s[0]), pending1 = rnnt_stream_pending_frames(s[1]);
    assert_int_equal(rnnt_runner_advance_streams(rb, 2, s, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "stream 1 is bound to another runner's device"));
    assert_int_equal(rnnt_stream_pending_frames(s[0]), pending0);
    assert_int_equal(rnnt_stream_pending_frames(s[1]), pending1);
    assert_null(s[0]->dev.owner); /* no slot of rb taken */
    if (rnnt_stream_get_result(s[1], &after, err, sizeof err)) fail_msg("%s", err);
    expect_same(&after, &before, "the refused stream");
    rnnt_result_clear(&after);
    for (int i = 0; i < 2; i++)
        if (rnnt_stream_input_finished(s[i], err, sizeof err)) fail_msg("%s", err);
    while (!rnnt_stream_is_final(s[0]) || !rnnt_stream_is_final(s[1]))
        if (rnnt_runner_advance_streams(ra, 2, s, NULL, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < 2; i++) {
        if (rnnt_stream_get_result(s[i], &after, err, sizeof err)) fail_msg("%s", err);
        expect_same(&after, &want, i ? "bound stream after the refusal" : "fresh stream after the refusal");
        rnnt_result_clear(&after);
        rnnt_stream_free(s[i]);
    }
    /* A stream a CPU runner has encoded frames of: its state is in host memory, a CUDA runner refuses it. */
    rnnt_runner_params pc = rnnt_runner_default_params();
    pc.backend = RNNT_BACKEND_CPU;
    rnnt_runner *rc;
    rnnt_stream *h;
    if (rnnt_runner_create(m, &pc, &rc, err, sizeof err) || rnnt_stream_create(m, &h, err, sizeof err) ||
        rnnt_stream_accept_features(h, a.data, half, F, 0, err, sizeof err) || rnnt_runner_advance_streams(rc, 1, &h, NULL, err, sizeof err))
        fail_msg("%s", err);
    assert_true(h->enc_frames > 0);
    if (rnnt_stream_accept_features(h, a.data + (size_t)half * F, 8, F, 0, err, sizeof err)) fail_msg("%s", err);
    pending1 = rnnt_stream_pending_frames(h);
    assert_int_equal(rnnt_runner_advance_streams(ra, 1, &h, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "advanced by the CPU backend"));
    assert_int_equal(rnnt_stream_pending_frames(h), pending1);
    assert_null(h->dev.owner);
    rnnt_stream_free(h);
    rnnt_runner_free(rc);
    printf("another runner: refused, nothing changed; the owner finishes '%s'\n", want.text);
    rnnt_result_clear(&before);
    rnnt_result_clear(&want);
    rnnt_npy_free(&a);
    rnnt_runner_free(ra);
    rnnt_runner_free(rb);
    rnnt_model_free(m);
}

/* More live streams than the CUDA slot pool starts with (64): it grows while streams are bound, copying
 * the live records. 80 streams of random features (lengths 0, 1, then up to 120; every chunking), all created
 * first and advanced together in batches of 16, must equal the whole-utterance decodes. */
static void test_many_streams(void **state)
{
    rnnt_model *m = load_shipped();
    char err[512];
    enum { N = 80 };
    uint64_t seed = g_seed ^ 0x6a09e667u;
    utt u[N];
    int how[N];
    for (int i = 0; i < N; i++) how[i] = chunkings[i % N_CHUNKINGS];
    float *x = random_utts_upto(m, N, 120, u, &seed);
    rnnt_runner *r = test_runner(m, 16, 0);
    rnnt_result want[N];
    int labels = 0;
    for (int i = 0; i < N; i++) {
        want[i] = (rnnt_result){0};
        rnnt_input in = {u[i].x, u[i].T, 0};
        if (rnnt_runner_decode(r, 1, &in, &want[i], NULL, err, sizeof err)) fail_msg("%s", err);
        labels += want[i].n_tokens;
    }
    run_streams(m, r, N, u, how, want, "80 live streams");
    printf("%d live streams on one runner, %d labels: identical to the whole utterances\n", N, labels);
    for (int i = 0; i < N; i++) rnnt_result_clear(&want[i]);
    free(x);
    rnnt_runner_free(r);
    rnnt_model_free(m);
}

/* Audio: the shipped samples' WAVs fed as samples in chunks of 160 (the hop), 333 (not aligned),
 * random 0..4000 and 1 sample at a time (advancing every 997 samples), float and 16-bit, all four in
 * one batch: the final results equal the whole-utterance decode of rnnt_frontend_compute_f32's
 * features. Then the audio errors. */
static void test_audio_streams(void **state)
{
    rnnt_model *m = load_shipped();
    char err[512];
    rnnt_frontend *fe, *fe2;
    if (rnnt_frontend_create(m, &fe, err, sizeof err) || rnnt_frontend_create(m, &fe2, err, sizeof err)) fail_msg("%s", err);
    static const char *names[] = {"01-flite-kal16", "02-espeak-en-gb-x-rp-klatt", "03-festival-kal-diphone", "04-flite-rms"};
    float *x[4];
    int16_t *x16[4];
    size_t n[4];
    rnnt_result want[4] = {{0}};
    rnnt_runner *r = test_runner(m, 4, 0);
    for (int i = 0; i < 4; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/../../models/en-char-small/samples/%s.wav", tu_data_dir(), names[i]);
        if (rnnt_audio_load_file(path, 16000, NULL, &x[i], &n[i], NULL, err, sizeof err)) fail_msg("%s", err);
        x16[i] = malloc(n[i] * sizeof(int16_t));
        for (size_t j = 0; j < n[i]; j++) x16[i][j] = (int16_t)lrintf(x[i][j] * 32768.0f); /* exact: 16-bit WAVs */
        float *feats;
        int frames;
        if (rnnt_frontend_compute_f32(fe, x[i], n[i], 0, &feats, &frames, err, sizeof err)) fail_msg("%s", err);
        rnnt_input in = {feats, frames, 0};
        if (rnnt_runner_decode(r, 1, &in, &want[i], NULL, err, sizeof err)) fail_msg("%s", err);
        free(feats);
    }
    static const int sizes[] = {160, 333, 0, 1};
    uint64_t rng = g_seed ^ 0xa0d10;
    for (int rot = 0; rot < 4; rot++) { /* stream i gets chunking (i + rot) % 4; odd rounds in 16-bit */
        rnnt_stream *s[4];
        size_t fed[4] = {0};
        for (int i = 0; i < 4; i++)
            if (rnnt_stream_create(m, &s[i], err, sizeof err)) fail_msg("%s", err);
        for (int done = 0; done < 4;) {
            for (int i = 0; i < 4; i++) {
                int how = sizes[(i + rot) % 4];
                /* One-sample feeding: many feeds per advance. */
                for (int k = 0; k < (how == 1 ? 997 : 1) && fed[i] < n[i]; k++) {
                    size_t c = how ? (size_t)how : (size_t)(tu_rand_next(&rng) % 4001);
                    if (c > n[i] - fed[i]) c = n[i] - fed[i];
                    rnnt_status st = rot & 1 ? rnnt_stream_accept_audio_s16(s[i], fe, x16[i] + fed[i], c, err, sizeof err)
                                             : rnnt_stream_accept_audio_f32(s[i], fe, x[i] + fed[i], c, err, sizeof err);
                    if (st) fail_msg("%s", err);
                    fed[i] += c;
                }
                if (fed[i] == n[i] && !rnnt_stream_is_final(s[i])) rnnt_stream_input_finished(s[i], err, sizeof err);
            }
            if (rnnt_runner_advance_streams(r, 4, s, NULL, err, sizeof err)) fail_msg("%s", err);
            done = 0;
            for (int i = 0; i < 4; i++) done += rnnt_stream_is_final(s[i]);
        }
        for (int i = 0; i < 4; i++) {
            rnnt_result got = {0};
            if (rnnt_stream_get_result(s[i], &got, err, sizeof err)) fail_msg("%s", err);
            char what[128];
            snprintf(what, sizeof what, "audio %s, chunks of %d samples, %s", names[i], sizes[(i + rot) % 4], rot & 1 ? "s16" : "f32");
            expect_same(&got, &want[i], what);
            rnnt_result_clear(&got);
            rnnt_stream_free(s[i]);
        }
    }
    printf("audio: 4 samples, '%s': identical in chunks of 160, 333, random and 1 sample, f32 and s16\n", want[0].text);
    assert_true(want[0].n_tokens > 10);
    /* Errors: each leaves the stream as it was. */
    rnnt_stream *a, *f;
    if (rnnt_stream_create(m, &a, err, sizeof err) || rnnt_stream_create(m, &f, err, sizeof err)) fail_msg("%s", err);
    float bad[500];
    memcpy(bad, x[0] + 10000, sizeof bad);
    bad[321] = 1.0f / 0.0f;
    assert_int_equal(rnnt_stream_accept_audio_f32(a, fe, x[0], 1000, err, sizeof err), RNNT_OK);
    int pending = rnnt_stream_pending_frames(a);
    assert_int_equal(rnnt_stream_accept_audio_f32(a, fe, bad, 500, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_accept_audio_f32(a, fe2, x[0] + 1000, 500, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "another frontend"));
    assert_int_equal(rnnt_stream_accept_audio_f32(a, NULL, x[0] + 1000, 500, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_stream_accept_audio_f32(a, fe, NULL, 500, err, sizeof err), RNNT_ERR_INVALID);
    float frame[80] = {0};
    assert_int_equal(rnnt_stream_accept_features(a, frame, 1, 80, 0, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "features into a stream fed with audio"));
    assert_int_equal(rnnt_stream_pending_frames(a), pending);
    assert_int_equal(rnnt_stream_accept_features(f, frame, 1, 80, 0, err, sizeof err), RNNT_OK);
    assert_int_equal(rnnt_stream_accept_audio_s16(f, fe, x16[0], 100, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "audio into a stream fed with features"));
    rnnt_stream_input_finished(a, err, sizeof err);
    assert_int_equal(rnnt_stream_accept_audio_f32(a, fe, x[0], 10, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "audio after the end of input"));
    rnnt_stream_free(a);
    rnnt_stream_free(f);
    for (int i = 0; i < 4; i++) {
        rnnt_result_clear(&want[i]);
        free(x[i]);
        free(x16[i]);
    }
    rnnt_runner_free(r);
    rnnt_frontend_free(fe);
    rnnt_frontend_free(fe2);
    rnnt_model_free(m);
}

int main(void)
{
    g_seed = getenv("RNNT_TEST_SEED") ? strtoull(getenv("RNNT_TEST_SEED"), NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)g_seed);
    const char *be = getenv("RNNT_TEST_BACKEND"), *pr = getenv("RNNT_TEST_PRECISION");
    if (be && !strcmp(be, "cuda")) {
        if (!rnnt_cuda_available()) {
            printf("no usable CUDA device: skipped\n");
            return 77;
        }
        g_backend = RNNT_BACKEND_CUDA;
        if (pr && !strcmp(pr, "fp16")) g_precision = RNNT_PRECISION_FP16;
        printf("backend cuda, %s\n", g_precision == RNNT_PRECISION_FP16 ? "fp16" : "fp32");
        if (getenv("RNNT_TEST_ONLY")) cmocka_set_test_filter(getenv("RNNT_TEST_ONLY")); /* e.g. under a sanitizer */
        const struct CMUnitTest gpu_tests[] = {
            cmocka_unit_test(test_golden_models),          cmocka_unit_test(test_generated_models),
            cmocka_unit_test(test_shipped_model),          cmocka_unit_test(test_chunk_larger_than_runner),
            cmocka_unit_test(test_empty_and_zero_chunks),  cmocka_unit_test(test_audio_streams),
            cmocka_unit_test(test_numeric_failure),        cmocka_unit_test(test_cuda_other_runner),
            cmocka_unit_test(test_many_streams),
        };
        return cmocka_run_group_tests(gpu_tests, NULL, NULL) ? 1 : 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_chunks_bitwise), cmocka_unit_test(test_golden_models),      cmocka_unit_test(test_generated_models), cmocka_unit_test(test_shipped_model),
        cmocka_unit_test(test_chunk_larger_than_runner), cmocka_unit_test(test_empty_and_zero_chunks), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_numeric_failure), cmocka_unit_test(test_audio_streams), cmocka_unit_test(test_device_binding),
        cmocka_unit_test(test_many_streams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
