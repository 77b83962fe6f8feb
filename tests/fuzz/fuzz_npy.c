/* fuzz_npy — .npy images (engine/npy.c) as the CLI reads files and the daemon reads
 * application/x-npy bodies (server/body.c). Properties: an accepted array is rank 2 with finite
 * values; the daemon's path accepts exactly what the reader accepts at that width and row limit, with
 * the same values; a rejection is a 4xx (or 503 for memory) with a code and a message. */
#include <math.h>

#include "body.h"
#include "fuzz_util.h"
#include "rnnt_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rnnt_npy a;
    char err[256];
    body_feats bf;
    srv_err e = {0};
    rnnt_status st = rnnt_npy_parse_mem("fuzz.npy", data, size, 0, 0, &a, err, sizeof err);
    if (st == RNNT_OK) {
        FUZZ_CHECK(a.rows >= 0 && a.cols >= 1, "shape [%d, %d]", a.rows, a.cols);
        FUZZ_CHECK((a.rows == 0) == (a.data == NULL), "rows %d, data %p", a.rows, (void *)a.data);
        for (size_t i = 0; i < (size_t)a.rows * (size_t)a.cols; i++) FUZZ_CHECK(isfinite(a.data[i]), "value %zu", i);
        int rc = body_parse_npy((const char *)data, size, a.cols, a.rows > 0 ? a.rows : 1, &bf, &e);
        FUZZ_CHECK(rc == 0, "the body reader refused what the file reader took: %u %s", e.status, e.message);
        FUZZ_CHECK(bf.frames == a.rows, "%d frames, expected %d", bf.frames, a.rows);
        if (a.rows)
            FUZZ_CHECK(!memcmp(bf.data, a.data, (size_t)a.rows * (size_t)a.cols * sizeof(float)), "values differ");
        free(bf.data);
        rnnt_npy_free(&a);
    } else {
        fuzz_check_message(err, sizeof err);
        FUZZ_CHECK(a.data == NULL, "data left after an error");
    }
    /* The daemon's limits for the shipped model: 80 features, at most 1000 frames. */
    if (body_parse_npy((const char *)data, size, 80, 1000, &bf, &e) == 0) {
        FUZZ_CHECK(bf.frames >= 0 && bf.frames <= 1000, "%d frames", bf.frames);
        free(bf.data);
    } else {
        FUZZ_CHECK((e.status >= 400 && e.status < 500) || e.status == 503, "status %u", e.status);
        FUZZ_CHECK(e.code && e.code[0], "no error code");
        fuzz_check_message(e.message, sizeof e.message);
    }
    return 0;
}
