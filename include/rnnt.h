/* rnnt.h — the rnntd engine: load an LSTM transducer, decode batches of feature streams greedily with
 * multi-blank decoding, on the CPU or (when built with CUDA) the GPU.
 *
 * Handles, split by lifetime:
 *   rnnt_model   the weights and settings of one model directory; immutable after rnnt_model_load(),
 *                so any number of threads and runners may share one.
 *   rnnt_runner  a backend (CPU or CUDA) bound to a model, with all scratch memory for up to
 *                max_batch utterances of up to max_frames frames allocated at creation. One thread at a
 *                time per runner; use one runner per worker thread. It holds the batches submitted and
 *                not yet collected (rnnt_runner_submit, at most RNNT_RUNNER_MAX_PENDING) and their
 *                results until rnnt_runner_collect hands them over.
 *   rnnt_result  the decoding of one utterance (tokens, frames, text); owned by the caller, released
 *                with rnnt_result_clear().
 *   rnnt_frontend / rnnt_frontend_stream  PCM -> features (below): one frontend per model, shared by
 *                threads; one stream per utterance and thread.
 *   rnnt_stream  one utterance decoded while its input arrives (section "Streams" below).
 *
 * Thread safety: a model and a frontend are read-only and shareable; a runner or a stream is used by one
 * thread at a time. FFTW's planner is not thread-safe: the engine serialises its own planning (frontend
 * creation and release) under a process-wide lock, so a program that also plans FFTs with FFTW itself
 * must not do so while creating or freeing frontends.
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
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RNNT_VERSION "0.1.0"

/* The shared library librnnt is built with hidden visibility: it exports exactly the functions that
 * the public headers (include/: this file, rnnt_audio.h, rnnt_npy.h, rnnt_words.h) mark RNNT_API. */
#if defined(__GNUC__) || defined(__clang__)
#define RNNT_API __attribute__((visibility("default")))
#else
#define RNNT_API
#endif

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

RNNT_API const char *rnnt_status_str(rnnt_status s);

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

RNNT_API rnnt_status rnnt_model_load(const char *dir, rnnt_model **out, char *err, size_t errlen);
RNNT_API void rnnt_model_free(rnnt_model *m);
RNNT_API const rnnt_model_info *rnnt_model_get_info(const rnnt_model *m);
/* Token text as in tokens.txt, or NULL for an id outside [0, V). */
RNNT_API const char *rnnt_model_token(const rnnt_model *m, int id);
/* Encoder frames produced from `frames` input frames. */
RNNT_API int rnnt_model_encoder_frames(const rnnt_model *m, int frames);
/* Text of a token sequence (FORMAT.md, tokens.txt): a malloc'd string, NULL if out of memory. */
RNNT_API char *rnnt_model_detokenize(const rnnt_model *m, const int *tokens, int n);

typedef enum { RNNT_BACKEND_AUTO = 0, RNNT_BACKEND_CPU, RNNT_BACKEND_CUDA } rnnt_backend_kind;
typedef enum { RNNT_PRECISION_FP16 = 0, RNNT_PRECISION_FP32 } rnnt_precision;

/* The most utterances (or streams) one runner takes per call: the one cap of every max_batch, the
 * runner's and the daemon's batching.max_batch and streaming.max_batch. */
#define RNNT_MAX_BATCH 2048

typedef struct {
    rnnt_backend_kind backend;  /* AUTO: CUDA when built in and a device exists, else CPU */
    int device;                 /* CUDA device ordinal */
    rnnt_precision precision;   /* CUDA: FP16 storage with fp32 accumulation, or FP32 (TF32 off);
                                   the CPU backend always computes in fp32 */
    int max_batch;              /* utterances per rnnt_runner_decode call, 1..RNNT_MAX_BATCH */
    int max_frames;             /* input frames per utterance */
    int cpu_threads;            /* BLAS threads for the CPU backend; 0 = leave the library's setting */
} rnnt_runner_params;

