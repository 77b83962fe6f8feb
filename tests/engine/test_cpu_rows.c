/* test_cpu_rows.c — rnnt_cpu_gemm_nt_rows (engine/cpu_rows.c), the product behind every batched
 * recurrence on the CPU:
 *   - against a plain double-precision loop on fresh random inputs at awkward sizes (M = 1..9 and 17,
 *     N odd and across the 64-column tiles, K below, at and off multiples of 8, strides larger than
 *     the rows), beta 0 and 1, relative error within fp32 accumulation;
 *   - row independence, bitwise: every row's outputs are the same computed alone, in any batch size
 *     and at any position in it (what makes the CPU engine batch-invariant);
 *   - beta = 0 never reads C (NaN garbage there does not leak), beta = 1 adds C;
 *   - the LSTM step in two halves (input product made alone per row and kept, then the step from it:
 *     the CPU decoder's per-label table of the predictor's first layer) gives the one-call step's
 *     h and c bit for bit, both activations, awkward sizes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_ops.h"
#include "cpu_rows.h"
#include "test_util.h"

static float *rand_buf(size_t n, uint64_t *seed)
{
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = tu_randu(seed);
    return p;
}

/* C = A·Bᵀ + beta·C in double; returns the worst error relative to sum |a·b| + |beta·c| per output. */
static double check_against_double(int M, int N, int K, int lda, int ldb, int ldc, float beta, uint64_t *seed)
{
    float *A = rand_buf((size_t)M * lda, seed), *B = rand_buf((size_t)N * ldb, seed), *C = rand_buf((size_t)M * ldc, seed);
    float *C0 = malloc((size_t)M * ldc * sizeof(float));
    memcpy(C0, C, (size_t)M * ldc * sizeof(float));
    rnnt_cpu_gemm_nt_rows(M, N, K, A, lda, B, ldb, beta, C, ldc);
    double worst = 0;
    for (int r = 0; r < M; r++)
        for (int n = 0; n < N; n++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)A[(size_t)r * lda + k] * B[(size_t)n * ldb + k];
                s += p;
                mag += fabs(p);
            }
            double c0 = C0[(size_t)r * ldc + n];
            s += beta * c0;
            mag += fabs(beta * c0);
            double e = fabs(C[(size_t)r * ldc + n] - s) / (mag > 1e-30 ? mag : 1e-30);
            if (e > worst) worst = e;
        }
    /* the padding columns of C (ldc > N) are not written */
    for (int r = 0; r < M; r++)
        for (int n = N; n < ldc; n++) assert_true(C[(size_t)r * ldc + n] == C0[(size_t)r * ldc + n]);
    free(A);
    free(B);
    free(C);
    free(C0);
    return worst;
}

static void test_against_double(void **state)
{
    (void)state;
    uint64_t seed = 0x5eed0001;
    static const int Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 17};
    static const int Ns[] = {1, 3, 63, 64, 65, 129, 1152};
    static const int Ks[] = {1, 5, 8, 13, 64, 288, 301};
    for (size_t i = 0; i < sizeof Ms / sizeof *Ms; i++)
        for (size_t j = 0; j < sizeof Ns / sizeof *Ns; j++)
            for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                for (int b = 0; b < 2; b++) {
                    int M = Ms[i], N = Ns[j], K = Ks[k];
                    double e = check_against_double(M, N, K, K + 3 * b, K + b, N + 2 * b, (float)b, &seed);
                    /* fp32 sums of K products: a few ulps times log2(K) lanes deep, relative to sum |a·b| */
                    if (e > 1e-6) fail_msg("M %d N %d K %d beta %d: relative error %.3g", M, N, K, b, e);
                }
}

/* Each row of a batch gives the same bits as the same row alone, wherever it sits. */
static void test_rows_independent(void **state)
{
    (void)state;
    uint64_t seed = 0x5eed0002;
    const int N = 131, K = 293, lda = 300, ldc = 140, Mmax = 19;
    float *A = rand_buf((size_t)Mmax * lda, &seed), *B = rand_buf((size_t)N * K, &seed);
    float *Cinit = rand_buf((size_t)Mmax * ldc, &seed);
    for (int beta = 0; beta < 2; beta++) {
        float *alone = malloc((size_t)Mmax * ldc * sizeof(float)), *batch = malloc((size_t)Mmax * ldc * sizeof(float));
        memcpy(alone, Cinit, (size_t)Mmax * ldc * sizeof(float));
        for (int r = 0; r < Mmax; r++)
            rnnt_cpu_gemm_nt_rows(1, N, K, A + (size_t)r * lda, lda, B, K, (float)beta, alone + (size_t)r * ldc, ldc);
        for (int M = 1; M <= Mmax; M++)
            for (int first = 0; first + M <= Mmax; first += (M < 5 ? 1 : 3)) {
                memcpy(batch, Cinit, (size_t)Mmax * ldc * sizeof(float));
                rnnt_cpu_gemm_nt_rows(M, N, K, A + (size_t)first * lda, lda, B, K, (float)beta, batch + (size_t)first * ldc, ldc);
                for (int r = first; r < first + M; r++)
                    if (memcmp(batch + (size_t)r * ldc, alone + (size_t)r * ldc, sizeof(float) * N))
                        fail_msg("beta %d: row %d differs in a batch of %d rows starting at %d", beta, r, M, first);
            }
        free(alone);
        free(batch);
    }
    free(A);
    free(B);
    free(Cinit);
}

