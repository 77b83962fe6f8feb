/* cu_common.cu — error formatting and status mapping for the CUDA backend. */
#include "cu_common.h"

#include <stdarg.h>
#include <stdio.h>

rnnt_status cu_set_err(char *err, size_t errlen, rnnt_status s, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}

rnnt_status cu_status_of(cudaError_t e)
{
    if (e == cudaSuccess) return RNNT_OK;
    if (e == cudaErrorMemoryAllocation) return RNNT_ERR_NOMEM;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
        return RNNT_ERR_UNSUPPORTED;
    return RNNT_ERR_DEVICE;
}

rnnt_status cu_status_of_blas(cublasStatus_t e)
{
    if (e == CUBLAS_STATUS_SUCCESS) return RNNT_OK;
    if (e == CUBLAS_STATUS_ALLOC_FAILED) return RNNT_ERR_NOMEM;
    return RNNT_ERR_DEVICE;
}

const char *cu_blas_str(cublasStatus_t e)
{
    switch (e) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "out of memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
    default: return "unknown status";
    }
}

cudaError_t cu_allow_max_smem(const void *func)
{
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    /* the limit counts dynamic memory only: the opt-in maximum less the kernel's static shared memory */
    cudaFuncAttributes fa;
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, func);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - (int)fa.sharedSizeBytes);
    return e;
}