RNNT_API rnnt_runner_params rnnt_runner_default_params(void);
RNNT_API rnnt_status rnnt_runner_create(const rnnt_model *m, const rnnt_runner_params *p, rnnt_runner **out,
                                        char *err, size_t errlen);
RNNT_API void rnnt_runner_free(rnnt_runner *r);
/* Gives back scratch memory grown for an unusually large batch (the CPU backend's workspace beyond
 * 16 MB; nothing on CUDA, whose buffers are sized at creation). For a runner about to go idle: the
 * next large batch maps it again. Same thread rules as rnnt_runner_decode. */
RNNT_API void rnnt_runner_trim(rnnt_runner *r);
RNNT_API const char *rnnt_runner_backend_name(const rnnt_runner *r); /* "cpu" or "cuda" */
RNNT_API const char *rnnt_runner_device_name(const rnnt_runner *r);  /* e.g. "NVIDIA H100 80GB HBM3" */
RNNT_API const rnnt_runner_params *rnnt_runner_get_params(const rnnt_runner *r);

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
    float *probs;         /* per token: the joint's softmax probability of the emitted label at the
                             evaluation that emitted it, in (0, 1] (CPU and CUDA backends; on CUDA
                             the same definition, computed in the joint's argmax kernel) */
} rnnt_result;

typedef struct {
    double encoder_s, predictor_s, joint_s, decode_s, total_s;
} rnnt_timing;

/* Decode n (1..max_batch) utterances as one batch. results[i] must be zeroed or cleared beforehand;
 * on RNNT_OK every results[i] is filled (a per-utterance numeric failure is reported in
 * results[i].status, with no text). An utterance's result never depends on the others in the batch.
 * timing may be NULL. */
RNNT_API rnnt_status rnnt_runner_decode(rnnt_runner *r, int n, const rnnt_input *inputs, rnnt_result *results,
                                        rnnt_timing *timing, char *err, size_t errlen);
RNNT_API void rnnt_result_clear(rnnt_result *res);

/* Asynchronous batches: a thread that keeps two batches in flight on one runner hides the host work of
 * one under the device work of the other (on CUDA: batch k + 1 is copied into pinned memory, by the
 * calling thread and the staging helpers, and its upload queued, while batch k runs on the GPU).
 *
 *   rnnt_runner_submit(r, n0, in0, ...);                 // in0 may be freed or reused on return
 *   rnnt_runner_submit(r, n1, in1, ...);                 // staged while batch 0 runs
 *   rnnt_runner_collect(r, res0, &n, &timing, ...);      // batch 0's results; batch 1 starts
 *   rnnt_runner_submit(r, n2, in2, ...); rnnt_runner_collect(r, res1, ...); ...
 *
 * submit checks the batch as rnnt_runner_decode does, copies what it needs and returns; on an error
 * nothing is pending. At most RNNT_RUNNER_MAX_PENDING batches are submitted and not collected (another
 * submit is RNNT_ERR_INVALID). collect waits for the oldest pending batch and hands over its results:
 * results[0..n) (zeroed or cleared beforehand, room for that batch's n), *n_out = n (may be NULL); the
 * batch is collected whatever the outcome, and its outcome, results and timing (total_s: from submit
 * to collect) are those rnnt_runner_decode gives the same batch. Batches come back in submission order.
 * While a batch is pending the runner's other decoding calls (decode, decode_audio, advance_streams)
 * are refused with RNNT_ERR_INVALID; rnnt_runner_free drops uncollected batches. The CPU backend decodes
 * at submit (rnnt_runner_overlaps says 0). Same thread rule as every runner call: one thread at a
 * time per runner, so submit and collect may come from different threads only in turn. */
