/* test_body.c — request bodies: every malformed JSON or .npy maps to the right status and code. */
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

#include "body.h"

#define DIM 3
#define MAXF 4

static int js(const char *text, body_feats *f, req_opts *o, srv_err *e)
{
    memset(e, 0, sizeof *e);
    req_opts_default(o);
    return body_parse_json(text, strlen(text), DIM, MAXF, f, o, e);
}

static void expect_json(const char *text, unsigned status, const char *code)
{
    body_feats f;
    req_opts o;
    srv_err e;
    int rc = js(text, &f, &o, &e);
    if (rc != -1 || e.status != status || strcmp(e.code, code) != 0)
        fail_msg("for %.80s: want %u %s, got rc %d %u %s (%s)", text, status, code, rc, e.status,
                 e.code ? e.code : "-", e.message);
    assert_null(f.data);
}

static void test_json_ok(void **st)
{
    (void)st;
    body_feats f;
    req_opts o;
    srv_err e;
    assert_int_equal(js("{\"features\": [[1, 2.5, -3e2], [0, 0, 1e-3]]}", &f, &o, &e), 0);
    assert_int_equal(f.frames, 2);
    assert_true(f.data[0] == 1.0f && f.data[1] == 2.5f && f.data[2] == -300.0f && f.data[5] == 1e-3f);
    assert_int_equal(o.timestamps, 1);
    free(f.data);
    assert_int_equal(js("{\"timestamps\": false, \"features\": [[1,2,3]]}", &f, &o, &e), 0);
    assert_int_equal(o.timestamps, 0);
    free(f.data);
    /* Zero frames is a valid (empty) utterance. */
    assert_int_equal(js("{\"features\": []}", &f, &o, &e), 0);
    assert_int_equal(f.frames, 0);
    assert_null(f.data);
    /* Exactly max_frames. */
    assert_int_equal(js("{\"features\": [[1,2,3],[1,2,3],[1,2,3],[1,2,3]]}", &f, &o, &e), 0);
    assert_int_equal(f.frames, MAXF);
    free(f.data);
}

static void test_json_malformed(void **st)
{
    (void)st;
    expect_json("", 400, "invalid_json");
    expect_json("{", 400, "invalid_json");
    expect_json("{\"features\": [[1,2,3]]", 400, "invalid_json");       /* truncated */
    expect_json("{\"features\": [[1,2,3]]} x", 400, "invalid_json");     /* trailing garbage */
    expect_json("{\"features\": [[NaN,2,3]]}", 400, "invalid_json");     /* not JSON */
    expect_json("{\"features\": [[Infinity,2,3]]}", 400, "invalid_json");
    expect_json("{\"features\": [[1e999,2,3]]}", 400, "invalid_json");   /* overflows a double */
    expect_json("{\"features\": [[1,2,3]], \"features\": [[1,2,3]]}", 400, "invalid_json");
    expect_json("{\"x\": \"\xff\xfe\"}", 400, "invalid_json");           /* invalid UTF-8 */
    expect_json("[[1,2,3]]", 400, "invalid_request");
    expect_json("{}", 400, "invalid_request");
    expect_json("{\"features\": 5}", 400, "invalid_request");
    expect_json("{\"features\": [5]}", 400, "invalid_request");
    expect_json("{\"features\": [[1,\"2\",3]]}", 400, "invalid_request");
    expect_json("{\"features\": [[1,null,3]]}", 400, "invalid_request");
    expect_json("{\"features\": [[1,true,3]]}", 400, "invalid_request");
    expect_json("{\"features\": [[1,[2],3]]}", 400, "invalid_request");
    expect_json("{\"features\": [[1,2,3]], \"timestamps\": 1}", 400, "invalid_request");
    expect_json("{\"features\": [[1,2,3]], \"language\": \"en\"}", 400, "invalid_request");
}

