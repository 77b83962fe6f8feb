/* cu_common.h — what every CUDA file of the backend shares: error checking that turns CUDA and cuBLAS
 * failures into rnnt_status codes with a one-line message, the storage-type switch, small helpers.
 *
 * Convention: every host function that can fail takes (char *err, size_t errlen) last and returns an
 * rnnt_status; CU_TRY / CUBLAS_TRY return from it on the first failure. Out of memory becomes
 * RNNT_ERR_NOMEM, every other CUDA or cuBLAS failure RNNT_ERR_DEVICE.
 * Thread safety: the helpers keep no state; any thread may use them. */
#ifndef RNNT_CU_COMMON_H
#define RNNT_CU_COMMON_H

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>

#include "model.h"

/* Formats a message into err (when not NULL) and returns s; the kernels' twin of rnnt_set_err, kept
 * here so that rnnt_cuda depends on the engine's headers only. */
rnnt_status cu_set_err(char *err, size_t errlen, rnnt_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
rnnt_status cu_status_of(cudaError_t e);
rnnt_status cu_status_of_blas(cublasStatus_t e);
const char *cu_blas_str(cublasStatus_t e);

#define CU_TRY(call)                                                                              \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess)                                                                    \
            return cu_set_err(err, errlen, cu_status_of(e_), "cuda: %s:%d: %s: %s", __FILE__,     \
                              __LINE__, #call, cudaGetErrorString(e_));                           \
    } while (0)

/* After a kernel launch: a bad configuration shows up here, an execution fault at the next sync. */
#define CU_TRY_LAUNCH() CU_TRY(cudaGetLastError())

#define CUBLAS_TRY(call)                                                                          \
    do {                                                                                          \
        cublasStatus_t e_ = (call);                                                               \
        if (e_ != CUBLAS_STATUS_SUCCESS)                                                          \
            return cu_set_err(err, errlen, cu_status_of_blas(e_), "cublas: %s:%d: %s: %s",        \
                              __FILE__, __LINE__, #call, cu_blas_str(e_));                        \
    } while (0)

#define RNNT_TRY(call)                                                                            \
    do {                                                                                          \
        rnnt_status s_ = (call);                                                                  \
        if (s_ != RNNT_OK) return s_;                                                             \
    } while (0)

/* Lets `func` take up to the device's opt-in maximum of shared memory (less its static shared memory) as
 * dynamic shared memory. Always that value, never the
 * launch's own amount: the attribute belongs to the kernel, not to a runner, so two runners on two threads
 * that set it to their own amounts before launching one kernel undid each other between set and launch
 * ("too many resources requested for launch" under the daemon's two workers). */
cudaError_t cu_allow_max_smem(const void *func);

static inline size_t cu_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
static inline int cu_round_up_i(int x, int m) { return (x + m - 1) / m * m; }
static inline int cu_div_up(int x, int m) { return (x + m - 1) / m; }

/* Leading dimensions of every matrix the GEMMs touch are padded to this many elements, so that each
 * row (and each fixed-size row chunk) starts 16-byte aligned in both storage types and cuBLAS picks
 * the same kernel for every chunk. */
#define CU_PAD 8

/* Storage of weights and activations: fp16 (fp32 accumulation) or fp32. Everything that is reduced
 * (GEMM outputs of the recurrence, cell state, joint projections) stays fp32 in both modes. */
typedef enum { CU_F16 = 0, CU_F32 = 1 } cu_dtype;
static inline size_t cu_dtype_size(cu_dtype t) { return t == CU_F16 ? 2 : 4; }

#ifdef __CUDACC__
__device__ __forceinline__ float cu_ld(const float *p) { return *p; }
__device__ __forceinline__ float cu_ld(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ void cu_st(float *p, float v) { *p = v; }
__device__ __forceinline__ void cu_st(__half *p, float v) { *p = __float2half_rn(v); }

/* The activations of FORMAT.md, written so that nvcc cannot contract or reorder them: the same
 * operations in the same order as the CPU twins (cpu_ops.h), NaN propagating. */
__device__ __forceinline__ float cu_hardsigmoid(float x)
{
    if (x != x) return x;
    float y = __fadd_rn(__fdiv_rn(x, 6.0f), 0.5f);
    return y <= 0.0f ? 0.0f : (y >= 1.0f ? 1.0f : y);
}
__device__ __forceinline__ float cu_hardtanh(float x)
{
    if (x != x) return x;
    return x <= -1.0f ? -1.0f : (x >= 1.0f ? 1.0f : x);
}
__device__ __forceinline__ float cu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
#endif

#endif
