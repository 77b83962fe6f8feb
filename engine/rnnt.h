/* rnnt.h — the rnntd engine: load an LSTM transducer, decode batches of feature streams greedily with
 * multi-blank decoding, on the CPU or (when built with CUDA) the GPU.
 *
 * Handles, split by lifetime:
 *   rnnt_model   the weights and settings of one model directory; immutable after rnnt_model_load(),
 *                so any number of threads and runners may share one.
 *   rnnt_runner  a backend (CPU or CUDA) bound to a model, with all scratch memory for up to
 *                max_batch utterances of up to max_frames frames allocated at creation. One thread at a
 *                time per runner; use one runner per worker thread.
 *   rnnt_result  the decoding of one utterance (tokens, frames, text); owned by the caller, released
 *                with rnnt_result_clear().
 *
 * Errors: every function that can fail returns an rnnt_status and, when err is not NULL, writes a
 * one-line message into err (at most errlen bytes, always NUL-terminated). Nothing here exits or aborts
 * on bad input.
 *
 *   rnnt_model *m; char err[256];
 *   if (rnnt_model_load("models/en-char-small", &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); ... }
 *   rnnt_runner_params p = rnnt_runner_default_params();
 *   rnnt_runner *r; rnnt_runner_create(m, &p, &r, err, sizeof err);
 *   rnnt_input in = {feats, n_frames}; rnnt_result res = {0};
 *   rnnt_runner_decode(r, 1, &in, &res, NULL, err, sizeof err);  puts(res.text);
 *   rnnt_result_clear(&res); rnnt_runner_free(r); rnnt_model_free(m);
 */
#ifndef RNNT_H
#define RNNT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_VERSION "0.1.0"

typedef enum {
    RNNT_OK = 0,
    RNNT_ERR_INVALID,     /* a bad argument or input: the caller's fault */
    RNNT_ERR_IO,          /* a file could not be opened or read */
    RNNT_ERR_FORMAT,      /* a malformed model directory or file */
    RNNT_ERR_NOMEM,       /* host or device memory exhausted */
    RNNT_ERR_NUMERIC,     /* a non-finite value appeared during decoding */
    RNNT_ERR_UNSUPPORTED, /* the backend asked for is not built in or has no device */
    RNNT_ERR_DEVICE,      /* a CUDA or cuBLAS call failed */
    RNNT_ERR_TOO_LARGE,   /* more utterances or frames than the runner was created for */
} rnnt_status;

const char *rnnt_status_str(rnnt_status s);

typedef enum { RNNT_ACT_HARD = 0, RNNT_ACT_SOFT = 1 } rnnt_lstm_act;
typedef enum { RNNT_JOINT_RELU = 0, RNNT_JOINT_TANH = 1 } rnnt_joint_act;

typedef struct rnnt_model rnnt_model;
typedef struct rnnt_runner rnnt_runner;

/* What a client needs to know about a loaded model. Pointers live as long as the model. */
typedef struct {
    const char *name;
    int feature_dim;          /* F: width of an input frame */
    int frame_stacking;       /* k */
    int subsampling;          /* input frames per encoder frame: k times every time_stack */
    int sample_rate;
    int hop_length;           /* samples per input frame */
    double frame_shift_s;     /* seconds per encoder frame = subsampling * hop / sample_rate */
    int vocab_size;           /* V */
    int n_big_blanks;         /* n */
    const int *big_blank_durations;
    int max_symbols;
    rnnt_lstm_act lstm_activation;
    int n_encoder_layers, encoder_hidden; /* hidden of the last layer */
    int n_predictor_layers, predictor_hidden;
    int joint_dim;
    long long n_parameters;
} rnnt_model_info;

rnnt_status rnnt_model_load(const char *dir, rnnt_model **out, char *err, size_t errlen);
void rnnt_model_free(rnnt_model *m);
const rnnt_model_info *rnnt_model_get_info(const rnnt_model *m);
/* Token text as in tokens.txt, or NULL for an id outside [0, V). */
const char *rnnt_model_token(const rnnt_model *m, int id);
/* Encoder frames produced from `frames` input frames. */
int rnnt_model_encoder_frames(const rnnt_model *m, int frames);
/* Text of a token sequence (FORMAT.md, tokens.txt): a malloc'd string, NULL if out of memory. */
char *rnnt_model_detokenize(const rnnt_model *m, const int *tokens, int n);

