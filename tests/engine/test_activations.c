/* test_activations.c — hard activations at their edges, the NaN policy (FORMAT.md: NaN propagates),
 * and the LSTM cell update worked by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_ops.h"

static void test_hardsigmoid(void **state)
{
    assert_float_equal(rnnt_hardsigmoid(3.0f), 1.0f, 0);
    assert_float_equal(rnnt_hardsigmoid(-3.0f), 0.0f, 0);
    assert_float_equal(rnnt_hardsigmoid(0.0f), 0.5f, 0);
    assert_float_equal(rnnt_hardsigmoid(1.0f), 1.0f / 6.0f + 0.5f, 1e-7);
    assert_float_equal(rnnt_hardsigmoid(-1.0f), 0.5f - 1.0f / 6.0f, 1e-7);
    assert_float_equal(rnnt_hardsigmoid(2.999f), 2.999f / 6.0f + 0.5f, 1e-7);
    assert_float_equal(rnnt_hardsigmoid(3.001f), 1.0f, 0);
    assert_float_equal(rnnt_hardsigmoid(1e30f), 1.0f, 0);
    assert_float_equal(rnnt_hardsigmoid(-1e30f), 0.0f, 0);
    assert_float_equal(rnnt_hardsigmoid(INFINITY), 1.0f, 0);
    assert_float_equal(rnnt_hardsigmoid(-INFINITY), 0.0f, 0);
    assert_true(isnan(rnnt_hardsigmoid(NAN)));
}

static void test_hardtanh(void **state)
{
    assert_float_equal(rnnt_hardtanh(1.0f), 1.0f, 0);
    assert_float_equal(rnnt_hardtanh(-1.0f), -1.0f, 0);
    assert_float_equal(rnnt_hardtanh(0.0f), 0.0f, 0);
    assert_float_equal(rnnt_hardtanh(0.25f), 0.25f, 0);
    assert_float_equal(rnnt_hardtanh(3.0f), 1.0f, 0);
    assert_float_equal(rnnt_hardtanh(-3.0f), -1.0f, 0);
    assert_float_equal(rnnt_hardtanh(1e30f), 1.0f, 0);
    assert_float_equal(rnnt_hardtanh(-INFINITY), -1.0f, 0);
    assert_true(isnan(rnnt_hardtanh(NAN)));
}

static void test_cell_by_hand(void **state)
{
    /* H = 2, gates i f g o; pre-activations chosen to hit the edges. */
    const float pre[8] = {3.0f, 0.0f, /* i */ -3.0f, 1.5f, /* f */ 0.5f, -2.0f, /* g */ 6.0f, -0.6f /* o */};
    float h[2] = {9, 9}, c[2] = {0.4f, -0.8f};
    rnnt_cpu_lstm_pointwise(RNNT_ACT_HARD, 1, 2, pre, 8, h, 2, c, 2);
    /* unit 0: i=1, f=0, g=0.5, o=1 -> c = 0.5, h = 0.5 */
    assert_float_equal(c[0], 0.5f, 1e-7);
    assert_float_equal(h[0], 0.5f, 1e-7);
    /* unit 1: i=0.5, f=0.75, g=-1, o=0.4 -> c = 0.75*-0.8 + 0.5*-1 = -1.1, h = 0.4 * -1 */
    assert_float_equal(c[1], -1.1f, 1e-6);
    assert_float_equal(h[1], -0.4f, 1e-6);

    float hs[2] = {0, 0}, cs[2] = {0, 0};
    rnnt_cpu_lstm_pointwise(RNNT_ACT_SOFT, 1, 2, pre, 8, hs, 2, cs, 2);
    double i0 = 1 / (1 + exp(-3.0)), g0 = tanh(0.5), o0 = 1 / (1 + exp(-6.0));
    assert_float_equal(cs[0], i0 * g0, 1e-6);
    assert_float_equal(hs[0], o0 * tanh(i0 * g0), 1e-6);

    /* NaN in a pre-activation reaches h (the decoder then reports it). */
    float pn[8] = {NAN, 0, 0, 0, 0, 0, 0, 0}, hn[2] = {0, 0}, cn[2] = {0, 0};
    rnnt_cpu_lstm_pointwise(RNNT_ACT_HARD, 1, 2, pn, 8, hn, 2, cn, 2);
    assert_true(isnan(hn[0]));
    assert_false(isnan(hn[1]));
}

/* The hard cell's vector loop (4 units at a time) and its scalar tail give, unit by unit, exactly the
 * scalar formula, edge values, infinities, signed zeros and NaN included. H = 13: 3 vectors + 1 unit. */
static void test_cell_vector_lanes(void **state)
{
    enum { M = 3, H = 13, G = 4 * H };
    static const float edges[] = {-INFINITY, -1e30f, -3.0f, -2.999f, -1.0f, -0.5f, -0.0f, 0.0f, 1e-30f,
                                  0.5f, 1.0f, 2.999f, 3.0f, 3.001f, 1e30f, INFINITY, NAN, -NAN};
    const int n_edges = (int)(sizeof edges / sizeof *edges);
    float pre[M * G], h[M * H], c[M * H], c0[M * H];
    for (int k = 0; k < M * G; k++) pre[k] = edges[(k * 7 + 3) % n_edges];
    for (int k = 0; k < M * H; k++) c0[k] = c[k] = edges[(k * 5 + 1) % n_edges] * 0.75f;
    rnnt_cpu_lstm_pointwise(RNNT_ACT_HARD, M, H, pre, G, h, H, c, H);
    int nan_seen = 0;
    for (int r = 0; r < M; r++)
        for (int j = 0; j < H; j++) {
            const float *a = pre + r * G;
            float i = rnnt_hardsigmoid(a[j]), f = rnnt_hardsigmoid(a[H + j]), g = rnnt_hardtanh(a[2 * H + j]),
                  o = rnnt_hardsigmoid(a[3 * H + j]);
            float cw = f * c0[r * H + j] + i * g, hw = o * rnnt_hardtanh(cw);
            float cg = c[r * H + j], hg = h[r * H + j];
            if (isnan(cw) || isnan(hw)) nan_seen++;
            if (!(isnan(cw) ? isnan(cg) : !memcmp(&cg, &cw, sizeof cg)) || !(isnan(hw) ? isnan(hg) : !memcmp(&hg, &hw, sizeof hg)))
                fail_msg("row %d unit %d: c %a h %a, want c %a h %a", r, j, cg, hg, cw, hw);
        }
    assert_true(nan_seen > 0); /* the NaN cases were exercised */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hardsigmoid),
        cmocka_unit_test(test_hardtanh),
        cmocka_unit_test(test_cell_by_hand),
        cmocka_unit_test(test_cell_vector_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
