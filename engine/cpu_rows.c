/* cpu_rows.c — C = A·Bᵀ + beta·C for rows that belong to different utterances (see cpu_rows.h).
 *
 * Every output is one fixed expression of its own row of A and its row of B: a dot product in 8 lanes
 * (lane l sums the products k ≡ l mod 8; the last K mod 8 products go to lanes 0.. as one zero-padded
 * vector), the lanes added pairwise in a fixed order. This file is compiled with -ffp-contract=off
 * (engine/CMakeLists.txt), so no code path fuses a multiply and an add that another does not: blocks
 * of 4 rows, the 1-3 rows left over, the AVX2 and the baseline clone all give the same bits for a
 * row, whatever else is in the batch. (Before, OpenBLAS did this on padded chunks of 8 rows; it repacked the weights every call,
 * which cost more than the arithmetic at small batches.) */
#include <stddef.h>

#include "cpu_rows.h"

#define LANES 8
#define ROWS 4

/* 8 floats; element-wise + and * are the plain IEEE operations, lane by lane (on a machine without
 * AVX the compiler splits them into two 4-wide halves: the same arithmetic). */
typedef float v8 __attribute__((vector_size(LANES * sizeof(float))));

static inline __attribute__((always_inline)) v8 load8(const float *p)
{
    v8 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}

static inline __attribute__((always_inline)) v8 load_tail(const float *p, int n)
{
    v8 v = {0};
    __builtin_memcpy(&v, p, (size_t)n * sizeof(float));
    return v;
}

static inline __attribute__((always_inline)) float lanes_sum(v8 a)
{
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

/* R rows against NC rows of B (columns of C) n0.. (both compile-time constants after inlining; 4 x 3
 * accumulators + 3 B vectors + 1 A vector fill the 16 AVX registers). */
static inline __attribute__((always_inline)) void rows_cols(const int R, const int NC, int n0, int K, const float *A, int lda,
                                                            const float *B, int ldb, float beta, float *C, int ldc)
{
    const int K8 = K / LANES * LANES;
    v8 acc[ROWS][3];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NC; j++) acc[r][j] = (v8){0};
    for (int k = 0; k < K8; k += LANES) {
        v8 b[3];
        for (int j = 0; j < NC; j++) b[j] = load8(B + (size_t)(n0 + j) * ldb + k);
        for (int r = 0; r < R; r++) {
            v8 a = load8(A + (size_t)r * lda + k);
            for (int j = 0; j < NC; j++) acc[r][j] = acc[r][j] + a * b[j];
        }
    }
    if (K8 < K) { /* the last K mod 8 products, zero-padded to a full vector (the padding adds +0) */
        v8 b[3];
        for (int j = 0; j < NC; j++) b[j] = load_tail(B + (size_t)(n0 + j) * ldb + K8, K - K8);
        for (int r = 0; r < R; r++) {
            v8 a = load_tail(A + (size_t)r * lda + K8, K - K8);
            for (int j = 0; j < NC; j++) acc[r][j] = acc[r][j] + a * b[j];
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NC; j++) {
            float s = lanes_sum(acc[r][j]);
            float *c = C + (size_t)r * ldc + n0 + j;
            *c = beta != 0.0f ? s + beta * *c : s;
        }
}

static inline __attribute__((always_inline)) void rows_block(const int R, int N, int K, const float *A, int lda, const float *B,
                                                             int ldb, float beta, float *C, int ldc)
{
    int n = 0;
    for (; n + 3 <= N; n += 3) rows_cols(R, 3, n, K, A, lda, B, ldb, beta, C, ldc);
    if (N - n == 2) rows_cols(R, 2, n, K, A, lda, B, ldb, beta, C, ldc);
    else if (N - n == 1) rows_cols(R, 1, n, K, A, lda, B, ldb, beta, C, ldc);
}

/* Columns in tiles of COL_TILE rows of B (64 x K floats: 72 KiB at K = 288, held in L2 while every
 * block of rows passes over it), so B comes from memory once per call, not once per block of rows. */
#define COL_TILE 64

/* The clones and their resolver are static: GCC exports a non-static target_clones function's ifunc
 * whatever -fvisibility says, and librnnt exports only the public API. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
static void gemm_nt_rows(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int n0 = 0; n0 < N; n0 += COL_TILE) {
        const int nt = N - n0 < COL_TILE ? N - n0 : COL_TILE;
        const float *Bt = B + (size_t)n0 * ldb;
        float *Ct = C + n0;
        int r = 0;
        for (; r + ROWS <= M; r += ROWS)
            rows_block(ROWS, nt, K, A + (size_t)r * lda, lda, Bt, ldb, beta, Ct + (size_t)r * ldc, ldc);
        switch (M - r) {
        case 3: rows_block(3, nt, K, A + (size_t)r * lda, lda, Bt, ldb, beta, Ct + (size_t)r * ldc, ldc); break;
        case 2: rows_block(2, nt, K, A + (size_t)r * lda, lda, Bt, ldb, beta, Ct + (size_t)r * ldc, ldc); break;
        case 1: rows_block(1, nt, K, A + (size_t)r * lda, lda, Bt, ldb, beta, Ct + (size_t)r * ldc, ldc); break;
        default: break;
        }
    }
}

void rnnt_cpu_gemm_nt_rows(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    gemm_nt_rows(M, N, K, A, lda, B, ldb, beta, C, ldc);
}
