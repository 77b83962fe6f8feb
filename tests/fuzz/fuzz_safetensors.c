/* fuzz_safetensors — safetensors images (engine/safetensors.c), the weights of every model. After a
 * successful parse every tensor is read as the loader would (float or integer), every name is found
 * again, and the metadata is queried. Properties: tensors lie inside the data area; a rejection has a
 * message; no leak, no overread (ASan). */
#include "fuzz_util.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) abort();
    memcpy(buf, data, size);
    rnnt_st_file f;
    char err[512];
    if (rnnt_st_parse("fuzz.safetensors", buf, size, &f, err, sizeof err)) { /* buf is freed */
        fuzz_check_message(err, sizeof err);
        return 0;
    }
    for (int i = 0; i < f.n; i++) {
        const rnnt_st_tensor *t = &f.tensors[i];
        FUZZ_CHECK(t->begin <= t->end && f.data_start + t->end <= f.size, "tensor %d outside the file", i);
        FUZZ_CHECK(rnnt_st_find(&f, t->name) == t, "tensor '%s' not found by name", t->name);
        void *dst = malloc((size_t)t->numel * sizeof(float) + 1);
        if (!dst) abort();
        rnnt_status st = t->dtype == RNNT_ST_I32 || t->dtype == RNNT_ST_I64
                             ? rnnt_st_read_i32(&f, t, dst, err, sizeof err)
                             : rnnt_st_read_f32(&f, t, dst, err, sizeof err);
        if (st) fuzz_check_message(err, sizeof err);
        free(dst);
    }
    free(rnnt_st_metadata(&f, "format"));
    free(rnnt_st_metadata(&f, "name"));
    rnnt_st_close(&f);
    return 0;
}