#define RNNT_RUNNER_MAX_PENDING 2
RNNT_API rnnt_status rnnt_runner_submit(rnnt_runner *r, int n, const rnnt_input *inputs, char *err, size_t errlen);
RNNT_API rnnt_status rnnt_runner_collect(rnnt_runner *r, rnnt_result *results, int *n_out, rnnt_timing *timing, char *err,
                                         size_t errlen);
RNNT_API int rnnt_runner_pending(const rnnt_runner *r);  /* batches submitted and not collected */
RNNT_API int rnnt_runner_overlaps(const rnnt_runner *r); /* 1: submit returns before the batch is decoded */

/* One emitted token of a result as a client shows it (rnnt_result_token). rnnt_result.text is the
 * whole text already (tokens.txt rules, rnnt_model_detokenize); rnnt_words.h groups tokens into words. */
typedef struct {
    int id;            /* token id in [0, V) */
    const char *text;  /* its text in tokens.txt (U+2581 starts a word); lives as long as the model */
    int frame;         /* encoder frame it was emitted on */
    double time_s;     /* where it was emitted on the input's time line: frame * frame_shift_s */
    float prob;        /* rnnt_result.probs[i], or -1 where the backend does not compute it */
} rnnt_token;
/* Token i (0 <= i < res->n_tokens) of a result of model m. RNNT_ERR_INVALID for an i out of range or
 * an id outside the vocabulary (out unchanged). */
RNNT_API rnnt_status rnnt_result_token(const rnnt_model *m, const rnnt_result *res, int i, rnnt_token *out, char *err,
                                       size_t errlen);

/* One utterance as PCM at the model's sample rate (rnnt_frontend_sample_rate), mono: exactly one of
 * samples (float, full scale +-1, must be finite) and pcm16 (16-bit, x / 32768) when n_samples > 0. */
typedef struct {
    const float *samples;
    const int16_t *pcm16;
    size_t n_samples;
    int finite_checked; /* nonzero: every float sample is known to be finite */
} rnnt_audio_input;

/* rnnt_runner_decode from audio: the model's frontend (below) turns each utterance into features, then
 * the batch is decoded as rnnt_runner_decode would decode those features. The CUDA backend computes the
 * frontend on the GPU as part of the batch's upload (PCM is sent, features never cross the bus;
 * kernels/cu_frontend.h), within float rounding of the CPU frontend; the CPU backend (and CUDA for a
 * frontend it cannot run, such as dither) runs rnnt_frontend on the calling thread. An utterance
 * shorter than one window has 0 frames. frontend_s (may be NULL): the frontend's time in seconds (GPU
 * time of its kernels on CUDA, host wall time on the CPU path). */
RNNT_API rnnt_status rnnt_runner_decode_audio(rnnt_runner *r, int n, const rnnt_audio_input *inputs, rnnt_result *results,
                                              rnnt_timing *timing, double *frontend_s, char *err, size_t errlen);

/* ---- The feature frontend: PCM at the model's sample rate -> log-mel features -------------------
 * Computes the model's `frontend` block exactly as models/train/features.py does (FORMAT.md): pre-
 * emphasis, dither (see below), framing with center false (frame i = samples [i*hop, i*hop + win)),
 * the symmetric window, a zero-padded real FFT of n_fft, |X|^power, the mel filterbank of the model's
 * scale and norm, ln(max(mel, log_floor)). Normalisation by frontend.mean/std is NOT applied: the
 * runner applies it, so these features are what a client would send as .npy.
 *
 * Handles, split by lifetime:
 *   rnnt_frontend         the window, filterbank and FFT plan of one model, made once; immutable
 *                         after creation, so any number of threads and streams may share one. It does
 *                         not refer to the model after creation.
 *   rnnt_frontend_stream  one utterance being fed: the samples not yet framed (at most win_length - 1
 *                         plus the previous sample for pre-emphasis) and scratch. One thread at a time.
 * Thread safety: FFTW's planner is not thread-safe (only fftwf_execute* is). rnnt_frontend_create and
 * rnnt_frontend_free take a process-wide engine lock around planning, so engine threads may create and
 * free frontends at any time; a program that calls FFTW's planner itself must not do so concurrently.
 * Feeding streams from many threads at once (one stream per thread) is safe.
 *
 * Streaming: samples may come in chunks of any size, aligned to the hop or not; the frames are bitwise
 * the same as feeding the whole utterance at once (a frame depends only on the samples it covers).
 * Samples left over at the end of an utterance (fewer than win_length after the last frame's start +
 * hop) make no frame, as in training (center false, no padding).
 *
 * Dither (frontend.dither > 0; 0 in every shipped model): Gaussian noise of that standard deviation
 * is added after pre-emphasis, drawn from a counter-based generator seeded per stream (the n-th sample
 * of a stream always gets the same noise for a given seed), so results are reproducible and chunking-
 * invariant; it is not PyTorch's random stream, so such features only match training in distribution.
 */
