/* feature_norm.c — per-utterance feature normalisation (FORMAT.md, `normalize: per_feature` and
 * `per_feature_stacked`), the NeMo and Jasper/MLPerf rule: each feature column is shifted by its mean
 * over the utterance and divided by its unbiased standard deviation + 1e-5. per_feature (NeMo): the F
 * columns over the T frames. per_feature_stacked (MLPerf): the k·F columns of the stacked input over
 * its T1 stacked frames, the zero padding of a partial last group counted as frames. It runs before
 * any backend: the stacked variant writes the normalised columns back as T1·k unstacked frames (the
 * padding of the last group included, now normalised), so every backend's own stacking reads exactly
 * the normalised stacked input and needs no change. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

rnnt_status rnnt_feature_norm_per_feature(const struct rnnt_model *m, const float *x, int T, float **out, int *out_frames, char *err,
                                          size_t errlen)
{
    *out = NULL;
    *out_frames = 0;
    if (T <= 0) return RNNT_OK;
    int F = m->feature_dim, k = m->fe.normalize == RNNT_NORM_PER_FEATURE_STACKED ? m->stacking : 1, T1 = rnnt_stacked_len(T, k), Tk = T1 * k;
    float *y = malloc(sizeof(float) * (size_t)Tk * (size_t)F);
    if (!y) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for the normalised features (%d frames)", Tk);
    memcpy(y, x, sizeof(float) * (size_t)T * (size_t)F);
    memset(y + (size_t)T * F, 0, sizeof(float) * (size_t)(Tk - T) * (size_t)F);
    /* column (j, f) of the stacked input = frames j, k + j, 2k + j, ... of y, feature f */
    for (int j = 0; j < k; j++)
        for (int f = 0; f < F; f++) {
            double sum = 0.0;
            for (int t = 0; t < T1; t++) sum += y[((size_t)t * k + j) * F + f];
            float mean = (float)(sum / T1);
            double ss = 0.0;
            for (int t = 0; t < T1; t++) {
                float d = y[((size_t)t * k + j) * F + f] - mean;
                ss += (double)d * d;
            }
            /* one stacked frame: no spread (NeMo's rule; torch.std would give NaN) */
            float sd = T1 > 1 ? (float)sqrt(ss / (T1 - 1)) : 0.0f;
            sd += 1e-5f;
            for (int t = 0; t < T1; t++) {
                float *v = &y[((size_t)t * k + j) * F + f];
                *v = (*v - mean) / sd;
            }
        }
    *out = y;
    *out_frames = Tk;
    return RNNT_OK;
}