typedef enum { RNNT_BACKEND_AUTO = 0, RNNT_BACKEND_CPU, RNNT_BACKEND_CUDA } rnnt_backend_kind;
typedef enum { RNNT_PRECISION_FP16 = 0, RNNT_PRECISION_FP32 } rnnt_precision;

typedef struct {
    rnnt_backend_kind backend;  /* AUTO: CUDA when built in and a device exists, else CPU */
    int device;                 /* CUDA device ordinal */
    rnnt_precision precision;   /* CUDA: FP16 storage with fp32 accumulation, or FP32 (TF32 off);
                                   the CPU backend always computes in fp32 */
    int max_batch;              /* utterances per rnnt_runner_decode call */
    int max_frames;             /* input frames per utterance */
    int cpu_threads;            /* BLAS threads for the CPU backend; 0 = leave the library's setting */
} rnnt_runner_params;

rnnt_runner_params rnnt_runner_default_params(void);
rnnt_status rnnt_runner_create(const rnnt_model *m, const rnnt_runner_params *p, rnnt_runner **out,
                               char *err, size_t errlen);
void rnnt_runner_free(rnnt_runner *r);
/* Gives back scratch memory grown for an unusually large batch (the CPU backend's workspace beyond
 * 16 MB; nothing on CUDA, whose buffers are sized at creation). For a runner about to go idle: the
 * next large batch maps it again. Same thread rules as rnnt_runner_decode. */
void rnnt_runner_trim(rnnt_runner *r);
const char *rnnt_runner_backend_name(const rnnt_runner *r); /* "cpu" or "cuda" */
const char *rnnt_runner_device_name(const rnnt_runner *r);  /* e.g. "NVIDIA H100 80GB HBM3" */
const rnnt_runner_params *rnnt_runner_get_params(const rnnt_runner *r);

/* One utterance: frames x feature_dim floats, row-major, not normalised (the model's frontend
 * normalisation is applied by the engine). Must be finite: the runner checks every value and rejects
 * the batch with RNNT_ERR_INVALID otherwise, unless finite_checked says the caller already did (the
 * .npy reader and rnntd's body parsers check as they read; a second pass over a batch of 256 ten-second
 * utterances is 82 MB of memory traffic, ~19 ms on the H100 host). */
typedef struct {
    const float *features;
    int frames;
    int finite_checked; /* nonzero: every value is known to be finite */
} rnnt_input;

typedef struct {
    rnnt_status status;   /* per utterance: RNNT_OK or RNNT_ERR_NUMERIC */
    int n_tokens;
    int *tokens;          /* token ids, n_tokens of them */
    int *frames;          /* encoder frame at which each token was emitted */
    char *text;
    int encoder_frames;   /* T_enc */
    int frames_skipped;   /* frames jumped over by big blanks (beyond the first of each skip) */
    int decode_steps;     /* joint evaluations */
} rnnt_result;

typedef struct {
    double encoder_s, predictor_s, joint_s, decode_s, total_s;
} rnnt_timing;

/* Decode n (1..max_batch) utterances as one batch. results[i] must be zeroed or cleared beforehand;
 * on RNNT_OK every results[i] is filled (a per-utterance numeric failure is reported in
 * results[i].status, with no text). An utterance's result never depends on the others in the batch.
 * timing may be NULL. */
rnnt_status rnnt_runner_decode(rnnt_runner *r, int n, const rnnt_input *inputs, rnnt_result *results,
                               rnnt_timing *timing, char *err, size_t errlen);
void rnnt_result_clear(rnnt_result *res);

/* 1 when the engine was built with the CUDA backend and at least one device is usable. */
int rnnt_cuda_available(void);

#ifdef __cplusplus
}
#endif
#endif
