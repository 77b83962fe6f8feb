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
        cmocka_unit_test(test_json_limits), cmocka_unit_test(test_query),
        cmocka_unit_test(test_npy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