typedef struct rnnt_frontend rnnt_frontend;
typedef struct rnnt_frontend_stream rnnt_frontend_stream;

RNNT_API rnnt_status rnnt_frontend_create(const rnnt_model *m, rnnt_frontend **out, char *err, size_t errlen);
RNNT_API void rnnt_frontend_free(rnnt_frontend *fe);
RNNT_API int rnnt_frontend_dim(const rnnt_frontend *fe);          /* n_mels = the model's feature_dim */
RNNT_API int rnnt_frontend_sample_rate(const rnnt_frontend *fe);  /* the rate the samples must have */
RNNT_API int rnnt_frontend_fft_size(const rnnt_frontend *fe);     /* n_fft */
/* Frames a whole utterance of n samples gives: 0 when n < win_length, else 1 + (n - win_length) / hop. */
RNNT_API long long rnnt_frontend_frames(const rnnt_frontend *fe, long long n_samples);
/* The FFT library the engine was built with, e.g. "fftw-3.3.10-sse2-avx" or "kissfft". */
RNNT_API const char *rnnt_frontend_fft_name(void);

RNNT_API rnnt_status rnnt_frontend_stream_create(const rnnt_frontend *fe, uint64_t dither_seed, rnnt_frontend_stream **out,
                                                 char *err, size_t errlen);
RNNT_API void rnnt_frontend_stream_free(rnnt_frontend_stream *s);
/* Forget every sample fed so far: the next sample starts a new utterance. */
RNNT_API void rnnt_frontend_stream_reset(rnnt_frontend_stream *s);
/* Frames that feeding n more samples would complete (to size the output of the next feed). */
RNNT_API long long rnnt_frontend_stream_frames_after(const rnnt_frontend_stream *s, size_t n);
/* Feed n samples: float samples in [-1, 1] (16-bit PCM / 32768, as in training) or 16-bit PCM.
 * Writes the frames they complete to out ([frames, n_mels] row-major, at most max_frames rows) and
 * their count to *n_frames. Non-finite samples (RNNT_ERR_INVALID) or more frames than max_frames
 * (RNNT_ERR_TOO_LARGE) consume nothing and leave the stream as it was. */
RNNT_API rnnt_status rnnt_frontend_feed_f32(rnnt_frontend_stream *s, const float *x, size_t n, float *out, long long max_frames,
                                            int *n_frames, char *err, size_t errlen);
RNNT_API rnnt_status rnnt_frontend_feed_s16(rnnt_frontend_stream *s, const int16_t *x, size_t n, float *out, long long max_frames,
                                            int *n_frames, char *err, size_t errlen);
/* A whole utterance: *feats is malloc'd [*frames, n_mels] (NULL when there are no frames; free()).
 * Uses dither seed 0. Fails with RNNT_ERR_TOO_LARGE past max_frames frames (0 = no limit but INT_MAX). */
