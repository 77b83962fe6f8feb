/* cu_test_check.h — the GPU tests' checks of a CUDA call (CK) and of an rnntd status call (RK): each fails the
 * current cmocka test with the file, line and message. Include after <cmocka.h>. */
#ifndef RNNT_CU_TEST_CHECK_H
#define RNNT_CU_TEST_CHECK_H

#define CK(call)                                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) fail_msg("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
    } while (0)
/* RK's body names err/errlen, so the calls inside can pass them through. */
#define RK(call)                                                                                  \
    do {                                                                                          \
        char err_[512];                                                                           \
        char *err = err_;                                                                         \
        size_t errlen = sizeof err_;                                                              \
        (void)err;                                                                                \
        (void)errlen;                                                                             \
        err_[0] = 0;                                                                              \
        rnnt_status s_ = (call);                                                                  \
        if (s_ != RNNT_OK) fail_msg("%s:%d: %s", __FILE__, __LINE__, err_);                       \
    } while (0)

#endif
