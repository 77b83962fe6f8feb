/* cu_gemm.cu — fixed-chunk GEMMs on cuBLAS (see cu_gemm.h). */
#include "cu_gemm.h"

rnnt_status cu_gemm_rows(cublasHandle_t h, cu_dtype dt, int M, int N, int K, const void *A, int lda,
                         const void *B, int ldb, void *C, int c_f32, int ldc, int chunk, char *err,
                         size_t errlen)
{
    if (M <= 0 || N <= 0) return RNNT_OK;
    const float one = 1.0f, zero = 0.0f;
    cudaDataType ab = dt == CU_F16 ? CUDA_R_16F : CUDA_R_32F;
    cudaDataType ct = c_f32 ? CUDA_R_32F : ab;
    size_t asz = cu_dtype_size(dt), csz = c_f32 ? 4 : cu_dtype_size(dt);
    for (int r = 0; r < M; r += chunk) {
        const char *a = (const char *)A + (size_t)r * lda * asz;
        char *c = (char *)C + (size_t)r * ldc * csz;
        /* Column-major view: C^T[N][chunk] = B[N][K] · A^T[K][chunk]. */
        CUBLAS_TRY(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, chunk, K, &one, B, ab, ldb, a, ab, lda, &zero, c,
                                ct, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return RNNT_OK;
}

rnnt_status cu_blas_create(cudaStream_t stream, void *ws, size_t ws_bytes, cublasHandle_t *out, char *err,
                           size_t errlen)
{
    cublasHandle_t h;
    CUBLAS_TRY(cublasCreate(&h));
    cublasStatus_t s = cublasSetStream(h, stream);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetWorkspace(h, ws, ws_bytes);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(h);
        return cu_set_err(err, errlen, cu_status_of_blas(s), "cublas: configuring the handle: %s", cu_blas_str(s));
    }
    *out = h;
    return RNNT_OK;
}
