/* eng_pcm.h — audio requests as PCM to the engine: on the CUDA backend an audio body is only decoded
 * (libsndfile, mono, resampled) on the prep thread and its samples go to the worker, whose runner
 * computes the features on the GPU as part of the batch's upload (rnnt_runner_decode_audio,
 * kernels/cu_frontend.h); on the CPU backend the prep threads keep computing features (they run
 * beside the workers there). A batch may hold both kinds of job: it is decoded as two sub-batches,
 * which gives the same results (an utterance's result never depends on its batch).
 * Thread-safety: no shared state. */
#ifndef SRV_ENG_PCM_H
#define SRV_ENG_PCM_H

#include <stddef.h>

#include "rnnt.h"

/* 1 when audio requests should reach the engine as PCM: the runners' backend is "cuda". The
 * environment variable RNNTD_AUDIO_PCM=1 or 0 says yes or no for any backend (the CPU runner then
 * runs the frontend on the worker: for tests of this path without a GPU, or to keep features on the
 * prep threads). */
int eng_pcm_wanted(const char *backend_name);

/* Decodes n utterances on r: utterance i is PCM when n_samples[i] > 0 (in[i].features then holds
 * n_samples[i] finite float samples at the model's rate, in[i].frames their frame count), else
 * features as rnnt_runner_decode takes them. results as rnnt_runner_decode's (zeroed beforehand;
 * on an error none is left filled). */
rnnt_status eng_pcm_decode(rnnt_runner *r, int n, const rnnt_input *in, const size_t *n_samples, rnnt_result *results,
                           char *err, size_t errlen);

#endif
