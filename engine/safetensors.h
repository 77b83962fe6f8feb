/* safetensors.h — a strict reader of the safetensors format (weights and golden files).
 * The whole file is read into memory; the header is validated completely before any tensor is used:
 * known dtypes, shapes whose byte size matches their offsets, offsets inside the file, no overlaps, no
 * gaps, no duplicates. Not thread-safe per file object. */
#ifndef RNNT_SAFETENSORS_H
#define RNNT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_ST_MAX_HEADER (16u << 20)
#define RNNT_ST_MAX_DIMS 8

typedef enum { RNNT_ST_F32, RNNT_ST_F16, RNNT_ST_BF16, RNNT_ST_I32, RNNT_ST_I64 } rnnt_st_dtype;

typedef struct {
    char *name;
    rnnt_st_dtype dtype;
    int ndim;
    int64_t shape[RNNT_ST_MAX_DIMS];
    int64_t numel;
    size_t begin, end; /* byte offsets in the data area */
} rnnt_st_tensor;

typedef struct {
    char *path;
    unsigned char *buf; /* the whole file */
    size_t size;
    size_t data_start;
    int n;
    rnnt_st_tensor *tensors;
    char *metadata_json; /* the __metadata__ object as JSON text, or NULL */
} rnnt_st_file;

rnnt_status rnnt_st_open(const char *path, rnnt_st_file *f, char *err, size_t errlen);
/* Parse a file image already in memory (takes ownership of buf, which must come from malloc). */
rnnt_status rnnt_st_parse(const char *path, unsigned char *buf, size_t size, rnnt_st_file *f, char *err,
                          size_t errlen);
void rnnt_st_close(rnnt_st_file *f);
const rnnt_st_tensor *rnnt_st_find(const rnnt_st_file *f, const char *name);
const char *rnnt_st_dtype_name(rnnt_st_dtype d);
/* Copy a float tensor (F32/F16/BF16) into dst as fp32. Fails on a non-finite value, naming the tensor
 * and the flat index. */
rnnt_status rnnt_st_read_f32(const rnnt_st_file *f, const rnnt_st_tensor *t, float *dst, char *err, size_t errlen);
/* Copy an integer tensor (I32/I64 within int range) into dst. */
rnnt_status rnnt_st_read_i32(const rnnt_st_file *f, const rnnt_st_tensor *t, int32_t *dst, char *err, size_t errlen);
/* A metadata string value (malloc'd copy) or NULL. */
char *rnnt_st_metadata(const rnnt_st_file *f, const char *key);

#ifdef __cplusplus
}
#endif
#endif
