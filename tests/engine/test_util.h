/* test_util.h — helpers shared by the engine tests: temporary directories, writing files, a
 * safetensors writer that can also write hostile files, a random number generator, and error
 * measures. */
#ifndef RNNT_TEST_UTIL_H
#define RNNT_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "rnnt.h"

typedef struct {
    const char *name;
    const char *dtype;   /* "F32", "F16", "I32", or anything for hostile files */
    int ndim;
    int64_t shape[4];
    const void *data;    /* raw little-endian bytes */
    size_t nbytes;
} tu_tensor;

/* mkdtemp under $TMPDIR; the returned path is malloc'd. tu_rmdir removes it with everything inside
 * and frees the path. */
char *tu_tmpdir(void);
void tu_rmdir(char *dir);
void tu_write_file(const char *dir, const char *name, const void *data, size_t len);
char *tu_read_file(const char *path, size_t *len);
/* A well-formed safetensors file of these tensors (offsets in order). */
void tu_write_safetensors(const char *path, const tu_tensor *t, int n);
/* A safetensors file with a raw header text and raw data. */
void tu_write_safetensors_raw(const char *path, const char *header, const void *data, size_t len);

uint64_t tu_rand_next(uint64_t *s);
float tu_randu(uint64_t *s); /* uniform in [-1, 1) */

/* ||a - b||_inf / max(||b||_inf, 1e-30) */
double tu_rel_err(const float *a, const float *b, size_t n);

const char *tu_data_dir(void); /* $RNNT_TEST_DATA */

/* 0 when a and b are the same result bit for bit (status, tokens, frames, probabilities, text, encoder
 * frames, frames skipped, steps), else 1 with what differs first in msg ("utterance i: ..."). Safe on any
 * thread (it does not fail the test itself). */
int tu_result_diff(const rnnt_result *a, const rnnt_result *b, int i, char *msg, size_t len);

/* A tiny valid model written to DIR: F=6, stacking 2, encoder 2 layers (12 -> 10, time_stack 2; 20 -> 9),
 * predictor embedding 5, 1 layer of 7, joint 8 relu, V=4, big blanks [2, 3], max_symbols 3,
 * normalize global, hard activations, random weights from seed. The yaml text can be overridden. */
extern const char *tu_small_yaml;
void tu_write_small_model(const char *dir, uint64_t seed, const char *yaml);
/* The tensor list of that model (names, shapes, random data); free with tu_free_tensors. */
int tu_small_tensors(uint64_t seed, tu_tensor **out);
void tu_free_tensors(tu_tensor *t, int n);

#endif
