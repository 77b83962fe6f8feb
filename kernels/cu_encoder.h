/* cu_encoder.h — the encoder of a batch on the GPU: frontend, every LSTM layer (input projection of all
 * time steps as one GEMM, then per step one recurrent GEMM and one fused cell kernel), and the joint's
 * encoder projection. One thread at a time per encoder.
 *
 * Layout: batch-major, [slot][time][features], so frame stacking and time stacking are views (a
 * [T][H] block of rows is a [T/s][sH] block). A batch is padded to a bucket: nb slots (n rounded up to
 * 8) and tb input frames (the longest utterance rounded up to a multiple of the model's total
 * subsampling times a quantum), so every layer's length divides exactly and few distinct shapes occur.
 * The work of a bucket is captured once as a CUDA graph and replayed (LRU cache of graphs).
 *
 * Memory: every buffer is sized at create for max_batch utterances of max_frames frames. */
#ifndef RNNT_CU_ENCODER_H
#define RNNT_CU_ENCODER_H

#include "cu_weights.h"

/* Runners of at least this many slots (above CU_PERSIST_AUTO_MAX_B) run their per-step layers as a wavefront
 * over streams by default, in chunks of CU_LSTREAM_CHUNK_DEFAULT steps of the last layer. */
#define CU_LSTREAMS_AUTO_MIN_B 24
#define CU_LSTREAM_CHUNK_DEFAULT 16
/* fp16 runners of at least this many utterances run their recurrent GEMMs in calls of 512 rows (not 256), on 66 SMs
 * under layer streams (not 33). */
#define CU_LARGE_RUNNER_MIN_B 512
/* fp16 runners of at least this many: recurrent GEMMs in calls of 1024 rows (every call has that shape, so a batch of
 * fewer utterances still pays for 1024 rows: tests/gpu/results/h100-2026-11-25-s1-mlperf/) */
#define CU_XLARGE_RUNNER_MIN_B 1024

typedef struct {
    int max_batch, max_frames;
    int r_in;        /* rows per chunk of the all-steps GEMMs (0: 4096 when max_batch >= 64, else 1024) */
    int r_rec;       /* rows per chunk of the recurrent GEMM (0: max_batch rounded to 16, at most 256; 512 for fp16
                        runners of CU_LARGE_RUNNER_MIN_B and more, 1024 from CU_XLARGE_RUNNER_MIN_B) */
    int graphs;      /* 1: capture buckets as CUDA graphs (default); 0: launch directly */
    int graph_cache; /* graphs kept (0: 16) */
    int t_quantum;   /* bucket granularity in input frames, rounded to the subsampling (0: ~32) */
    int persist;     /* fp16 layers whose recurrence fits run it as one persistent kernel (cu_persist.h):
                        0 (default) when max_batch <= CU_PERSIST_AUTO_MAX_B and fused is off; 1 whenever
                        max_batch <= CU_PERSIST_MAX_B; -1 never (per-step GEMMs). Fixed per encoder, so
                        every batch of a runner takes the same path. */
    int wave;        /* 1: pairs of consecutive persistent layers run as one layer wavefront (cu_wave.h);
                        2: every layer as one wavefront with W_hh on chip where it fits (cu_lstm_wave_chip;
                        RNNT_CUDA_WAVE_CHIP=1 turns a 1 into a 2); -1 never; 0 (default): as the environment's
                        RNNT_CUDA_WAVE=0 / 1 / 2 says, else 2 for fp16 runners of max_batch <=
                        CU_WAVE_CHIP_AUTO_MAX_B (3) where it fits, off otherwise. */
    int mma_step;    /* fp16 layers on the per-step path (hp <= CU_MMA_MAX_HP): 1 each step t >= 1 is one
                        tensor-core kernel with the cell in its epilogue (cu_mma_step.h) instead of a cuBLAS
                        GEMM + the cell kernel; -1 never; 0 (default): as the environment's
                        RNNT_CUDA_MMA_STEP=1 says, else off (slower at H = 1024 on the H100). Per encoder. */
    int lstreams;    /* 1: when every layer takes the plain per-step path (no persistent kernel, fused or mma
                        steps, projection or LayerNorm), the layers run as a wavefront over streams: layer l
                        on its own stream (and its input projection on another, chunk by chunk of time, as
                        soon as layer l - 1 has written the chunk), so the recurrences of all layers overlap.
                        The per-step path's kernels; its GEMM shapes and bits in fp32 and with
                        RNNT_CUDA_LSTREAM_CHUNK=rin (fp16 by default: chunks of 16 steps and recurrent GEMMs
                        chosen for part of the SMs: other bits, fixed per runner). -1 never; 0 (default): as
                        RNNT_CUDA_LSTREAMS=1 / 0 says, else for runners of max_batch >= CU_LSTREAMS_AUTO_MIN_B
                        (not fused). Per encoder. */
    int fused;       /* 1: when max_batch <= 32, each recurrent step is one fused kernel
                        (cu_lstm_step_fused) instead of a cuBLAS GEMM + the cell kernel. Per encoder. */
    int stage_helpers; /* host threads that help the caller stage a batch (cu_stage.h): 0 the default
                          (min(3, CPUs / 4)), -1 none, n > 0 that many */
    size_t stage_chunk; /* bytes per staging chunk and transfer (0: CU_STAGE_CHUNK_DEFAULT) */
    int raw_early;   /* 1: the frontend kernel, the one reader of the device input, runs before the layers' graph and
                        the next batch's upload waits only for it (so it overlaps this batch's layers); 0: the frontend
                        in the graph, the upload after the whole encoder. RNNT_CUDA_RAW_EARLY=0|1 overrides. */
} cu_encoder_params;