static void test_json_limits(void **st)
{
    (void)st;
    expect_json("{\"features\": [[1,2]]}", 422, "wrong_feature_dim");
    expect_json("{\"features\": [[1,2,3,4]]}", 422, "wrong_feature_dim");
    expect_json("{\"features\": [[1,2,3],[]]}", 422, "wrong_feature_dim");
    expect_json("{\"features\": [[1,2,1e39]]}", 422, "non_finite_feature"); /* finite double, not float */
    /* The spec's bound is |x| <= FLT_MAX exactly: just above it is refused although (float) would
     * round it down to FLT_MAX; FLT_MAX itself is taken. */
    expect_json("{\"features\": [[1,2,3.4028235e38]]}", 422, "non_finite_feature");
    expect_json("{\"features\": [[1,2,-3.40282347e38]]}", 422, "non_finite_feature");
    {
        body_feats f;
        req_opts o;
        srv_err e;
        assert_int_equal(js("{\"features\": [[3.4028234663852886e38,-3.4028234663852886e38,0]]}", &f, &o, &e), 0);
        assert_true(f.data[0] == FLT_MAX && f.data[1] == -FLT_MAX);
        free(f.data);
    }
    expect_json("{\"features\": [[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]}", 413, "too_many_frames");
    /* Deep nesting is refused before jansson builds anything. */
    char deep[4096];
    size_t n = 0;
    for (int i = 0; i < 1000; i++) deep[n++] = '[';
    for (int i = 0; i < 1000; i++) deep[n++] = ']';
    deep[n] = '\0';
    expect_json(deep, 400, "invalid_json");
    /* Brackets inside strings do not count. */
    body_feats f;
    req_opts o;
    srv_err e;
    assert_int_equal(js("{\"features\": [[1,2,3]], \"timestamps\": true}", &f, &o, &e), 0);
    free(f.data);
    expect_json("{\"k[[[[[[[[[[[[\": 1}", 400, "invalid_request");
    /* Huge flat arrays are refused by the value count, not parsed. */
    char *big = malloc(1 << 20);
    strcpy(big, "{\"features\": [[");
    size_t l = strlen(big);
    for (int i = 0; i < 100000; i++) {
        big[l++] = '0';
        big[l++] = ',';
    }
    strcpy(big + l, "0]]}");
    expect_json(big, 413, "too_many_frames");
    free(big);
}


/* ---- differential check: the streaming parser against the tree-based one it replaced ----
 * ref_parse_json is the jansson-based parser of commit 2715066 (less its raw-text prescan, which both
 * share), kept here as the oracle: on generated valid and mutated bodies both must give the same
 * status and code, the same message for every non-syntax error, and bitwise the same floats. */
#include <jansson.h>

static int ref_parse_json(const char *buf, size_t len, int dim, int max_frames, body_feats *out, req_opts *o,
                    srv_err *e)
{
    out->data = NULL;
    out->frames = 0;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        srv_err_set(e, 400, "invalid_json", "invalid JSON at line %d, column %d: %s", je.line,
                    je.column, je.text);
        return -1;
    }
    int rc = -1;
    float *data = NULL;
    if (!json_is_object(root)) {
        srv_err_set(e, 400, "invalid_request", "the body must be a JSON object with \"features\"");
        goto done;
    }
    const char *key;
    json_t *val;
    json_t *feats = NULL;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "features") == 0) {
            feats = val;
        } else if (strcmp(key, "timestamps") == 0) {
            if (!json_is_boolean(val)) {
                srv_err_set(e, 400, "invalid_request", "\"timestamps\" must be true or false");
                goto done;
            }
            o->timestamps = json_is_true(val);
        } else {
            srv_err_set(e, 400, "invalid_request", "unknown key \"%.64s\" (allowed: features, timestamps)",
                        key);
            goto done;
        }
    }
    if (!feats) {
        srv_err_set(e, 400, "invalid_request", "missing \"features\": [[%d floats], ...]", dim);
        goto done;
    }
    if (!json_is_array(feats)) {
        srv_err_set(e, 400, "invalid_request", "\"features\" must be an array of frames");
        goto done;
    }
    size_t T = json_array_size(feats);
    if (T > (size_t)max_frames) {
        srv_err_set(e, 413, "too_many_frames", "%zu frames, more than limits.max_frames = %d", T,
                    max_frames);
        goto done;
    }
    if (T > 0) {
        data = malloc(T * (size_t)dim * sizeof *data);
        if (!data) {
            srv_err_set(e, 503, "out_of_memory", "no memory for %zu frames", T);
            goto done;
        }
    }
    for (size_t t = 0; t < T; t++) {
        json_t *row = json_array_get(feats, t);
        if (!json_is_array(row)) {
            srv_err_set(e, 400, "invalid_request", "features[%zu] is not an array of numbers", t);
            goto done;
        }
        if (json_array_size(row) != (size_t)dim) {
            srv_err_set(e, 422, "wrong_feature_dim",
                        "features[%zu] has %zu values, the model expects %d per frame", t,
                        json_array_size(row), dim);
            goto done;
        }
        for (size_t f = 0; f < (size_t)dim; f++) {
            json_t *x = json_array_get(row, f);
            if (!json_is_number(x)) {
                srv_err_set(e, 400, "invalid_request", "features[%zu][%zu] is not a number", t, f);
                goto done;
            }
            double v = json_number_value(x);
            float fv = (float)v;
            if (!(v >= -FLT_MAX && v <= FLT_MAX)) { /* the spec's bound, as body.c */
                srv_err_set(e, 422, "non_finite_feature",
                            "features[%zu][%zu] = %g is not a finite float32", t, f, v);
                goto done;
            }
            data[t * (size_t)dim + f] = fv;
        }
    }
    out->data = data;
    out->frames = (int)T;
    data = NULL;
    rc = 0;
