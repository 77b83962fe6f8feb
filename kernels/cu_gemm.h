/* cu_gemm.h — the backend's GEMMs, on cuBLAS tensor cores (fp16 in, fp32 accumulate) or plain fp32
 * (CUBLAS_COMPUTE_32F with the default math mode: no TF32).
 *
 * Batch invariance: cuBLAS chooses its kernel (tile shape, split-K) from the problem shape, so the
 * arithmetic of a row could change with the number of rows, i.e. with the batch. cu_gemm_rows therefore
 * always multiplies fixed-size chunks of `chunk` rows: every call has the same shape whatever the batch,
 * and a row's result depends on the row alone. A and C must have room for M rounded up to `chunk` rows;
 * the extra rows are computed and ignored.
 * Thread safety: no state of its own; a cuBLAS handle (the runner's) is used by one thread at a time. */
#ifndef RNNT_CU_GEMM_H
#define RNNT_CU_GEMM_H

#include "cu_common.h"

/* C[M][N] = A[M][K] · B[N][K]^T (row-major). A, B in dt; C in fp32 when c_f32, else in dt. */
rnnt_status cu_gemm_rows(cublasHandle_t h, cu_dtype dt, int M, int N, int K, const void *A, int lda,
                         const void *B, int ldb, void *C, int c_f32, int ldc, int chunk, char *err,
                         size_t errlen);

/* A cuBLAS handle for the backend: on `stream`, with a preallocated workspace (needed for graph capture)
 * of `ws_bytes` at ws, pointer mode host. */
rnnt_status cu_blas_create(cudaStream_t stream, void *ws, size_t ws_bytes, cublasHandle_t *out, char *err,
                           size_t errlen);

#endif
