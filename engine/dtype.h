/* dtype.h — conversions of the 16-bit float formats that model and feature files store (IEEE half
 * for .npy and safetensors F16, bfloat16 for safetensors BF16) to fp32, exact (every 16-bit value,
 * subnormals, infinities and NaN included, has an fp32 twin). Implemented in dtype.c.
 * Thread safety: pure functions. */
#ifndef RNNT_DTYPE_H
#define RNNT_DTYPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

float rnnt_half_to_float(uint16_t h);
float rnnt_bf16_to_float(uint16_t h);

#ifdef __cplusplus
}
#endif
#endif