RNNT_API rnnt_status rnnt_frontend_compute_f32(const rnnt_frontend *fe, const float *x, size_t n, int max_frames, float **feats,
                                               int *frames, char *err, size_t errlen);
/* ---- Streams (issue 13): decoding while the input arrives ---------------------------------------
 *
 *   rnnt_stream  the state of one utterance being decoded as its input arrives: each encoder layer's
 *                state, the frame- and time-stacking remainders, the predictor state, the decoder's
 *                frame (a big-blank skip past the input so far carries over), the tokens so far.
 *                Created for one model, lives as long as the utterance.
 *
 *   rnnt_stream *s; rnnt_stream_create(m, &s, err, sizeof err);
 *   while (chunk arrives) {
 *       rnnt_stream_accept_features(s, feats, n_frames, feature_dim, 0, err, sizeof err);
 *       rnnt_runner_advance_streams(r, n, streams, NULL, err, sizeof err);  // many streams at once
 *       rnnt_stream_get_result(s, &partial, err, sizeof err);              // tokens and text so far
 *   }
 *   rnnt_stream_input_finished(s, ...); rnnt_runner_advance_streams(r, 1, &s, ...);
 *   rnnt_stream_get_result(s, &final, ...);  // rnnt_stream_is_final(s) == 1
 *   rnnt_stream_free(s);
 *
 * Chunk invariance: however the input is split into calls (one frame at a time, any sizes, any other
 * streams in the same advance), the final tokens and frames are those rnnt_runner_decode gives for the
 * whole utterance. A token is emitted only from encoder frames that exist: with frame or time
 * stacking, the last partial group waits for more input or for the end of input (then zero-padded, as
 * the whole utterance is).
 *
 * Thread safety: a stream is used by one thread at a time (feeding, advancing, reading its result
 * must not overlap: the caller serialises them); different streams are independent. Which runner
 * advances it: any CPU runner of the stream's model, one call after another (the CPU backend keeps
 * the state in host memory); or the first CUDA runner that advances it binds it to a slot of its
 * device memory, and from then on only that runner takes it. Any other runner answers
 * RNNT_ERR_INVALID, nothing changed (a CUDA runner, for a stream a CPU runner has encoded frames
 * of). The model must outlive its streams. Input is features or audio (through an rnnt_frontend
 * shared by any number of streams, which must outlive them), not both in one stream.
 *
 * rnnt_stream_free may run on any thread (not during the stream's own advance), also after its
 * runner is freed. Accepted cost: freeing the last stream bound to an already freed CUDA runner frees
 * that runner's slot pool there (cudaFree, which waits for the whole device); a daemon that frees
 * streams on a latency-bound thread frees its runners last. */
typedef struct rnnt_stream rnnt_stream;

RNNT_API rnnt_status rnnt_stream_create(const rnnt_model *m, rnnt_stream **out, char *err, size_t errlen);
RNNT_API void rnnt_stream_free(rnnt_stream *s);
/* Append frames x feature_dim floats (row-major, not normalised, as rnnt_input). feature_dim must be
 * the model's; every value must be finite (checked unless finite_checked); frames may be 0. Refused
 * (RNNT_ERR_INVALID, the stream unchanged) after rnnt_stream_input_finished; RNNT_ERR_TOO_LARGE when
 * more than an hour of input (360,000 frames) would wait unadvanced. */
RNNT_API rnnt_status rnnt_stream_accept_features(rnnt_stream *s, const float *features, int frames, int feature_dim,
                                                 int finite_checked, char *err, size_t errlen);
/* Append n samples of audio at the model's sample rate (floats in [-1, 1], or 16-bit PCM) through fe
 * (rnnt_frontend_create for the stream's model; every call of a stream passes the same one). The
 * stream keeps its own frontend state, so samples may come in any chunks, aligned to the hop or not:
 * the frames are those of rnnt_frontend_compute_f32 on the whole utterance (dither seed 0), and the
 * final result is the whole utterance's decode of them. Refused (stream unchanged) as features are,
 * and for non-finite samples, another frontend, or a stream that took features. */
