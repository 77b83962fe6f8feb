/* test_npy.c — the .npy reader takes float32/float16 [T, F] C-order arrays and rejects everything
 * else with a one-line message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rnnt_npy.h"
#include "test_util.h"

/* A .npy image: magic, version 1.0, the header dict padded to 64 bytes, then `data`. */
static size_t make_npy(unsigned char *out, const char *dict, const void *data, size_t len)
{
    size_t dl = strlen(dict), total = 10 + dl + 1;
    size_t pad = (64 - total % 64) % 64;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    size_t hl = dl + pad + 1;
    out[8] = (unsigned char)(hl & 0xff);
    out[9] = (unsigned char)(hl >> 8);
    memcpy(out + 10, dict, dl);
    memset(out + 10 + dl, ' ', pad);
    out[10 + dl + pad] = '\n';
    if (len) memcpy(out + 10 + hl, data, len);
    return 10 + hl + len;
}

static unsigned char buf[1 << 16];

static void test_good_f32_f16(void **state)
{
    float v[6] = {0.5f, -1.0f, 2.0f, 3.25f, -0.125f, 7.0f};
    size_t n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    rnnt_npy a;
    char err[256];
    if (rnnt_npy_parse_mem("x.npy", buf, n, 3, 0, &a, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(a.rows, 2);
    assert_int_equal(a.cols, 3);
    assert_memory_equal(a.data, v, sizeof v);
    rnnt_npy_free(&a);
    /* float16: 1.0, -2.0, 0.5, 65504 (max half), a subnormal, 0 */
    uint16_t h[6] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x0000};
    n = make_npy(buf, "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2), }", h, sizeof h);
    if (rnnt_npy_parse_mem("h.npy", buf, n, 2, 0, &a, err, sizeof err)) fail_msg("%s", err);
    assert_float_equal(a.data[0], 1.0f, 0);
    assert_float_equal(a.data[1], -2.0f, 0);
    assert_float_equal(a.data[2], 0.5f, 0);
    assert_float_equal(a.data[3], 65504.0f, 0);
    assert_float_equal(a.data[4], 5.9604644775390625e-08f, 0);
    rnnt_npy_free(&a);
    /* zero frames, keys in another order, double quotes */
    n = make_npy(buf, "{\"shape\": (0, 3), \"fortran_order\": False, \"descr\": \"<f4\"}", NULL, 0);
    if (rnnt_npy_parse_mem("z.npy", buf, n, 3, 0, &a, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(a.rows, 0);
    assert_null(a.data);
    rnnt_npy_free(&a);
}

typedef struct {
    const char *what;
    const char *dict;
    size_t data_len;   /* bytes of data appended */
    int nan_at;        /* float index to poison with NaN (-1: none), float32 only */
    int expect_cols, max_rows;
    int truncate;      /* bytes cut off the end */
    const char *expect;
} bad_npy;

static const bad_npy bad[] = {
    {"float64", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 48, -1, 3, 0, 0, "dtype '<f8' not accepted"},
    {"big-endian", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, 3, 0, 0, "dtype '>f4' not accepted"},
    {"int32", "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, 3, 0, 0, "dtype '<i4' not accepted"},
    {"rank 1", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 24, -1, 0, 0, 0, "expected a rank-2 array [frames, features], got rank 1"},
    {"rank 3", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", 24, -1, 0, 0, 0, "got rank 3"},
    {"fortran order", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24, -1, 3, 0, 0, "Fortran-ordered arrays are not accepted"},
    {"wrong feature count", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, 80, 0, 0, "3 features per frame, the model expects 80"},
    {"truncated data", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, 3, 0, 5, "truncated .npy data"},
    {"trailing data", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28, -1, 3, 0, 0, "4 bytes of trailing data"},
    {"NaN", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, 4, 3, 0, 0, "non-finite value (NaN) at frame 1, feature 1"},
    {"too many frames", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, 3, 1, 0, "2 frames, more than the limit of 1"},
    {"absurd shape", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 3), }", 24, -1, 3, 0, 0, "frames, more than the limit"},
    {"zero features", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", 0, -1, 0, 0, 0, "0 features per frame is not in [1, 65536]"},
    {"missing key", "{'descr': '<f4', 'shape': (2, 3), }", 24, -1, 3, 0, 0, "lacks descr, fortran_order or shape"},
    {"repeated key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, 3, 0, 0, "unexpected or repeated .npy header key 'descr'"},
    {"unknown key", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 24, -1, 3, 0, 0, "unexpected or repeated .npy header key 'x'"},
    {"not a dict", "['<f4']", 24, -1, 3, 0, 0, ".npy header is not a dict"},
    {"bad shape syntax", "{'descr': '<f4', 'fortran_order': False, 'shape': (2; 3), }", 24, -1, 3, 0, 0, "malformed .npy shape"},
    {"negative dimension", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", 24, -1, 3, 0, 0, "malformed .npy shape"},
    {"garbage after dict", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk", 24, -1, 3, 0, 0, "trailing garbage in the .npy header"},
};

static void test_bad_npy(void **state)
{
    int n = (int)(sizeof bad / sizeof bad[0]);
    assert_true(n >= 10);
    float data[16];
    for (int i = 0; i < 16; i++) data[i] = (float)i;
    for (int i = 0; i < n; i++) {
        float d[16];
        memcpy(d, data, sizeof d);
        if (bad[i].nan_at >= 0) d[bad[i].nan_at] = NAN;
        size_t len = make_npy(buf, bad[i].dict, d, bad[i].data_len) - (size_t)bad[i].truncate;
        rnnt_npy a;
        char err[256] = "";
        if (!rnnt_npy_parse_mem("in.npy", buf, len, bad[i].expect_cols, bad[i].max_rows, &a, err, sizeof err))
            fail_msg("case '%s' accepted", bad[i].what);
        if (!strstr(err, bad[i].expect)) fail_msg("case '%s': message '%s' lacks '%s'", bad[i].what, err, bad[i].expect);
        assert_non_null(strstr(err, "in.npy: "));
        assert_null(a.data);
    }
}

static void test_bad_magic_and_header(void **state)
{
    rnnt_npy a;
    char err[256];
    assert_int_equal(rnnt_npy_parse_mem("a", "PK\x03\x04 zip file", 16, 0, 0, &a, err, sizeof err), RNNT_ERR_FORMAT);
    assert_non_null(strstr(err, "bad magic"));
    assert_int_equal(rnnt_npy_parse_mem("a", "\x93NUMPY", 6, 0, 0, &a, err, sizeof err), RNNT_ERR_FORMAT);
    unsigned char h[16] = "\x93NUMPY\x01\x00\xff\x00{";
    assert_int_equal(rnnt_npy_parse_mem("a", h, 11, 0, 0, &a, err, sizeof err), RNNT_ERR_FORMAT);
    assert_non_null(strstr(err, "truncated .npy header"));
    unsigned char v9[16] = "\x93NUMPY\x09\x00\x02\x00{}";
    assert_int_equal(rnnt_npy_parse_mem("a", v9, 12, 0, 0, &a, err, sizeof err), RNNT_ERR_FORMAT);
    assert_non_null(strstr(err, "unsupported .npy version 9.0"));
    unsigned char big[16] = "\x93NUMPY\x02\x00\x00\x00\x10\x00{}";
    assert_int_equal(rnnt_npy_parse_mem("a", big, 14, 0, 0, &a, err, sizeof err), RNNT_ERR_FORMAT);
    assert_non_null(strstr(err, "larger than"));
}

static void test_file_errors(void **state)
{
    rnnt_npy a;
    char err[256];
    assert_int_equal(rnnt_npy_load("/nonexistent.npy", 0, 0, 0, &a, err, sizeof err), RNNT_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent.npy: cannot open"));
    char *dir = tu_tmpdir();
    float v[6] = {0};
    size_t n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    tu_write_file(dir, "x.npy", buf, n);
    char p[4096];
    snprintf(p, sizeof p, "%s/x.npy", dir);
    assert_int_equal(rnnt_npy_load(p, 3, 0, 32, &a, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_non_null(strstr(err, "more than the limit of 32"));
    assert_int_equal(rnnt_npy_load(p, 3, 0, 0, &a, err, sizeof err), RNNT_OK);
    rnnt_npy_free(&a);
    assert_int_equal(rnnt_npy_load(dir, 3, 0, 0, &a, err, sizeof err) != RNNT_OK, 1);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_f32_f16),
        cmocka_unit_test(test_bad_npy),
        cmocka_unit_test(test_bad_magic_and_header),
        cmocka_unit_test(test_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