done:
    free(data);
    json_decref(root);
    return rc;
}


static uint64_t g_rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void gen_number(char *b, size_t *n)
{
    static const char *const specials[] = {"0", "-0", "1e39", "-3.5e38", "3.4028235e38", "1e-46", "1e400", "-1e999",
                                           "4.9e-324", "123456789012345678901234", "9223372036854775807",
                                           "-9223372036854775808", "9223372036854775808", "0.1", "1E+2", "1e-7",
                                           "00", "01", "1.", ".5", "-", "1e", "+1", "0x10", "1.5e+", "2.5E-3"};
    int k = (int)(rnd() % 10);
    if (k == 0) {
        *n += (size_t)sprintf(b + *n, "%s", specials[rnd() % (sizeof specials / sizeof *specials)]);
    } else if (k < 4) {
        *n += (size_t)sprintf(b + *n, "%lld", (long long)(rnd() % 2000000) - 1000000);
    } else {
        double v = ((double)(rnd() % 2000001) - 1000000.0) / 997.0;
        int e10 = (int)(rnd() % 21) - 10;
        *n += (size_t)sprintf(b + *n, k < 7 ? "%.9g" : "%.17ge%d", v, e10);
    }
}

static void gen_ws(char *b, size_t *n)
{
    static const char ws[] = " \t\n\r";
    int k = (int)(rnd() % 4);
    for (int i = 0; i < k; i++) b[(*n)++] = ws[rnd() % 4];
}

