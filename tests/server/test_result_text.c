/* test_result_text.c — the result document written as text (server/result_text.c) against the jansson
 * document it replaces: byte for byte on random results of a golden model (token ids, frames,
 * probabilities with and without, texts with quotes, backslashes, control characters and non-ASCII
 * UTF-8; timestamps on and off; with and without audio_ms), and its string and real writers against
 * jansson's on hostile strings and random doubles; NULL (the jansson fallback) for invalid UTF-8 and
 * non-finite numbers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reply.h"
#include "result_text.h"

static rnnt_model *g_model;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* jansson's text for doc (the reference): json_dumps + the newline reply_json adds. */
static char *jansson_text(json_t *doc)
{
    char *t = json_dumps(doc, REPLY_JSON_FLAGS);
    json_decref(doc);
    if (!t) return NULL;
    size_t n = strlen(t);
    char *u = malloc(n + 2);
    memcpy(u, t, n);
    u[n] = '\n';
    u[n + 1] = '\0';
    free(t);
    return u;
}

static const char *const odd_texts[] = {
    "", "plain words", "quote \" and back\\slash", "tab\there\nnewline\r\b\f", "\x01\x1f ctrl", "caf\xc3\xa9 \xe2\x96\x81 \xf0\x9f\x98\x80",
    "slash / kept", "\x7f del", "\xe2\x80\xa8 line sep",
};

static void test_strings_and_reals(void **st)
{
    (void)st;
    for (size_t i = 0; i < sizeof odd_texts / sizeof *odd_texts; i++) {
        rt_buf b = {0};
        rt_string(&b, odd_texts[i]);
        assert_false(b.failed);
        json_t *s = json_string(odd_texts[i]);
        assert_non_null(s);
        char *want = json_dumps(s, REPLY_JSON_FLAGS | JSON_ENCODE_ANY);
        json_decref(s);
        assert_string_equal(b.p, want);
        free(want);
        rt_free(&b);
    }
    /* Invalid UTF-8 (jansson refuses it, so the caller falls back to jansson and its error path). */
    const char *bad[] = {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x96"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rt_buf b = {0};
        rt_string(&b, bad[i]);
        assert_true(b.failed);
        assert_null(json_string(bad[i]));
        rt_free(&b);
    }
    double fixed[] = {0.0, -0.0, 1.0, 0.5, 1.9, 1e-5, 1.5e-7, 123456789.0, 1e20, -3.25e-300, 4.9e-324, 1.7976931348623157e308, 0.04, 12.48};
    for (int i = 0; i < 14 + 20000; i++) {
        double v = i < 14 ? fixed[i] : (urand() - 0.5) * pow(10.0, (double)(int)(rnd() % 40) - 20);
        rt_buf b = {0};
        rt_real(&b, v);
        assert_false(b.failed);
        json_t *r = json_real(v);
        char *want = json_dumps(r, REPLY_JSON_FLAGS | JSON_ENCODE_ANY);
        json_decref(r);
        if (strcmp(b.p, want)) fail_msg("%.17g: %s vs jansson %s", v, b.p, want);
        free(want);
        rt_free(&b);
    }
    rt_buf b = {0};
    rt_real(&b, NAN);
    assert_true(b.failed);
    rt_free(&b);
}

static void test_documents(void **st)
{
    (void)st;
    const rnnt_model_info *info = rnnt_model_get_info(g_model);
    int vocab = info->vocab_size;
    for (int round = 0; round < 400; round++) {
        int n = round % 50 == 0 ? 0 : (int)(rnd() % 300);
        rnnt_result res = {0};
        res.n_tokens = n;
        res.tokens = malloc(sizeof(int) * (size_t)(n ? n : 1));
        res.frames = malloc(sizeof(int) * (size_t)(n ? n : 1));
        res.probs = round % 3 == 0 ? NULL : malloc(sizeof(float) * (size_t)(n ? n : 1));
        int f = 0;
        for (int i = 0; i < n; i++) {
            res.tokens[i] = (int)(rnd() % (uint64_t)vocab);
            f += (int)(rnd() % 4);
            res.frames[i] = f;
            if (res.probs) res.probs[i] = (float)(0.01 + 0.99 * urand());
        }
        res.encoder_frames = f + 1 + (int)(rnd() % 10);
        res.text = strdup(odd_texts[round % (sizeof odd_texts / sizeof *odd_texts)]);
        char id[40];
        snprintf(id, sizeof id, "req-%d\"\\", round);
        reply_result_info ri = {id, urand() * 20, (int)(rnd() % 2000), 1 + (int)(rnd() % 256), urand() * 0.05, urand() * 0.1,
                                urand() * 0.2, round % 4 == 1 ? urand() * 5 : 0.0, round % 5 != 2};
        for (int with_res = 0; with_res < 2; with_res++) {
            const rnnt_result *rp = with_res || round % 7 ? &res : NULL;
            size_t len = 0;
            char *got = result_text(g_model, rp, &ri, &len);
            char *want = jansson_text(reply_result_json(g_model, rp, &ri));
            assert_non_null(got);
            assert_non_null(want);
            assert_int_equal(len, strlen(got));
            if (strcmp(got, want)) fail_msg("round %d: documents differ:\n%.400s\n%.400s", round, got, want);
            free(got);
            free(want);
        }
        rnnt_result_clear(&res);
    }
}

/* What jansson cannot write, result_text does not write either: the caller then takes the jansson path. */
static void test_fallback(void **st)
{
    (void)st;
    rnnt_result res = {0};
    res.text = strdup("bad \xff utf-8");
    reply_result_info ri = {"id", 1.0, 100, 1, 0, 0, 0, 0, 1};
    size_t len = 0;
    assert_null(result_text(g_model, &res, &ri, &len));
    assert_null(reply_result_json(g_model, &res, &ri));
    free(res.text);
    res.text = strdup("fine");
    ri.queue_s = INFINITY;
    assert_null(result_text(g_model, &res, &ri, &len));
    assert_null(reply_result_json(g_model, &res, &ri));
    ri.queue_s = 0;
    int tok = 1 << 20, fr = 0; /* an id outside the vocabulary */
    res.n_tokens = 1;
    res.tokens = &tok;
    res.frames = &fr;
    assert_null(result_text(g_model, &res, &ri, &len));
    assert_null(reply_result_json(g_model, &res, &ri));
    free(res.text);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/data/golden/hard_bb";
    char err[256];
    if (rnnt_model_load(dir, &g_model, err, sizeof err)) {
        fprintf(stderr, "test_result_text: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings_and_reals),
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_fallback),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rnnt_model_free(g_model);
    return rc;
}
