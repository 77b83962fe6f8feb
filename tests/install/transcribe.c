/* transcribe.c — the smallest program against the installed librnnt (tests/install/test_installed.sh
 * builds it with `cc transcribe.c $(pkg-config --cflags --libs rnnt)`): MODEL_DIR FILE -> text. */
#include <rnnt.h>
#include <rnnt_audio.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    char err[256] = "usage: transcribe MODEL_DIR AUDIO_FILE";
    rnnt_model *m = NULL;
    rnnt_runner *r = NULL;
    float *pcm = NULL;
    size_t n = 0;
    rnnt_result res = {0};
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    int bad = argc != 3 || rnnt_model_load(argv[1], &m, err, sizeof err) || rnnt_runner_create(m, &p, &r, err, sizeof err) ||
              rnnt_audio_load_file(argv[2], rnnt_model_get_info(m)->sample_rate, NULL, &pcm, &n, NULL, err, sizeof err);
    rnnt_audio_input in = {.samples = pcm, .n_samples = n};
    bad = bad || rnnt_runner_decode_audio(r, 1, &in, &res, NULL, NULL, err, sizeof err) || res.status;
    if (bad) fprintf(stderr, "transcribe: %s\n", err);
    else puts(res.text);
    rnnt_result_clear(&res);
    free(pcm);
    rnnt_runner_free(r);
    rnnt_model_free(m);
    return bad;
}
