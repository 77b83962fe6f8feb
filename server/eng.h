/* eng.h — one generation of the engine as the daemon uses it: a loaded model plus one runner per
 * worker thread, warmed up. Reference-counted, so a SIGHUP reload can build a new generation while
 * the old one finishes the requests validated against it.
 * Thread-safety: eng_ref/eng_unref and the getters from any thread; runner i is used only by
 * scheduler worker i (eng_run), so no runner is ever used by two threads. */
#ifndef SRV_ENG_H
#define SRV_ENG_H

#include <stddef.h>

#include "cfg.h"
#include "rnnt.h"
#include "scheduler.h"

typedef struct eng eng;

/* What a request hands the engine; sj must stay the first member (eng_run casts). */
typedef struct {
    sched_job sj;
    const float *features; /* frames x feature_dim; or n_samples PCM samples (eng_pcm.h) */
    int frames;
    size_t n_samples;      /* nonzero: features holds PCM at the model's rate */
    rnnt_result result;    /* filled when status == RNNT_OK */
    rnnt_status status;    /* RNNT_OK, a per-utterance RNNT_ERR_NUMERIC, or the batch's error */
    char err[200];
    double compute_s;      /* engine time of its batch */
} eng_job;

/* Loads c->model_path and creates `workers` runners (c->backend, device, precision, max_batch,
 * max_frames, cpu_threads), each warmed up with one decode of a dummy input. */
int eng_create(const cfg *c, int workers, eng **out, char *err, size_t errlen);
eng *eng_ref(eng *e);
void eng_unref(eng *e);

const rnnt_model *eng_model(const eng *e);
const rnnt_model_info *eng_info(const eng *e);
const char *eng_backend(const eng *e);
const char *eng_device(const eng *e);
/* The parameters the engine's runners were made with (device, precision...), for runners made
 * elsewhere (the stream workers'). */
const rnnt_runner_params *eng_runner_params(const eng *e);
const char *eng_path(const eng *e);
int eng_max_batch(const eng *e);
int eng_max_frames(const eng *e);
double eng_warmup_s(const eng *e);

/* The sched_exec run function: group is the eng the jobs were validated against. */
void eng_run(void *ctx, int worker, const void *group, sched_job **jobs, int n);
/* The sched_exec abandon hook: a job of a batch past batching.worker_deadline_s fails (500). */
void eng_abandon(void *ctx, sched_job *j, double ran_s);
/* Ends the hangs of RNNTD_FAULT=worker_hang (at shutdown, so a test daemon exits cleanly). */
void eng_release_hangs(void);

#endif
