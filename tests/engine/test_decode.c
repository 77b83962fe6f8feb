/* test_decode.c — greedy multi-blank decoding semantics on a hand-built model whose decisions are
 * known in advance.
 *
 * The model: F = 5, one hard LSTM encoder layer that passes its input through (i = o = 1, f = 0,
 * g = x), a predictor whose output counts its steps (c += 0.05 per step, so g = 0.05 (u + 1) after u
 * labels), and a joint with z_k = 10 x_k for every output k, minus 40 g = 2 (u + 1) for the two
 * labels. Outputs: 0, 1 labels; 2 big blank of 4 frames; 3 big blank of 2 frames; 4 blank.
 * A frame's features say which output it prefers; labels lose 2 points per label emitted so far. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "test_util.h"

static const char *yaml_fmt =
    "format: rnntd\nversion: 1\nname: hand-built\n"
    "frontend: {sample_rate: 16000, window: hann, win_length: 400, hop_length: 160, n_fft: 512, n_mels: 5,\n"
    "           f_min: 0.0, f_max: 8000.0, mel_scale: slaney, log_floor: 1.0e-10, normalize: none}\n"
    "feature_dim: 5\nframe_stacking: 1\nlstm_activation: hard\n"
    "encoder: {layers: [{input: 5, hidden: 5}]}\n"
    "predictor: {embedding: 1, layers: [{input: 1, hidden: 1}]}\n"
    "joint: {dim: 6, activation: relu}\n"
    "vocab_size: 2\nbig_blank_durations: [2, 4]\nmax_symbols: %d\n";

static char *write_model(int max_symbols, int poison)
{
    char *dir = tu_tmpdir(), yaml[1024];
    snprintf(yaml, sizeof yaml, yaml_fmt, max_symbols);
    tu_write_file(dir, "model.yaml", yaml, strlen(yaml));
    tu_write_file(dir, "tokens.txt", "x\ny\n", 4);
    static float w_ih[20 * 5], w_hh[20 * 5], b_ih[20], b_hh[20], emb[3], p_ih[4], p_hh[4], pb_ih[4], pb_hh[4], je_w[6 * 5], je_b[6],
        jp_w[6], jp_b[6], jo_w[5 * 6], jo_b[5];
    memset(w_ih, 0, sizeof w_ih);
    memset(b_ih, 0, sizeof b_ih);
    for (int j = 0; j < 5; j++) {
        w_ih[(10 + j) * 5 + j] = 1.0f; /* g = x */
        b_ih[j] = 3.0f;                /* i = 1 */
        b_ih[5 + j] = -3.0f;           /* f = 0 */
        b_ih[15 + j] = 3.0f;           /* o = 1 */
    }
    pb_ih[0] = 3.0f;  /* i = 1 */
    pb_ih[1] = 3.0f;  /* f = 1: keep the count */
    pb_ih[2] = 0.05f; /* g = 0.05 per step */
    pb_ih[3] = 3.0f;  /* o = 1 */
    memset(je_w, 0, sizeof je_w);
    for (int j = 0; j < 5; j++) je_w[j * 5 + j] = 1.0f;
    memset(jp_w, 0, sizeof jp_w);
    jp_w[5] = 1.0f;
    memset(jo_w, 0, sizeof jo_w);
    for (int k = 0; k < 5; k++) jo_w[k * 6 + k] = 10.0f;
    jo_w[0 * 6 + 5] = -40.0f;
    jo_w[1 * 6 + 5] = -40.0f;
    if (poison) { /* blank logit overflows to +Inf when x0 and x4 are both 1 */
        jo_w[4 * 6 + 0] = 3e38f;
        jo_w[4 * 6 + 4] = 3e38f;
    }
    const tu_tensor t[] = {
        {"encoder.lstm.0.weight_ih", "F32", 2, {20, 5}, w_ih, sizeof w_ih},
        {"encoder.lstm.0.weight_hh", "F32", 2, {20, 5}, w_hh, sizeof w_hh},
        {"encoder.lstm.0.bias_ih", "F32", 1, {20}, b_ih, sizeof b_ih},
        {"encoder.lstm.0.bias_hh", "F32", 1, {20}, b_hh, sizeof b_hh},
        {"predictor.embedding", "F32", 2, {3, 1}, emb, sizeof emb},
        {"predictor.lstm.0.weight_ih", "F32", 2, {4, 1}, p_ih, sizeof p_ih},
        {"predictor.lstm.0.weight_hh", "F32", 2, {4, 1}, p_hh, sizeof p_hh},
        {"predictor.lstm.0.bias_ih", "F32", 1, {4}, pb_ih, sizeof pb_ih},
        {"predictor.lstm.0.bias_hh", "F32", 1, {4}, pb_hh, sizeof pb_hh},
        {"joint.enc.weight", "F32", 2, {6, 5}, je_w, sizeof je_w},
        {"joint.enc.bias", "F32", 1, {6}, je_b, sizeof je_b},
        {"joint.pred.weight", "F32", 2, {6, 1}, jp_w, sizeof jp_w},
        {"joint.pred.bias", "F32", 1, {6}, jp_b, sizeof jp_b},
        {"joint.out.weight", "F32", 2, {5, 6}, jo_w, sizeof jo_w},
        {"joint.out.bias", "F32", 1, {5}, jo_b, sizeof jo_b},
    };
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    tu_write_safetensors(path, t, (int)(sizeof t / sizeof t[0]));
    return dir;
}