RNNT_API rnnt_status rnnt_stream_accept_audio_f32(rnnt_stream *s, const rnnt_frontend *fe, const float *samples, size_t n,
                                                  char *err, size_t errlen);
RNNT_API rnnt_status rnnt_stream_accept_audio_s16(rnnt_stream *s, const rnnt_frontend *fe, const int16_t *samples, size_t n,
                                                  char *err, size_t errlen);
/* Input frames accepted so far (fed as features, or made from audio). */
RNNT_API long long rnnt_stream_frames_in(const rnnt_stream *s);
/* No more input: the next advance encodes the last partial groups and decodes to the end. */
RNNT_API rnnt_status rnnt_stream_input_finished(rnnt_stream *s, char *err, size_t errlen);
/* 1 when an advance would do work: a new stacked frame can be encoded, or the input is finished and
 * not yet all decoded. */
RNNT_API int rnnt_stream_ready(const rnnt_stream *s);
/* 1 when the input is finished and all of it decoded, or decoding stopped on a non-finite joint
 * output (status RNNT_ERR_NUMERIC; further features are refused with that status): the result from
 * rnnt_stream_get_result is final. */
RNNT_API int rnnt_stream_is_final(const rnnt_stream *s);
/* Input frames accepted but not yet encoded. */
RNNT_API int rnnt_stream_pending_frames(const rnnt_stream *s);

/* Advance n (1..max_batch) distinct streams of the runner's model by one chunk each, as one batch:
 * every stream's pending input (up to the runner's max_frames frames of it) is encoded, and every
 * encoder frame that exists is decoded. Streams with nothing to do may be passed (they cost nothing);
 * streams may have different amounts of input. A stream whose joint output turns non-finite stops
 * (final, status RNNT_ERR_NUMERIC in its result, no text); the others go on. timing may be NULL.
 * Errors: a refusal found before any work (RNNT_ERR_INVALID, _TOO_LARGE, _NOMEM: a bad argument, a
 * stream bound to another runner, no memory) leaves every stream as it was. A device error once the
 * CUDA backend has begun changing the streams' device state (a failed launch or copy, a decoding that
 * overran its step bound) stops every stream of the batch: each becomes final with status
 * RNNT_ERR_DEVICE in its result and no text (its tokens so far stay), and later advances leave it
 * alone; the caller ends those streams (the daemon closes each one of the failed batch). */
RNNT_API rnnt_status rnnt_runner_advance_streams(rnnt_runner *r, int n, rnnt_stream *const *streams, rnnt_timing *timing,
                                                 char *err, size_t errlen);

/* The result so far (tokens, frames, text, encoder_frames decoded so far, status), as a copy owned by
 * the caller (res: zeroed or cleared beforehand; release with rnnt_result_clear). A partial result
 * only grows: later chunks append tokens. Final once rnnt_stream_is_final(s). */
RNNT_API rnnt_status rnnt_stream_get_result(const rnnt_stream *s, rnnt_result *res, char *err, size_t errlen);

/* 1 when the engine was built with the CUDA backend and at least one device is usable. */
RNNT_API int rnnt_cuda_available(void);
/* CUDA devices visible to this process (0 without the CUDA backend or without a GPU). */
RNNT_API int rnnt_cuda_device_count(void);
/* Memory of CUDA device `device` as cudaMemGetInfo reports it (the whole device, every process's
 * allocations): bytes in use and in all. Makes `device` the calling thread's current device (call
 * it from a thread that works on that device, or one that does no other CUDA work). 0, or -1 without
 * the CUDA backend or on an error (which it clears). */
RNNT_API int rnnt_cuda_memory(int device, size_t *used, size_t *total);

#ifdef __cplusplus
}
#endif
#endif
