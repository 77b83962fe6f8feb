/* cpu_rows.h — the row kernel (internal): C = A·Bᵀ + beta·C where every output C[r, n] is one fixed
 * expression of row r of A and row n of B alone (8 lanes, a fixed summation order, no FMA contraction),
 * whatever M is and whatever else is in the batch. Every product whose rows are utterances of a batch
 * or frames of one utterance runs through it (cpu_ops.h says why); tests/engine/test_cpu_rows.c checks
 * it bitwise. Implemented in cpu_rows.c (compiled -O3 -ffp-contract=off, engine/CMakeLists.txt).
 * Thread safety: reads A and B, writes only C; any number of threads on disjoint C. */
#ifndef RNNT_CPU_ROWS_H
#define RNNT_CPU_ROWS_H

#ifdef __cplusplus
extern "C" {
#endif

/* C[M, N] = A[M, K] · B[N, K]^T + beta·C, row-major with leading dimensions lda, ldb, ldc. */
void rnnt_cpu_gemm_nt_rows(int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float beta, float *C, int ldc);

#ifdef __cplusplus
}
#endif
#endif