#define LAB0 {1, 0, 0, 0, 0.1f}
#define LAB1 {0, 1, 0, 0, 0.1f}
#define WEAK1 {0, 0.35f, 0, 0, 0.1f}
#define SKIP4 {0, 0, 1, 0, 0}
#define SKIP2 {0, 0, 0, 1, 0}
#define BLANK {0, 0, 0, 0, 1}
#define ZERO {0, 0, 0, 0, 0}

typedef struct {
    const char *what;
    int max_symbols;
    int T;
    float x[8][5];
    int n_tokens;
    int tokens[8], frames[8];
    int skipped, steps;
} scenario;

static const scenario scenarios[] = {
    {"max_symbols cap, then forced forward", 3, 2, {LAB0, BLANK}, 3, {0, 0, 0}, {0, 0, 0}, 0, 4},
    {"labels until the predictor says stop; blanks leave the predictor alone", 10, 3, {BLANK, BLANK, LAB0}, 4, {0, 0, 0, 0}, {2, 2, 2, 2}, 0, 7},
    {"big blanks skip frames, the last skip runs past T", 10, 5, {WEAK1, SKIP2, LAB0, SKIP4, LAB0}, 1, {1}, {0}, 2, 4},
    {"big blank at the last frame", 10, 3, {BLANK, BLANK, SKIP2}, 0, {0}, {0}, 0, 3},
    {"empty input", 10, 0, {{0}}, 0, {0}, {0}, 0, 0},
    {"one frame, capped", 3, 1, {LAB1}, 3, {1, 1, 1}, {0, 0, 0}, 0, 3},
    {"ties go to the lowest index (big blank of 4)", 10, 6, {ZERO, BLANK, BLANK, BLANK, BLANK, BLANK}, 0, {0}, {0}, 3, 3},
};

static void check(const scenario *s, const rnnt_result *r)
{
    assert_int_equal(r->status, RNNT_OK);
    if (r->n_tokens != s->n_tokens) fail_msg("%s: %d tokens, expected %d", s->what, r->n_tokens, s->n_tokens);
    for (int i = 0; i < s->n_tokens; i++) {
        if (r->tokens[i] != s->tokens[i] || r->frames[i] != s->frames[i])
            fail_msg("%s: token %d is (%d @ %d), expected (%d @ %d)", s->what, i, r->tokens[i], r->frames[i], s->tokens[i], s->frames[i]);
    }
    if (r->frames_skipped != s->skipped) fail_msg("%s: %d frames skipped, expected %d", s->what, r->frames_skipped, s->skipped);
    if (r->decode_steps != s->steps) fail_msg("%s: %d joint steps, expected %d", s->what, r->decode_steps, s->steps);
    assert_int_equal(r->encoder_frames, s->T);
}