static size_t gen_body(char *b, int dim)
{
    size_t n = 0;
    gen_ws(b, &n);
    b[n++] = '{';
    int order = (int)(rnd() % 6);
    const char *keys[] = {"\"features\"", "\"timestamps\"", "\"feat\\u0075res\"", "\"x\"", "\"timestamps\"", "\"\\u00e9\""};
    int nk = 1 + (int)(rnd() % 3);
    for (int k = 0; k < nk; k++) {
        if (k) b[n++] = ',';
        gen_ws(b, &n);
        int which = k == 0 ? (order == 0 ? 1 : 0) : (int)(rnd() % 6);
        n += (size_t)sprintf(b + n, "%s", keys[which]);
        gen_ws(b, &n);
        b[n++] = ':';
        gen_ws(b, &n);
        if (which == 1 || which == 4) {
            n += (size_t)sprintf(b + n, "%s", rnd() % 5 ? (rnd() % 2 ? "true" : "false") : "1");
        } else if (which == 0 || which == 2) {
            b[n++] = '[';
            int rows = (int)(rnd() % 6);
            for (int t = 0; t < rows; t++) {
                if (t) b[n++] = ',';
                gen_ws(b, &n);
                b[n++] = '[';
                int w = rnd() % 8 ? dim : (int)(rnd() % (dim + 2));
                for (int f = 0; f < w; f++) {
                    if (f) b[n++] = ',';
                    gen_ws(b, &n);
                    if (rnd() % 40 == 0) n += (size_t)sprintf(b + n, "%s", rnd() % 2 ? "null" : "\"1\"");
                    else gen_number(b, &n);
                }
                b[n++] = ']';
            }
            b[n++] = ']';
        } else {
            n += (size_t)sprintf(b + n, "%s", rnd() % 2 ? "\"v\\n\\u20ac\"" : "[1,{\"a\":2}]");
        }
    }
    gen_ws(b, &n);
    b[n++] = '}';
    gen_ws(b, &n);
    /* Mutations: flip, delete or insert a few bytes. */
    int muts = rnd() % 3 ? 0 : 1 + (int)(rnd() % 3);
    static const char junk[] = "{}[],:\"\\0123456789eE+-.tfnu \x01\xc3\xa9\xff\xed\xa0\x80";
    for (int m = 0; m < muts && n > 0; m++) {
        size_t at = rnd() % n;
        int op = (int)(rnd() % 3);
        if (op == 0) b[at] = junk[rnd() % (sizeof junk - 1)];
        else if (op == 1) {
            memmove(b + at, b + at + 1, n - at - 1);
            n--;
        } else {
            memmove(b + at + 1, b + at, n - at);
            b[at] = junk[rnd() % (sizeof junk - 1)];
            n++;
        }
    }
    return n;
}

static void test_json_matches_tree_parser(void **st)
{
    (void)st;
    static char buf[1 << 16];
    int compared = 0, ok_bodies = 0;
    for (int iter = 0; iter < 200000; iter++) {
        size_t n = gen_body(buf, DIM);
        body_feats f1 = {0}, f2 = {0};
        req_opts o1, o2;
        srv_err e1, e2;
        memset(&e1, 0, sizeof e1);
        memset(&e2, 0, sizeof e2);
        req_opts_default(&o1);
        req_opts_default(&o2);
        int r1 = body_parse_json(buf, n, DIM, MAXF, &f1, &o1, &e1);
        int r2 = ref_parse_json(buf, n, DIM, MAXF, &f2, &o2, &e2);
        if (r1 == -1 && e1.status == 413 && !strcmp(e1.code, "too_many_frames") && r2 == 0 && f2.frames <= MAXF)
            fail_msg("prescan refused a body the reference took");
        /* The shared prescan answers before either parser; only bodies it lets through compare. */
        srv_err ep;
        if (r1 == -1 && e1.status == 400 && !strcmp(e1.code, "invalid_json") && strstr(e1.message, "nested deeper"))
            goto next;
        if (r1 == -1 && !strcmp(e1.code, "too_many_frames") && strstr(e1.message, "more values")) goto next;
        (void)ep;
        compared++;
        if (r1 != r2 || e1.status != e2.status || (r1 && strcmp(e1.code, e2.code)))
            fail_msg("body %.*s: streaming rc %d %u %s (%s), tree rc %d %u %s (%s)", (int)n, buf, r1, e1.status,
                     r1 ? e1.code : "-", e1.message, r2, e2.status, r2 ? e2.code : "-", e2.message);
        if (r1 && strcmp(e1.code, "invalid_json") && strcmp(e1.message, e2.message))
            fail_msg("body %.*s: message \"%s\" vs \"%s\"", (int)n, buf, e1.message, e2.message);
        if (!r1) {
            ok_bodies++;
            assert_int_equal(f1.frames, f2.frames);
            assert_int_equal(o1.timestamps, o2.timestamps);
            if (f1.frames) assert_memory_equal(f1.data, f2.data, (size_t)f1.frames * DIM * sizeof(float));
        }
    next:
        free(f1.data);
        free(f2.data);
    }
    print_message("compared %d bodies, %d parsed\n", compared, ok_bodies);
    assert_true(compared > 100000 && ok_bodies > 10000);
}

