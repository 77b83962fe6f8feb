/* fuzz_audio.c — libFuzzer target for the audio path a request body takes: rnnt_audio_decode (magic
 * bytes, libsndfile from memory, the Ogg Vorbis header check, caps, mixing, libsoxr), then the shipped
 * frontend configuration over the samples in unaligned chunks. Built and run by run_fuzz_audio.sh (clang
 * with -fsanitize=fuzzer,address,undefined); ctest runs it for a short time where clang's libFuzzer is
 * installed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rnnt_audio.h"
#include "rnnt.h"

static rnnt_frontend *fe;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("RNNT_FUZZ_MODEL");
    rnnt_model *m;
    char err[256];
    if (dir && !rnnt_model_load(dir, &m, err, sizeof err)) {
        if (rnnt_frontend_create(m, &fe, err, sizeof err)) fe = NULL;
        rnnt_model_free(m);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rnnt_audio_limits lim = {.max_bytes = 1 << 20, .max_seconds = 20.0, .max_channels = 16};
    float *x;
    size_t n;
    char err[256];
    /* rates the daemon meets: the model's own and two that need resampling */
    int rate = size && data[0] % 3 == 0 ? 8000 : size && data[0] % 3 == 1 ? 22050 : 16000;
    if (rnnt_audio_decode("fuzz", data, size, rate, &lim, &x, &n, NULL, err, sizeof err)) return 0;
    if (fe && rate == rnnt_frontend_sample_rate(fe)) {
        rnnt_frontend_stream *s;
        if (!rnnt_frontend_stream_create(fe, 0, &s, err, sizeof err)) {
            int M = rnnt_frontend_dim(fe), made;
            float *out = malloc(sizeof(float) * (size_t)M * 64);
            for (size_t pos = 0; out && pos < n;) {
                size_t k = 1 + (pos * 7919 + n) % 3000;
                if (k > n - pos) k = n - pos;
                if (rnnt_frontend_stream_frames_after(s, k) > 64) k = 160;
                if (rnnt_frontend_feed_f32(s, x + pos, k, out, 64, &made, err, sizeof err)) abort();
                pos += k;
            }
            free(out);
            rnnt_frontend_stream_free(s);
        }
    }
    free(x);
    return 0;
}
