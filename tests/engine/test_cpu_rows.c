/* test_cpu_rows.c — rnnt_cpu_gemm_nt_rows (engine/cpu_rows.c), the product behind every batched
 * recurrence on the CPU:
 *   - against a plain double-precision loop on fresh random inputs at awkward sizes (M = 1..9 and 17,
 *     N odd and across the 64-column tiles, K below, at and off multiples of 8, strides larger than
 *     the rows), beta 0 and 1, relative error within fp32 accumulation;
 *   - row independence, bitwise: every row's outputs are the same computed alone, in any batch size
 *     and at any position in it (what makes the CPU engine batch-invariant);
 *   - beta = 0 never reads C (NaN garbage there does not leak), beta = 1 adds C. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_double),
        cmocka_unit_test(test_rows_independent),
        cmocka_unit_test(test_beta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
