/* lab_util.h — what the kernel lab's programs and bench_encoder share: CK (a CUDA call) and RK (an rnnt
 * call with its err/errlen) that print file:line and end the program on failure — these are main
 * programs, never library code — and the LCG that draws their random inputs in [-1, 1). */
#ifndef RNNT_LAB_UTIL_H
#define RNNT_LAB_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define RK(call)                                                                                   \
    do {                                                                                           \
        char err[512];                                                                             \
        size_t errlen = sizeof err;                                                                \
        rnnt_status s_ = (call);                                                                   \
        if (s_ != RNNT_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, err);                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* uniform in [-1, 1) from a 64-bit LCG state */
static inline float lab_frand(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*state >> 40) / 8388608.0 - 1.0);
}

#endif