typedef struct cu_encoder cu_encoder;

rnnt_status cu_encoder_create(const cu_weights *w, cudaStream_t stream, cublasHandle_t blas,
                              const cu_encoder_params *p, cu_encoder **out, char *err, size_t errlen);
void cu_encoder_free(cu_encoder *e);

/* Stage n utterances (feats[i]: frames[i] x F floats) into pinned memory and choose the bucket; the
 * transfers to the device start on the encoder's own copy stream while the host copy goes on (after
 * the work already enqueued on the encoder's stream, which may still read the device input). Then
 * cu_encoder_run makes the stream wait for the transfers and enqueues the encoder,
 * cu_encoder_joint_proj the joint projection. */
rnnt_status cu_encoder_stage(cu_encoder *e, int n, const float *const *feats, const int *frames, char *err,
                             size_t errlen);
/* feats == NULL above: only the batch's shape is staged; the caller writes the features itself, on the
 * encoder's stream before cu_encoder_run, as packed rows (utterance i from row frames[0] + ... +
 * frames[i - 1]) of F floats into this device buffer (the GPU frontend, cu_frontend.h). */
float *cu_encoder_raw_dev(const cu_encoder *e);
/* The device copy of the staged batch's lengths (t_enc_dev and t_enc_bucket_dev point into it) and its size: a
 * decoder that must outlive the next stage reads a copy of it (backend_cuda.cu). */
const int *cu_encoder_meta_dev(const cu_encoder *e);
size_t cu_encoder_meta_bytes(const cu_encoder *e);
rnnt_status cu_encoder_run(cu_encoder *e, char *err, size_t errlen);
/* The two halves of cu_encoder_run: the stream's wait for the staged batch's transfers, and the
 * encoder over the uploaded batch (a graph replay; benchmarks time this part alone). */
rnnt_status cu_encoder_upload(cu_encoder *e, char *err, size_t errlen);
rnnt_status cu_encoder_compute(cu_encoder *e, char *err, size_t errlen);
rnnt_status cu_encoder_joint_proj(cu_encoder *e, char *err, size_t errlen);

/* The staged batch's shape and device views (valid until the next stage). */
typedef struct {
    int n, nb, tb;        /* utterances, slots, input frames per slot */
    int t_enc;            /* encoder frames per slot of the bucket (fproj rows per slot) */
    const int *t_enc_dev; /* [nb] encoder frames of each slot (0 for padding slots) */
    const int *t_enc_bucket_dev; /* -> t_enc */
    const int *t_enc_host; /* [n] */
    const void *out;      /* last layer output [nb][t_enc][hep] in dt */
    const float *fproj;   /* joint encoder projection [nb][t_enc][jp] fp32, no bias */
    int graphs_on;        /* whether the last run replayed a graph */
    const char *graph_note; /* why graphs are off, when they are */
} cu_encoder_batch;
const cu_encoder_batch *cu_encoder_get_batch(const cu_encoder *e);
size_t cu_encoder_device_bytes(const cu_encoder *e);
/* Number of layers whose recurrence runs as a persistent kernel; whether steps use the fused kernel. */
int cu_encoder_persistent_layers(const cu_encoder *e);
/* Number of layer pairs that run as one layer wavefront (cu_wave.h). */
int cu_encoder_wave_pairs(const cu_encoder *e); /* 1 when every layer runs as one on-chip wavefront */
int cu_encoder_wave_chip(const cu_encoder *e);
int cu_encoder_fused_steps(const cu_encoder *e);
/* Whether the per-step layers run as a wavefront over streams (lstreams), and its steps per chunk of the
 * last layer (0 when off). */
int cu_encoder_lstream_chunk(const cu_encoder *e);
/* The SM count its recurrent GEMMs were chosen for (RNNT_CUDA_LSTREAM_SMS; 0: cuBLAS's default). */
int cu_encoder_lstream_sms(const cu_encoder *e);
/* Whether they run the per-step path's GEMM shapes and kernels (so its bits). */
int cu_encoder_lstream_same_bits(const cu_encoder *e);
/* Whether the per-step layers run cu_lstm_mma_step (cu_mma_step.h). */
int cu_encoder_mma_steps(const cu_encoder *e);
/* Staging threads beside the caller, and bytes per staging chunk. */
int cu_encoder_stage_helpers(const cu_encoder *e);
size_t cu_encoder_stage_chunk(const cu_encoder *e);
/* Layer outputs of the last run (dev pointer to [nb][T_l][hp_l] of layer l), for the stage tests; only
 * the last two layers' outputs survive (ping-pong buffers), under layer streams only the last layer's (the
 * others pass through chunk rings). */
const void *cu_encoder_layer_out(const cu_encoder *e, int l);

/* Rows per chunk of the all-steps GEMMs and of the recurrent GEMM (streams use the same, cu_stream.h). */
void cu_encoder_chunks(const cu_encoder *e, int *r_in, int *r_rec);

/* Encoder frames for an utterance of `frames` input frames. */
int cu_encoder_frames(const cu_weights *w, int frames);

#endif