static void test_beta(void **state)
{
    (void)state;
    uint64_t seed = 0x5eed0003;
    const int M = 6, N = 70, K = 19;
    float *A = rand_buf((size_t)M * K, &seed), *B = rand_buf((size_t)N * K, &seed);
    float *C = malloc((size_t)M * N * sizeof(float)), *D = malloc((size_t)M * N * sizeof(float));
    for (int i = 0; i < M * N; i++) C[i] = NAN;
    rnnt_cpu_gemm_nt_rows(M, N, K, A, K, B, K, 0.0f, C, N);
    for (int i = 0; i < M * N; i++) assert_true(isfinite(C[i]));
    /* beta 1 on top of the first product: exactly the product plus what was there */
    for (int i = 0; i < M * N; i++) D[i] = 0.25f * (float)(i % 7);
    float *E = malloc((size_t)M * N * sizeof(float));
    memcpy(E, D, (size_t)M * N * sizeof(float));
    rnnt_cpu_gemm_nt_rows(M, N, K, A, K, B, K, 1.0f, D, N);
    for (int i = 0; i < M * N; i++) assert_true(D[i] == C[i] + E[i]);
    rnnt_cpu_gemm_nt_rows(0, N, K, A, K, B, K, 0.0f, NULL, N); /* M = 0: nothing, no access */
    free(A);
    free(B);
    free(C);
    free(D);
    free(E);
}

/* rnnt_cpu_lstm_step for M rows at once against the decoder's table path: each row's W_ih x made
 * alone (rnnt_cpu_lstm_input_product, M = 1) into a kept table, copied into pre, then
 * rnnt_cpu_lstm_step_from_input: h and c must match bitwise (backend_cpu.c dec_pred_step relies on it). */
static void test_lstm_step_from_table(void **state)
{
    (void)state;
    uint64_t seed = 0x5eed0004;
    const int sizes[][2] = {{13, 11}, {128, 37}, {8, 8}, {5, 64}}; /* {I, H} */
    for (int si = 0; si < 4; si++)
        for (int act = 0; act < 2; act++) {
            const int I = sizes[si][0], H = sizes[si][1], G = 4 * H, Mmax = 9, V = 6;
            float *w_ih = rand_buf((size_t)G * I, &seed), *w_hh = rand_buf((size_t)G * H, &seed), *bias = rand_buf(G, &seed);
            for (int j = 0; j < G; j++) bias[j] *= 3.0f; /* push some gates into the hard activations' clamps */
            rnnt_lstm_layer L = {.input = I, .hidden = H, .w_ih = w_ih, .w_hh = w_hh, .bias = bias};
            float *emb = rand_buf((size_t)V * I, &seed), *table = malloc((size_t)V * G * sizeof(float));
            for (int v = 0; v < V; v++) rnnt_cpu_lstm_input_product(&L, 1, emb + (size_t)v * I, I, table + (size_t)v * G);
            for (int M = 1; M <= Mmax; M += 2) {
                int lab[Mmax];
                float *x = malloc((size_t)M * I * sizeof(float)), *pre = malloc((size_t)M * G * sizeof(float));
                float *h0 = rand_buf((size_t)M * H, &seed), *c0 = rand_buf((size_t)M * H, &seed);
                float *h1 = malloc((size_t)M * H * sizeof(float)), *c1 = malloc((size_t)M * H * sizeof(float));
                memcpy(h1, h0, (size_t)M * H * sizeof(float));
                memcpy(c1, c0, (size_t)M * H * sizeof(float));
                for (int r = 0; r < M; r++) {
                    lab[r] = (r * 5 + M) % V;
                    memcpy(x + (size_t)r * I, emb + (size_t)lab[r] * I, sizeof(float) * I);
                    memcpy(pre + (size_t)r * G, table + (size_t)lab[r] * G, sizeof(float) * G);
                }
                float *scratch = malloc(rnnt_cpu_lstm_step_scratch(&L, M) * sizeof(float));
                assert_non_null(scratch);
                rnnt_cpu_lstm_step(&L, (rnnt_lstm_act)act, M, x, I, h0, c0, scratch);
                rnnt_cpu_lstm_step_from_input(&L, (rnnt_lstm_act)act, M, pre, h1, c1);
                if (memcmp(h0, h1, (size_t)M * H * sizeof(float)) || memcmp(c0, c1, (size_t)M * H * sizeof(float)))
                    fail_msg("I %d, H %d, act %d, M %d: the table path's state differs from the one-call step", I, H, act, M);
                free(scratch);
                free(x);
                free(pre);
                free(h0);
                free(c0);
                free(h1);
                free(c1);
            }
            free(w_ih);
            free(w_hh);
            free(bias);
            free(emb);
            free(table);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_double),
        cmocka_unit_test(test_rows_independent),
        cmocka_unit_test(test_beta),
        cmocka_unit_test(test_lstm_step_from_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