static void test_query(void **st)
{
    (void)st;
    req_opts o;
    srv_err e = {0};
    req_opts_default(&o);
    assert_int_equal(body_query_param("timestamps", "false", &o, &e), 0);
    assert_int_equal(o.timestamps, 0);
    assert_int_equal(body_query_param("timestamps", "true", &o, &e), 0);
    assert_int_equal(o.timestamps, 1);
    assert_int_equal(body_query_param("timestamps", "maybe", &o, &e), -1);
    assert_int_equal(e.status, 400);
    /* Only the OpenAPI boolean's spelling: not 1/0, an empty value, a bare name or another case. */
    static const char *const refused[] = {"1", "0", "", "True", "FALSE", "yes", "true ", NULL};
    for (const char *const *v = refused; *v; v++) {
        o.timestamps = 1;
        assert_int_equal(body_query_param("timestamps", *v, &o, &e), -1);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.code, "invalid_parameter");
        assert_int_equal(o.timestamps, 1);
    }
    assert_int_equal(body_query_param("timestamps", NULL, &o, &e), -1); /* "?timestamps" */
    assert_int_equal(body_query_param("lang", "en", &o, &e), -1);
    assert_string_equal(e.code, "invalid_parameter");
}

/* A little .npy writer: header dict padded to a multiple of 64 bytes. */
static size_t make_npy(unsigned char *out, const char *descr, int rows, int cols, const void *data,
                       size_t data_len)
{
    char dict[256];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }",
                      descr, rows, cols);
    size_t total = 10 + (size_t)dl + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hl = (size_t)dl + pad + 1;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (unsigned char)(hl & 0xff);
    out[9] = (unsigned char)(hl >> 8);
    memcpy(out + 10, dict, (size_t)dl);
    memset(out + 10 + dl, ' ', pad);
    out[10 + dl + pad] = '\n';
    memcpy(out + 10 + hl, data, data_len);
    return 10 + hl + data_len;
}

static void expect_npy(const unsigned char *buf, size_t len, unsigned status, const char *code)
{
    body_feats f;
    srv_err e = {0};
    int rc = body_parse_npy((const char *)buf, len, DIM, MAXF, &f, &e);
    if (rc != -1 || e.status != status || strcmp(e.code, code) != 0)
        fail_msg("want %u %s, got rc %d %u %s (%s)", status, code, rc, e.status, e.code ? e.code : "-",
                 e.message);
}

static void test_npy(void **st)
{
    (void)st;
    unsigned char buf[1024];
    float v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    size_t n = make_npy(buf, "<f4", 2, DIM, v, 6 * sizeof(float));
    body_feats f;
    srv_err e = {0};
    assert_int_equal(body_parse_npy((const char *)buf, n, DIM, MAXF, &f, &e), 0);
    assert_int_equal(f.frames, 2);
    assert_true(f.data[5] == 6.0f);
    free(f.data);

    n = make_npy(buf, "<f4", 3, 2, v, 6 * sizeof(float));
    expect_npy(buf, n, 422, "wrong_feature_dim");
    float bad[3] = {1, NAN, 3};
    n = make_npy(buf, "<f4", 1, DIM, bad, sizeof bad);
    expect_npy(buf, n, 422, "non_finite_feature");
    bad[1] = INFINITY;
    n = make_npy(buf, "<f4", 1, DIM, bad, sizeof bad);
    expect_npy(buf, n, 422, "non_finite_feature");
    n = make_npy(buf, "<f4", 4, DIM, v, 12 * sizeof(float));
    expect_npy(buf, n - 4, 400, "invalid_npy"); /* truncated data */
    expect_npy(buf, 20, 400, "invalid_npy");    /* truncated header */
    n = make_npy(buf, "<f8", 1, DIM, v, 24);
    expect_npy(buf, n, 400, "invalid_npy");     /* float64 */
    float many[15] = {0};
    n = make_npy(buf, "<f4", 5, DIM, many, sizeof many);
    expect_npy(buf, n, 413, "too_many_frames");
    expect_npy((const unsigned char *)"{\"features\": []}", 16, 400, "invalid_npy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_ok),     cmocka_unit_test(test_json_malformed),
        cmocka_unit_test(test_json_limits), cmocka_unit_test(test_json_matches_tree_parser), cmocka_unit_test(test_query),
        cmocka_unit_test(test_npy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
