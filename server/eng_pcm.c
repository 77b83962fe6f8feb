/* eng_pcm.c — batches of features and PCM (eng_pcm.h). */
#include "eng_pcm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int eng_pcm_wanted(const char *backend_name)
{
    const char *force = getenv("RNNTD_AUDIO_PCM"); /* 1 / 0: PCM on any backend / never (tests, fallback) */
    if (force && (!strcmp(force, "0") || !strcmp(force, "1"))) return force[0] == '1';
    return backend_name && strcmp(backend_name, "cuda") == 0;
}

rnnt_status eng_pcm_decode(rnnt_runner *r, int n, const rnnt_input *in, const size_t *n_samples, rnnt_result *results,
                           char *err, size_t errlen)
{
    int na = 0;
    for (int i = 0; i < n; i++) na += n_samples[i] > 0;
    if (na == 0) return rnnt_runner_decode(r, n, in, results, NULL, err, errlen);
    /* sub-batches: the features first, then the audio; idx maps their entries back */
    size_t nb = (size_t)n;
    int *idx = malloc(nb * sizeof *idx);
    rnnt_input *fin = calloc(nb, sizeof *fin);
    rnnt_audio_input *ain = calloc(nb, sizeof *ain);
    rnnt_result *tmp = calloc(nb, sizeof *tmp);
    rnnt_status st = RNNT_OK;
    if (!idx || !fin || !ain || !tmp) {
        st = RNNT_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
    }
    int nf = 0;
    for (int i = 0; i < n && !st; i++)
        if (!n_samples[i]) {
            idx[nf] = i;
            fin[nf++] = in[i];
        }
    for (int i = 0, k = 0; i < n && !st; i++)
        if (n_samples[i]) {
            idx[nf + k] = i;
            /* samples decoded by engine/audio.c, which refuses non-finite ones */
            ain[k++] = (rnnt_audio_input){in[i].features, NULL, n_samples[i], 1};
        }
    if (!st && nf) st = rnnt_runner_decode(r, nf, fin, tmp, NULL, err, errlen);
    if (!st) st = rnnt_runner_decode_audio(r, na, ain, tmp + nf, NULL, NULL, err, errlen);
    for (int k = 0; k < n && !st; k++) results[idx[k]] = tmp[k]; /* the results own the arrays now */
    if (st && tmp)
        for (int k = 0; k < n; k++) rnnt_result_clear(&tmp[k]);
    free(idx);
    free(fin);
    free(ain);
    free(tmp);
    return st;
}