/* The hand-built model and a CPU runner for it; close_cpu releases all three. */
static rnnt_runner *open_cpu(int max_symbols, int poison, int max_batch, char **dir, rnnt_model **m)
{
    char err[512];
    *dir = write_model(max_symbols, poison);
    if (rnnt_model_load(*dir, m, err, sizeof err)) fail_msg("%s", err);
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    if (max_batch) p.max_batch = max_batch;
    rnnt_runner *r;
    if (rnnt_runner_create(*m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    return r;
}

static void close_cpu(rnnt_runner *r, rnnt_model *m, char *dir)
{
    rnnt_runner_free(r);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

static void run_group(int max_symbols, int batched)
{
    char *dir, err[512];
    rnnt_model *m;
    rnnt_runner *r = open_cpu(max_symbols, 0, 8, &dir, &m);
    int idx[8], n = 0;
    for (int i = 0; i < (int)(sizeof scenarios / sizeof scenarios[0]); i++)
        if (scenarios[i].max_symbols == max_symbols) idx[n++] = i;
    rnnt_input in[8];
    rnnt_result res[8];
    memset(res, 0, sizeof res);
    for (int i = 0; i < n; i++) in[i] = (rnnt_input){&scenarios[idx[i]].x[0][0], scenarios[idx[i]].T, 0};
    if (batched) {
        if (rnnt_runner_decode(r, n, in, res, NULL, err, sizeof err)) fail_msg("%s", err);
    } else
        for (int i = 0; i < n; i++)
            if (rnnt_runner_decode(r, 1, &in[i], &res[i], NULL, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < n; i++) {
        check(&scenarios[idx[i]], &res[i]);
        rnnt_result_clear(&res[i]);
    }
    close_cpu(r, m, dir);
}

static void test_alone(void **state)
{
    run_group(3, 0);
    run_group(10, 0);
}

static void test_batched(void **state)
{
    run_group(3, 1);
    run_group(10, 1);
}

/* rnnt_result_token: each token's id, text, frame, time (frame * frame_shift_s, 10 ms here) and
 * probability, as the result and the model say; the result's text assembled from the tokens. */
static void test_result_tokens(void **state)
{
    char *dir, err[512];
    rnnt_model *m;
    rnnt_runner *r = open_cpu(10, 0, 0, &dir, &m);
    const scenario *s = &scenarios[1]; /* four labels 0 ("x") on frame 2 */
    rnnt_input in = {&s->x[0][0], s->T, 0};
    rnnt_result res = {0};
    if (rnnt_runner_decode(r, 1, &in, &res, NULL, err, sizeof err)) fail_msg("%s", err);
    check(s, &res);
    assert_string_equal(res.text, "xxxx");
    for (int i = 0; i < res.n_tokens; i++) {
        rnnt_token t;
        assert_int_equal(rnnt_result_token(m, &res, i, &t, err, sizeof err), RNNT_OK);
        assert_int_equal(t.id, 0);
        assert_string_equal(t.text, "x");
        assert_int_equal(t.frame, 2);
        assert_true(fabs(t.time_s - 0.02) < 1e-12);
        if (!(t.prob > 0.0f && t.prob <= 1.0f) || t.prob != res.probs[i]) fail_msg("token %d: probability %g", i, t.prob);
    }
    rnnt_token t = {.id = 77};
    assert_int_equal(rnnt_result_token(m, &res, res.n_tokens, &t, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_result_token(m, &res, -1, &t, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(t.id, 77);
    res.tokens[0] = 2; /* not a token: a big blank's id */
    assert_int_equal(rnnt_result_token(m, &res, 0, &t, err, sizeof err), RNNT_ERR_INVALID);
    float *probs = res.probs;
    res.probs = NULL; /* as the CUDA backend's results have none */
    assert_int_equal(rnnt_result_token(m, &res, 1, &t, err, sizeof err), RNNT_OK);
    assert_true(t.prob == -1.0f);
    res.probs = probs;
    rnnt_result_clear(&res);
    close_cpu(r, m, dir);
}

static void test_numeric_failure_is_per_utterance(void **state)
{
    char *dir, err[512];
    rnnt_model *m;
    rnnt_runner *r = open_cpu(10, 1, 0, &dir, &m);
    float bad[2][5] = {{1, 0, 0, 0, 1}, BLANK};
    rnnt_input in[2] = {{&scenarios[3].x[0][0], 3, 0}, {&bad[0][0], 2, 0}};
    rnnt_result res[2];
    memset(res, 0, sizeof res);
    if (rnnt_runner_decode(r, 2, in, res, NULL, err, sizeof err)) fail_msg("%s", err);
    check(&scenarios[3], &res[0]);
    assert_int_equal(res[1].status, RNNT_ERR_NUMERIC);
    assert_null(res[1].text);
    rnnt_result_clear(&res[0]);
    rnnt_result_clear(&res[1]);
    close_cpu(r, m, dir);
}

static void test_runner_rejects_bad_input(void **state)
{
    char *dir = write_model(10, 0), err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = 2;
    p.max_frames = 4;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(rnnt_runner_backend_name(r), "cpu");
    float x[5][5] = {{0}};
    rnnt_result res[3];
    memset(res, 0, sizeof res);
    rnnt_input in[3] = {{&x[0][0], 5, 0}, {&x[0][0], 1, 0}, {&x[0][0], 1, 0}};
    assert_int_equal(rnnt_runner_decode(r, 1, in, res, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_non_null(strstr(err, "5 frames, the runner takes at most 4"));
    assert_int_equal(rnnt_runner_decode(r, 3, in + 1, res, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(rnnt_runner_decode(r, 0, in, res, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    x[0][3] = NAN;
    assert_int_equal(rnnt_runner_decode(r, 1, in + 1, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "non-finite feature at frame 0, feature 3"));
    rnnt_input neg = {&x[0][0], -1, 0}, none = {NULL, 2, 0};
    assert_int_equal(rnnt_runner_decode(r, 1, &neg, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_runner_decode(r, 1, &none, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    rnnt_runner_free(r);

    /* non-finite values deep in a long utterance (past the first scan block): the first one is named;
     * the largest finite float and subnormals pass */
    p.max_frames = 1000;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    float *big = calloc(1000 * 5, sizeof *big);
    assert_non_null(big);
    big[10] = FLT_MAX;
    big[11] = -FLT_MAX;
    big[12] = FLT_MIN / 4;
    rnnt_input lng = {big, 1000, 0};
    assert_int_equal(rnnt_runner_decode(r, 1, &lng, res, NULL, err, sizeof err), RNNT_OK);
    rnnt_result_clear(&res[0]);
    big[777 * 5 + 2] = -INFINITY;
    big[901 * 5 + 4] = NAN;
    assert_int_equal(rnnt_runner_decode(r, 1, &lng, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "non-finite feature at frame 777, feature 2"));
    big[777 * 5 + 2] = 0;
    assert_int_equal(rnnt_runner_decode(r, 1, &lng, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "non-finite feature at frame 901, feature 4"));
    big[901 * 5 + 4] = 0;
    big[999 * 5 + 4] = INFINITY; /* the very last value */
    assert_int_equal(rnnt_runner_decode(r, 1, &lng, res, NULL, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "non-finite feature at frame 999, feature 4"));
    /* a caller that vouches for its input skips the scan: the batch runs, and whatever the NaN does
     * downstream is reported per utterance, never as a crash */
    lng.finite_checked = 1;
    assert_int_equal(rnnt_runner_decode(r, 1, &lng, res, NULL, err, sizeof err), RNNT_OK);
    assert_true(res[0].status == RNNT_OK || res[0].status == RNNT_ERR_NUMERIC);
    rnnt_result_clear(&res[0]);
    free(big);
    rnnt_runner_free(r);
    p.max_frames = 4;

    p.max_batch = 0;
    assert_int_equal(rnnt_runner_create(m, &p, &r, err, sizeof err), RNNT_ERR_INVALID);
    p.max_batch = 1;
#ifndef RNNT_WITH_CUDA
    p.backend = RNNT_BACKEND_CUDA;
    assert_int_equal(rnnt_runner_create(m, &p, &r, err, sizeof err), RNNT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "no CUDA backend"));
#endif
    rnnt_model_free(m);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_batched),
        cmocka_unit_test(test_result_tokens),
        cmocka_unit_test(test_numeric_failure_is_per_utterance),
        cmocka_unit_test(test_runner_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
