/* cu_stream.h — streams on the GPU (rnnt_backend_ops.advance of the CUDA backend): every stream's state
 * lives in a slot of a device pool between chunks (each encoder layer's h and c, each time-stacked
 * layer's remainder rows, the predictor's h and c and its joint projection, the decoder's frame offset
 * past the frames so far — a big-blank skip beyond them —, labels on that frame, pending label,
 * status), and one launch sequence advances a batch of chunks of different lengths from different
 * streams: gather the slots' states into batch rows, run the encoder kernels of the whole-utterance
 * path (the same chunked GEMMs and cell kernel, so a stream's arithmetic is an utterance's), the
 * joint's encoder projection, greedy multi-blank decoding over the new frames, and scatter the states
 * back. Only features go up and new tokens (with their frames and probabilities) come back.
 *
 * Chunk invariance: a row's result depends on its own inputs only (cu_gemm.h, cu_kernels.h), the
 * recurrence continues from the carried state, the time-stacking remainder waits in its slot and the
 * decoder continues from its frame, so the tokens and frames of any chunking equal the whole-utterance
 * decode of the same runner in fp32 (the fp16 recurrence of small runners (cu_persist.h) is not used
 * by streams, so fp16 streams agree with fp16 whole utterances under the batch agreement rules only).
 *
 * Slots: a stream gets a slot of the runner's pool on its first advance and keeps it until
 * rnnt_stream_free (which may run on any thread: the pool is reference-counted and its free list
 * locked); a stream bound to one runner's pool cannot be advanced by another runner. */
#ifndef RNNT_CU_STREAM_H
#define RNNT_CU_STREAM_H

#include "cu_weights.h"

struct rnnt_stream;

typedef struct cu_streams cu_streams;

typedef struct {
    int max_batch, max_frames; /* streams per advance, input frames per stream per advance */
    int r_in, r_rec;           /* the encoder's GEMM chunks (cu_encoder_chunks): the same arithmetic */
    int device;
} cu_streams_params;

/* ops: the backend's rnnt_backend_ops, recorded in each stream so that no other backend takes it. */
rnnt_status cu_streams_create(const struct rnnt_model *m, const cu_weights *w, cudaStream_t s, cublasHandle_t blas,
                              const cu_streams_params *p, const void *ops, cu_streams **out, char *err, size_t errlen);
/* Drops the runner's reference; the pool goes when the last stream holding a slot is freed too. */
void cu_streams_free(cu_streams *c);
rnnt_status cu_streams_advance(cu_streams *c, int n, struct rnnt_stream *const *st, rnnt_timing *timing, char *err,
                               size_t errlen);
/* Slots in use and allocated (for tests and metrics). */
void cu_streams_slots(cu_streams *c, int *used, int *cap);

#endif
