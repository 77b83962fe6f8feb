/* backend.h — what a compute backend provides to the runner (internal). The runner validates the
 * inputs, sizes and allocates the results (tokens/frames arrays of capacity encoder_frames *
 * max_symbols), and turns tokens into text; a backend only computes.
 * Thread safety: the ops tables are constant; a backend state (one per runner) is used by one thread at
 * a time, as its runner is; backends only read the model. */
#ifndef RNNT_BACKEND_H
#define RNNT_BACKEND_H

#include "model.h"
#include "status.h" /* rnnt_set_err, for every backend */

struct rnnt_stream;

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rnnt_backend_ops {
    const char *name;
    /* Allocate everything for up to p->max_batch utterances of p->max_frames frames. */
    rnnt_status (*create)(const struct rnnt_model *m, const rnnt_runner_params *p, void **state,
                          char *err, size_t errlen);
    void (*destroy)(void *state);
    const char *(*device_name)(void *state);
    /* Decode n utterances; fill n_tokens, tokens, frames, encoder_frames, frames_skipped,
     * decode_steps and status of each result (tokens/frames arrays are preallocated). */
    rnnt_status (*decode)(void *state, int n, const rnnt_input *in, rnnt_result *out,
                          rnnt_timing *timing, char *err, size_t errlen);
    /* Advance n distinct streams of this model by the input each has (at most max_frames frames of
     * each), decoding every encoder frame that exists (stream.h). NULL: the backend has no streams.
     * On an error no stream has changed. Last member, so positional initialisers may leave it out. */
    rnnt_status (*advance)(void *state, int n, struct rnnt_stream *const *streams, rnnt_timing *timing,
                           char *err, size_t errlen);
    /* Decode n utterances given as PCM (validated by the runner: exactly one sample pointer each, finite
     * float samples, frames <= max_frames), the frontend computed by the backend itself. NULL, or
     * RNNT_ERR_UNSUPPORTED before any work (a frontend the backend cannot run, e.g. dither): the runner
     * computes features on the CPU and calls decode. *frontend_s: the frontend's own time. */
    rnnt_status (*decode_audio)(void *state, int n, const rnnt_audio_input *in, rnnt_result *out, rnnt_timing *timing,
                                double *frontend_s, char *err, size_t errlen);
    /* Asynchronous batches (rnnt_runner_submit/collect). submit: stage n utterances (validated by the
     * runner as for decode) and start them, or queue them behind the one running; the inputs are not
     * read after it returns; on an error nothing is pending. collect: wait for the oldest pending batch
     * and fill its results as decode would (the arrays preallocated by the runner); the batch is gone
     * whatever the outcome. The runner keeps at most RNNT_RUNNER_MAX_PENDING pending and calls nothing
     * else on the state meanwhile. NULL (the CPU): the runner decodes at submit. */
    rnnt_status (*submit)(void *state, int n, const rnnt_input *in, char *err, size_t errlen);
    rnnt_status (*collect)(void *state, rnnt_result *out, rnnt_timing *timing, char *err, size_t errlen);
} rnnt_backend_ops;

/* The CPU frontend's tables (frontend.c), for a backend that runs the same frontend elsewhere: the
 * window [win_length], per mel m its nonzero bins [mel_lo[m], mel_hi[m]) with weights mel_w[mel_off[m]..]
 * (n_weights in all), and the scalars in float as the CPU uses them. Valid while fe lives. */
typedef struct {
    const rnnt_frontend_cfg *cfg;
    int n_bins, n_weights;
    const float *window, *mel_w;
    const int *mel_lo, *mel_hi, *mel_off;
    float preemph, log_floor, power;
} rnnt_frontend_tables;
void rnnt_frontend_get_tables(const rnnt_frontend *fe, rnnt_frontend_tables *t);

/* The model, backend and backend state behind a runner (runner.c), for the stream calls (stream.c). */
void rnnt_runner_backend(const rnnt_runner *r, const struct rnnt_model **m, const rnnt_backend_ops **ops, void **state);

/* normalize: per_feature (feature_norm.c): x [T, F] -> *out [T1·k, F] (malloc'd, the caller frees),
 * normalised per stacked column; *out = NULL for T = 0. */
rnnt_status rnnt_feature_norm_per_feature(const struct rnnt_model *m, const float *x, int T, float **out, int *out_frames, char *err,
                                          size_t errlen);

extern const rnnt_backend_ops rnnt_backend_cpu;
/* Gives back a CPU workspace grown beyond what a usual batch needs (rnnt_runner_trim). */
void rnnt_cpu_trim(void *state);
#ifdef RNNT_WITH_CUDA
extern const rnnt_backend_ops rnnt_backend_cuda;
/* kernels/backend_cuda.cu: what rnnt_cuda_device_count and rnnt_cuda_memory (rnnt.h) answer in a CUDA
 * build; the public functions live in runner.c, so that librnnt exports them from its visible objects */
int rnnt_backend_cuda_device_count(void);
int rnnt_backend_cuda_memory(int device, size_t *used, size_t *total);
#endif

#ifdef __cplusplus
}
#endif
#endif
