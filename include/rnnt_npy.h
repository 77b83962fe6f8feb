/* rnnt_npy.h — a strict reader of NumPy .npy feature files: float32 or float16, rank 2 [T, F], C order,
 * little-endian, finite values. Used by the CLI (files) and the daemon (request bodies).
 * Thread-safe: no shared state. */
#ifndef RNNT_NPY_H
#define RNNT_NPY_H

#include <stddef.h>

#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_NPY_MAX_HEADER 4096

typedef struct {
    int rows, cols; /* T, F */
    float *data;    /* rows * cols fp32 values, malloc'd (NULL when rows == 0) */
} rnnt_npy;

/* Parse an in-memory .npy image. `name` is used in messages. cols must equal expect_cols when it is
 * > 0; rows must not exceed max_rows when it is > 0. */
RNNT_API rnnt_status rnnt_npy_parse_mem(const char *name, const void *buf, size_t len, int expect_cols, int max_rows,
                                        rnnt_npy *out, char *err, size_t errlen);
/* Read and parse a file (at most max_bytes; 0 = 2 GiB). */
RNNT_API rnnt_status rnnt_npy_load(const char *path, int expect_cols, int max_rows, size_t max_bytes, rnnt_npy *out,
                                   char *err, size_t errlen);
RNNT_API void rnnt_npy_free(rnnt_npy *a);

#ifdef __cplusplus
}
#endif
#endif
