/* backend_cuda.cu — the CUDA backend behind engine/backend.h: weights uploaded once, the encoder of a
 * batch as a replayed CUDA graph, the joint's encoder projection, greedy multi-blank decoding on the
 * device, one transfer of results back.
 *
 * Thread safety: one thread at a time per state (the runner's rule); states on one device are
 * independent (each has its own stream, cuBLAS handle and buffers).
 *
 * Knobs for benchmarks and debugging (environment, read at create):
 *   RNNT_CUDA_GRAPHS=0       launch the encoder's kernels directly instead of replaying graphs
 *   RNNT_CUDA_PERSIST=0|1    the persistent recurrence kernel (cu_persist.h) off, or on for every fp16
 *                            runner of max_batch <= 64 (CU_PERSIST_MAX_B); default: on for fp16 runners
 *                            of max_batch <= 16 (CU_PERSIST_AUTO_MAX_B), where it measured faster
 *   RNNT_CUDA_LSTREAMS=0|1   the encoder layers as a wavefront over streams (cu_encoder.h lstreams) off, or on
 *                            wherever every layer is per-step; default: runners of max_batch >= 24 (fp16: chunks
 *                            of 16 steps, RNNT_CUDA_LSTREAM_CHUNK=rin for the per-step path's bits; fp32: those bits)
 *   RNNT_CUDA_MMA_STEP=1     per-step fp16 layers: each recurrent step one tensor-core kernel with the cell in
 *                            its epilogue (cu_mma_step.h) instead of a cuBLAS GEMM + the cell kernel (read
 *                            by cu_encoder_create; off by default)
 *   RNNT_CUDA_FUSED=1        one fused kernel per recurrent step (cu_lstm_step_fused) for runners of
 *                            max_batch <= 32, instead of a cuBLAS GEMM + the cell kernel
 *   RNNT_CUDA_DEC_STREAM=0   the decoder on the encoder's stream, after it (as before); default: on a stream of its
 *                            own, so a batch's decode loop overlaps the next batch's encoder layers (submit/collect)
 *   RNNT_CUDA_MAPPED=0       results through a device buffer and one copy instead of mapped host
 *                            memory (for tools that do not follow kernel writes to host memory)
 *   (default)                the cluster loop (a slot per cluster of 16 warps a block; 16 blocks up to 6 utterances,
 *                            8 blocks up to CU_DEC_AUTO_CLUSTER_MAX = 15), the WHILE graph for larger batches
 *                            (cu_decoder.h)
 *   RNNT_CUDA_DECODE=while   the WHILE graph at every batch size
 *   RNNT_CUDA_DECODE=host    host-polled decoding loop instead of the WHILE graph
 *   RNNT_CUDA_DECODE=profile host loop with events per phase: fills predictor_s / joint_s / decode_s
 *   RNNT_CUDA_DECODE=fused   the whole decoding loop in one kernel (cu_dec_fused.h); slots per block:
 *                            RNNT_CUDA_DEC_GROUP=1|2|4|8 (default 4)
 *   RNNT_CUDA_DECODE=cluster the whole decoding loop in one kernel per cluster of blocks, predictor
 *                            weights in shared memory (cu_dec_cluster, cu_dec_fused.h); blocks per
 *                            cluster: RNNT_CUDA_DEC_CLUSTER=8|16 (default 8); slots per cluster:
 *                            RNNT_CUDA_DEC_CLUSTER_G=g (default: the batch spread over the SMs; <= 16);
 *                            warps per block: RNNT_CUDA_DEC_CLUSTER_WARPS=8|16 (default 8)
 *   RNNT_CUDA_DEC_TRACE=1    lab: the cluster loop prints the phase clocks of its first cluster to stderr
 *   RNNT_CUDA_DEC_GRID_VST=0 lab: the grid loop's f4 staging element by element (before issue 16 §3 session 5)
 *   RNNT_CUDA_DEC_GRID_CNT=0|1 the grid loop with per-slot counters instead of the grid barriers after the last
 *                            predictor layer and the projection (one grid barrier a step for a one-layer predictor);
 *                            default: counters up to CU_DEC_GRID_CNT_AUTO_MAX utterances without slices, at every size
 *                            with them (CU_DEC_GRID_SL_CNT_AUTO_MAX, cu_decoder.h)
 *   RNNT_CUDA_DEC_GRID_OCC=1|2 the grid loop's kernel built for 1 or 2 blocks an SM (registers); default: 1 up to
 *                            CU_DEC_GRID_OCC1_AUTO_MAX utterances, 2 above; with slices 1 up to
 *                            CU_DEC_GRID_SL_OCC1_AUTO_MAX (cu_decoder.h)
 *   RNNT_CUDA_DEC_GRID_SLICES=n the grid loop as up to n independent slices of its blocks, each owning its utterances
 *                            and syncing only among itself (0: one loop with grid barriers; a large n: as many as
 *                            fit); default: as many as fit (CU_DEC_GRID_SLICES_AUTO_MIN, cu_decoder.h)
 *   RNNT_CUDA_DEC_GRID_PAIR=0|1 the grid loop's layer dot products two groups of 4 emitters a pass (32 sums a
 *                            lane); default: on with one block an SM (CU_DEC_GRID_PAIR_DEFAULT, cu_decoder.h)
 *   RNNT_CUDA_DEC_CLUSTER_CHAIN=1 lab: the cluster loop's dot products one load at a time (before the
 *                            batched loads); RNNT_CUDA_DEC_CLUSTER_FCACHE=1 lab: its f rows cached and prefetched
 *   RNNT_CUDA_DECODE_UNROLL=u decoding steps per iteration of the WHILE graph (1..8, default 4)
 *   RNNT_CUDA_PRED_ROWS=r     rows the predictor kernels take at once, at most (1, 2, 4, 8; default 4;
 *                            process-wide)
 *   RNNT_CUDA_STAGE_THREADS=n host threads that help stage a batch's features (cu_stage.h; default
 *                            min(3, CPUs / 4); 0 none)
 *   RNNT_CUDA_STAGE_CHUNK=b  bytes per staging chunk and transfer (default 2 MiB; helpers join from
 *                            two chunks on)
 *   RNNT_CUDA_FE_CHUNK=n     frames per cuFFT call of the GPU frontend (cu_frontend.h; default 8192) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cu_decoder.h"
#include "cu_encoder.h"
#include "cu_frontend.h"
#include "cu_gemm.h"
#include "cu_stream.h"

namespace {

double cu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const size_t kBlasWorkspace = 32u << 20;

/* A batch submitted and not yet collected (submit/collect): its size and encoder frames, its phase
 * events (encoder, joint projection, decoder), and the outcome of a launch that failed (its encoder's in
 * submit, or its decoder's inside the previous batch's collect). */
#define CU_PENDING_MAX 2
struct cu_pending {
    int n;
    int *t_enc; /* [max_batch] */
    double t_host;
    cudaEvent_t ev[4];
    rnnt_status failed;
    char err[256];
};

struct cu_backend {
    const struct rnnt_model *m;
    rnnt_runner_params p;
    char name[256];
    cudaStream_t s;
    /* ds: the decoder's stream (RNNT_CUDA_DEC_STREAM=0: none, the decoder on s as before). A batch's decoder
     * waits there for its joint projection (ev[2] on s) and reads dmeta, the decoder's copy of the encoder's
     * lengths made on s right after it; the next batch's encoder layers run on s meanwhile and only its joint
     * projection, which rewrites fproj, waits for the decoder before it (ev_dec). So a batch's decode loop
     * overlaps the next batch's encoder (two batches in flight, rnnt_runner_submit). */
    cudaStream_t ds;
    int *dmeta;
    size_t meta_bytes;
    cudaEvent_t ev_dec;
    int dec_recorded;
    void *blas_ws;
    cublasHandle_t blas;
    cu_weights w;
    int have_w;
    cu_encoder *enc;
    cu_decoder *dec;
    cudaEvent_t ev[4];
    cu_dec_mode mode;
    const float **feats;
    int *frames;
    int stage_helpers;
    cu_audio_fe *fe;  /* the GPU frontend, made on the first audio batch */
    cu_streams *streams; /* stream states and buffers (cu_stream.h), made on the first advance */
    int fe_unsupported; /* the model's frontend cannot run on the GPU: the runner uses the CPU's */
    cu_dec_profile prof; /* of the last launch */
    int early_enc; /* submit enqueues a batch's encoder behind the running batch at once (RNNT_CUDA_EARLY_ENCODER=0: off) */
    cu_pending pend[CU_PENDING_MAX];
    int pend_head, n_pend; /* the oldest pending batch (launched), and how many */
};

void destroy(void *state)
{
    cu_backend *b = (cu_backend *)state;
    if (!b) return;
    if (b->s) { /* only after create got as far as the device (it may not exist) */
        cudaSetDevice(b->p.device);
        cudaStreamSynchronize(b->s);
        if (b->ds) cudaStreamSynchronize(b->ds);
    }
    cu_audio_fe_free(b->fe);
    cu_streams_free(b->streams);
    cu_decoder_free(b->dec);
    cu_encoder_free(b->enc);
    if (b->have_w) cu_weights_free(&b->w);
    if (b->blas) cublasDestroy(b->blas);
    if (b->blas_ws) cudaFree(b->blas_ws);
    for (int i = 0; i < 4; i++)
        if (b->ev[i]) cudaEventDestroy(b->ev[i]);
    if (b->s) cudaStreamDestroy(b->s);
    if (b->ds) cudaStreamDestroy(b->ds);
    if (b->ev_dec) cudaEventDestroy(b->ev_dec);
    if (b->dmeta) cudaFree(b->dmeta);
    free(b->feats);
    free(b->frames);
    for (int i = 0; i < CU_PENDING_MAX; i++) {
        free(b->pend[i].t_enc);
        for (int k = 0; k < 4; k++)
            if (b->pend[i].ev[k]) cudaEventDestroy(b->pend[i].ev[k]);
    }
    free(b);
}

rnnt_status create_inner(cu_backend *b, const struct rnnt_model *m, const rnnt_runner_params *p, char *err,
                         size_t errlen)
{
    int count = 0;
    cudaError_t ce = cudaGetDeviceCount(&count);
    if (ce != cudaSuccess || count == 0) {
        cudaGetLastError();
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: no usable CUDA device (%s)",
                          ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
    }
    if (p->device < 0 || p->device >= count)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: device %d does not exist (%d found)", p->device,
                          count);
    CU_TRY(cudaSetDevice(p->device));
    cudaDeviceProp prop;
    CU_TRY(cudaGetDeviceProperties(&prop, p->device));
    snprintf(b->name, sizeof b->name, "%s", prop.name);
    if (prop.major < 8)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: %s (sm_%d%d) is older than this build supports",
                          prop.name, prop.major, prop.minor);
    if (m->joint_dim > 12288)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: joint dim %d above 12288", m->joint_dim);
    CU_TRY(cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++) CU_TRY(cudaEventCreate(&b->ev[i]));
    CU_TRY(cudaMalloc(&b->blas_ws, kBlasWorkspace));
    RNNT_TRY(cu_blas_create(b->s, b->blas_ws, kBlasWorkspace, &b->blas, err, errlen));
    RNNT_TRY(cu_weights_upload(m, p->precision == RNNT_PRECISION_FP32 ? CU_F32 : CU_F16, &b->w, err, errlen));
    b->have_w = 1;
    cu_encoder_params ep;
    memset(&ep, 0, sizeof ep);
    ep.max_batch = p->max_batch;
    ep.max_frames = p->max_frames;
    const char *g = getenv("RNNT_CUDA_GRAPHS");
    ep.graphs = !(g && strcmp(g, "0") == 0);
    const char *pe = getenv("RNNT_CUDA_PERSIST");
    ep.persist = !pe ? 0 : strcmp(pe, "1") == 0 ? 1 : strcmp(pe, "0") == 0 ? -1 : 0; /* 0: by max_batch */
    const char *fu = getenv("RNNT_CUDA_FUSED");
    ep.fused = fu && strcmp(fu, "1") == 0;
    const char *st = getenv("RNNT_CUDA_STAGE_THREADS");
    if (st && *st) ep.stage_helpers = atoi(st) > 0 ? atoi(st) : -1;
    b->stage_helpers = ep.stage_helpers;
    const char *sc = getenv("RNNT_CUDA_STAGE_CHUNK");
    if (sc && atol(sc) > 0) ep.stage_chunk = (size_t)atol(sc);
    const char *dsv = getenv("RNNT_CUDA_DEC_STREAM");
    int dec_stream = !(dsv && strcmp(dsv, "0") == 0);
    /* the next batch's raw upload must not wait for this batch's whole encoder once the decoder no longer
     * stands between two encoders on s (RNNT_CUDA_RAW_EARLY=0|1 still decides, cu_encoder.h) */
    ep.raw_early = dec_stream;
    const char *rr = getenv("RNNT_CUDA_R_REC"); /* lab: rows per recurrent GEMM call (cu_encoder_params.r_rec) */
    if (rr && atoi(rr) > 0) ep.r_rec = cu_round_up_i(atoi(rr), 16);
    RNNT_TRY(cu_encoder_create(&b->w, b->s, b->blas, &ep, &b->enc, err, errlen));
    if (dec_stream) {
        CU_TRY(cudaStreamCreateWithFlags(&b->ds, cudaStreamNonBlocking));
        CU_TRY(cudaEventCreateWithFlags(&b->ev_dec, cudaEventDisableTiming));
        b->meta_bytes = cu_encoder_meta_bytes(b->enc);
        CU_TRY(cudaMalloc(&b->dmeta, b->meta_bytes));
    }
    const char *mp = getenv("RNNT_CUDA_MAPPED");
    RNNT_TRY(cu_decoder_create(&b->w, b->ds ? b->ds : b->s, p->max_batch, cu_encoder_frames(&b->w, p->max_frames),
                               !(mp && strcmp(mp, "0") == 0), &b->dec, err, errlen));
    const char *pr = getenv("RNNT_CUDA_PRED_ROWS");
    cu_pred_set_rows_at_once(pr && atoi(pr) > 0 ? atoi(pr) : CU_PRED_ROWS_DEFAULT); /* each runner sets it */
    const char *du = getenv("RNNT_CUDA_DECODE_UNROLL");
    if (du && atoi(du) > 0) cu_decoder_set_unroll(b->dec, atoi(du));
    const char *dm = getenv("RNNT_CUDA_DECODE");
    b->mode = CU_DEC_AUTO;
    if (dm && strcmp(dm, "while") == 0) b->mode = CU_DEC_WHILE;
    if (dm && strcmp(dm, "host") == 0) b->mode = CU_DEC_HOST;
    if (dm && strcmp(dm, "profile") == 0) b->mode = CU_DEC_PROFILE;
    if (dm && strcmp(dm, "fused") == 0) b->mode = CU_DEC_FUSED;
    if (dm && strcmp(dm, "cluster") == 0) b->mode = CU_DEC_CLUSTER;
    if (dm && strcmp(dm, "grid") == 0) b->mode = CU_DEC_GRID;
    const char *dgb = getenv("RNNT_CUDA_DEC_GRID_BLOCKS"), *dgt = getenv("RNNT_CUDA_DEC_GRID_TILE"); /* grid loop (lab) */
    cu_decoder_set_grid(b->dec, dgb && atoi(dgb) > 0 ? atoi(dgb) : 0, dgt && *dgt ? atoi(dgt) : CU_DEC_GRID_TILE_DEFAULT);
    const char *dgv = getenv("RNNT_CUDA_DEC_GRID_VST"), *dgc = getenv("RNNT_CUDA_DEC_GRID_CNT"); /* grid loop (lab A/B) */
    const char *dgo = getenv("RNNT_CUDA_DEC_GRID_OCC");
    cu_decoder_set_grid_staging(b->dec, dgv && *dgv ? atoi(dgv) : CU_DEC_GRID_VST_DEFAULT, dgc && *dgc ? atoi(dgc) : -1,
                                dgo && *dgo ? atoi(dgo) : -1);
    const char *dgs = getenv("RNNT_CUDA_DEC_GRID_SLICES");
    cu_decoder_set_grid_slices(b->dec, dgs && *dgs ? atoi(dgs) : -1);
    const char *dgp = getenv("RNNT_CUDA_DEC_GRID_PAIR");
    cu_decoder_set_grid_pair(b->dec, dgp && *dgp ? atoi(dgp) : -1);
    const char *dc = getenv("RNNT_CUDA_DEC_CLUSTER"), *dcg = getenv("RNNT_CUDA_DEC_CLUSTER_G");
    const char *dcw = getenv("RNNT_CUDA_DEC_CLUSTER_WARPS");
    cu_decoder_set_cluster(b->dec, dc && atoi(dc) > 0 ? atoi(dc) : 8, dcw && atoi(dcw) > 0 ? atoi(dcw) : 8,
                           dcg && atoi(dcg) > 0 ? atoi(dcg) : 0);
    const char *dg = getenv("RNNT_CUDA_DEC_GROUP");
    if (dg && atoi(dg) > 0) cu_decoder_set_group(b->dec, atoi(dg));
    b->feats = (const float **)calloc((size_t)p->max_batch, sizeof(float *));
    b->frames = (int *)calloc((size_t)p->max_batch, sizeof(int));
    for (int i = 0; i < CU_PENDING_MAX; i++) b->pend[i].t_enc = (int *)calloc((size_t)p->max_batch, sizeof(int));
    if (!b->feats || !b->frames || !b->pend[0].t_enc || !b->pend[1].t_enc)
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    for (int i = 0; i < CU_PENDING_MAX; i++)
        for (int k = 0; k < 4; k++) CU_TRY(cudaEventCreate(&b->pend[i].ev[k]));
    const char *ee = getenv("RNNT_CUDA_EARLY_ENCODER");
    b->early_enc = !(ee && strcmp(ee, "0") == 0);
    CU_TRY(cudaStreamSynchronize(b->s));
    if (b->ds) CU_TRY(cudaStreamSynchronize(b->ds));
    return RNNT_OK;
}

rnnt_status create(const struct rnnt_model *m, const rnnt_runner_params *p, void **state, char *err, size_t errlen)
{
    *state = NULL;
    if (!m || !p || p->max_batch < 1 || p->max_frames < 1)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: bad runner parameters");
    cu_backend *b = (cu_backend *)calloc(1, sizeof *b);
    if (!b) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    b->m = m;
    b->p = *p;
    rnnt_status st = create_inner(b, m, p, err, errlen);
    if (st != RNNT_OK) {
        destroy(b);
        cudaGetLastError(); /* a failed allocation leaves its error for the next launch check: clear it */
        return st;
    }
    *state = b;
    return RNNT_OK;
}

const char *device_name(void *state) { return ((cu_backend *)state)->name; }

/* The staged batch (features on their way or being computed on the stream): encoder and joint projection
 * enqueued on the stream (launch_encoder), then decoding (launch_decoder), with events ev[0..3] between the
 * phases. The decoder writes its results into the one pinned buffer, so a batch's decoder may be enqueued
 * only once the batch before it has been unpacked; its encoder may run before that (submit/collect). */
rnnt_status launch_encoder(cu_backend *b, cudaEvent_t *ev, char *err, size_t errlen)
{
    CU_TRY(cudaEventRecord(ev[0], b->s));
    RNNT_TRY(cu_encoder_run(b->enc, err, errlen));
    CU_TRY(cudaEventRecord(ev[1], b->s));
    /* fproj and dmeta are the decoder's input until it ends: the last decoder enqueued must be done first */
    if (b->ds && b->dec_recorded) CU_TRY(cudaStreamWaitEvent(b->s, b->ev_dec, 0));
    RNNT_TRY(cu_encoder_joint_proj(b->enc, err, errlen));
    if (b->ds) /* the lengths the decoder reads, before the next batch's upload rewrites the encoder's */
        CU_TRY(cudaMemcpyAsync(b->dmeta, cu_encoder_meta_dev(b->enc), b->meta_bytes, cudaMemcpyDeviceToDevice, b->s));
    CU_TRY(cudaEventRecord(ev[2], b->s));
    return RNNT_OK;
}

rnnt_status launch_decoder(cu_backend *b, cudaEvent_t *ev, char *err, size_t errlen)
{
    const cu_encoder_batch *bt = cu_encoder_get_batch(b->enc);
    memset(&b->prof, 0, sizeof b->prof);
    const int *t_enc = bt->t_enc_dev, *bucket = bt->t_enc_bucket_dev;
    cudaStream_t s = b->s;
    if (b->ds) { /* the same offsets into the decoder's copy of the lengths */
        const int *m = cu_encoder_meta_dev(b->enc);
        t_enc = b->dmeta + (t_enc - m);
        bucket = b->dmeta + (bucket - m);
        s = b->ds;
        CU_TRY(cudaStreamWaitEvent(s, ev[2], 0));
    }
    rnnt_status st = cu_decoder_run(b->dec, b->mode, bt->nb, bt->n, t_enc, bucket, bt->fproj, &b->prof, err, errlen);
    if (b->ds) { /* after a failed launch too: what it did enqueue may still read fproj */
        cudaError_t ce = cudaEventRecord(b->ev_dec, s);
        if (ce == cudaSuccess) b->dec_recorded = 1;
        else if (st == RNNT_OK) st = cu_set_err(err, errlen, cu_status_of(ce), "cuda: %s", cudaGetErrorString(ce));
    }
    RNNT_TRY(st);
    CU_TRY(cudaEventRecord(ev[3], s));
    return RNNT_OK;
}

rnnt_status launch(cu_backend *b, cudaEvent_t *ev, char *err, size_t errlen)
{
    RNNT_TRY(launch_encoder(b, ev, err, errlen));
    return launch_decoder(b, ev, err, errlen);
}

/* Waits for the launched batch of n utterances (t_enc[i] encoder frames each; its events ev) and unpacks
 * it: only its own decoder's end is waited for (the next batch's encoder may be running behind it). */
rnnt_status finish(cu_backend *b, cudaEvent_t *ev, int n, const int *t_enc, rnnt_result *out, rnnt_timing *timing,
                   double t_host, double *frontend_s, char *err, size_t errlen)
{
    CU_TRY(cudaEventSynchronize(ev[3]));
    for (int i = 0; i < n; i++) {
        cu_dec_result r = cu_decoder_result(b->dec, i);
        if (r.status == 2)
            return cu_set_err(err, errlen, RNNT_ERR_DEVICE, "cuda: decoding of utterance %d overran its step bound", i);
        rnnt_result *o = &out[i];
        o->encoder_frames = t_enc[i];
        o->frames_skipped = r.skipped;
        o->decode_steps = r.steps;
        /* as the CPU backend: a numeric failure keeps the tokens emitted before it (the runner gives it
         * no text) */
        o->status = r.status == 1 ? RNNT_ERR_NUMERIC : RNNT_OK;
        o->n_tokens = r.n_tok;
        if (r.n_tok > 0) {
            memcpy(o->tokens, r.tokens, (size_t)r.n_tok * sizeof(int));
            memcpy(o->frames, r.frames, (size_t)r.n_tok * sizeof(int));
            if (o->probs) memcpy(o->probs, r.probs, (size_t)r.n_tok * sizeof(float));
        }
    }
    if (timing) {
        float e_ms = 0, j_ms = 0, d_ms = 0;
        CU_TRY(cudaEventElapsedTime(&e_ms, ev[0], ev[1]));
        CU_TRY(cudaEventElapsedTime(&j_ms, ev[1], ev[2]));
        CU_TRY(cudaEventElapsedTime(&d_ms, ev[2], ev[3]));
        timing->encoder_s = e_ms / 1e3;
        if (b->mode == CU_DEC_PROFILE) {
            timing->joint_s = (j_ms + b->prof.joint_ms) / 1e3;
            timing->predictor_s = b->prof.pred_ms / 1e3;
            timing->decode_s = b->prof.update_ms / 1e3;
        } else {
            /* The fused loop has no seams to time: its whole time is decode_s. */
            timing->joint_s = j_ms / 1e3;
            timing->predictor_s = 0;
            timing->decode_s = d_ms / 1e3;
        }
        /* host wall time from the call (submit) to now: staging, launches, waiting, unpacking */
        timing->total_s = cu_now_s() - t_host;
    }
    if (frontend_s) {
        float f_ms = 0;
        RNNT_TRY(cu_audio_fe_last_ms(b->fe, &f_ms, err, errlen));
        *frontend_s = f_ms / 1e3;
    }
    return RNNT_OK;
}

rnnt_status decode_staged(cu_backend *b, int n, rnnt_result *out, rnnt_timing *timing, double t_host, double *frontend_s,
                          char *err, size_t errlen)
{
    RNNT_TRY(launch(b, b->ev, err, errlen));
    return finish(b, b->ev, n, cu_encoder_get_batch(b->enc)->t_enc_host, out, timing, t_host, frontend_s, err, errlen);
}

rnnt_status decode(void *state, int n, const rnnt_input *in, rnnt_result *out, rnnt_timing *timing, char *err,
                   size_t errlen)
{
    cu_backend *b = (cu_backend *)state;
    double t_host = cu_now_s();
    CU_TRY(cudaSetDevice(b->p.device));
    cudaGetLastError(); /* clear an error left by someone else's failed call; a sticky one comes back */
    if (n < 1 || n > b->p.max_batch)
        return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: batch of %d, runner holds %d", n, b->p.max_batch);
    for (int i = 0; i < n; i++) {
        b->feats[i] = in[i].features;
        b->frames[i] = in[i].frames;
    }
    RNNT_TRY(cu_encoder_stage(b->enc, n, b->feats, b->frames, err, errlen));
    return decode_staged(b, n, out, timing, t_host, NULL, err, errlen);
}

/* Asynchronous batches (backend.h submit/collect). A batch is staged at once: the host copy into the
 * encoder's pinned buffer (the caller's inputs are not read after that), its raw transfer queued
 * behind the running batch's encoder and its lengths behind the running batch. Its kernels are
 * enqueued at once when no batch runs, else by the collect of the running one, which must read the
 * decoder's results before the next batch's decoder overwrites them. */
rnnt_status submit(void *state, int n, const rnnt_input *in, char *err, size_t errlen)
{
    cu_backend *b = (cu_backend *)state;
    double t_host = cu_now_s();
    CU_TRY(cudaSetDevice(b->p.device));
    cudaGetLastError();
    if (n < 1 || n > b->p.max_batch)
        return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: batch of %d, runner holds %d", n, b->p.max_batch);
    if (b->n_pend == CU_PENDING_MAX)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: %d batches pending already", CU_PENDING_MAX);
    for (int i = 0; i < n; i++) {
        b->feats[i] = in[i].features;
        b->frames[i] = in[i].frames;
    }
    RNNT_TRY(cu_encoder_stage(b->enc, n, b->feats, b->frames, err, errlen));
    cu_pending *q = &b->pend[(b->pend_head + b->n_pend) % CU_PENDING_MAX];
    q->n = n;
    q->t_host = t_host;
    q->failed = RNNT_OK;
    memcpy(q->t_enc, cu_encoder_get_batch(b->enc)->t_enc_host, (size_t)n * sizeof(int));
    if (b->n_pend == 0) RNNT_TRY(launch(b, q->ev, err, errlen)); /* on a failure nothing is pending */
    /* a batch is running: this one's encoder goes behind it on the stream now (its decoder waits for the
     * running batch's collect), so the GPU does not idle while that collect unpacks; a failed launch is
     * this batch's collect's answer */
    else if (b->early_enc) q->failed = launch_encoder(b, q->ev, q->err, sizeof q->err);
    b->n_pend++;
    return RNNT_OK;
}

rnnt_status collect(void *state, rnnt_result *out, rnnt_timing *timing, char *err, size_t errlen)
{
    cu_backend *b = (cu_backend *)state;
    if (b->n_pend == 0) return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: no batch pending");
    cu_pending *q = &b->pend[b->pend_head];
    rnnt_status st = q->failed;
    cudaError_t ce = cudaSetDevice(b->p.device);
    if (st != RNNT_OK) snprintf(err, errlen, "%s", q->err); /* its launch failed in the collect before */
    else if (ce != cudaSuccess) st = cu_set_err(err, errlen, cu_status_of(ce), "cuda: %s", cudaGetErrorString(ce));
    else st = finish(b, q->ev, q->n, q->t_enc, out, timing, q->t_host, NULL, err, errlen);
    /* the batch is collected whatever the outcome */
    b->pend_head = (b->pend_head + 1) % CU_PENDING_MAX;
    b->n_pend--;
    if (b->n_pend > 0) { /* the staged batch's decoder (and encoder, unless submit enqueued it) starts now; a
                            failed launch is its collect's answer */
        cu_pending *nx = &b->pend[b->pend_head];
        if (nx->failed == RNNT_OK)
            nx->failed = b->early_enc ? launch_decoder(b, nx->ev, nx->err, sizeof nx->err) : launch(b, nx->ev, nx->err, sizeof nx->err);
    }
    return st;
}

rnnt_status decode_audio(void *state, int n, const rnnt_audio_input *in, rnnt_result *out, rnnt_timing *timing,
                         double *frontend_s, char *err, size_t errlen)
{
    cu_backend *b = (cu_backend *)state;
    double t_host = cu_now_s();
    if (b->fe_unsupported)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: this model's frontend does not run on the GPU");
    CU_TRY(cudaSetDevice(b->p.device));
    cudaGetLastError();
    if (n < 1 || n > b->p.max_batch)
        return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: batch of %d, runner holds %d", n, b->p.max_batch);
    if (!b->fe) {
        rnnt_frontend *cpu_fe;
        RNNT_TRY(rnnt_frontend_create(b->m, &cpu_fe, err, errlen));
        rnnt_status st = cu_audio_fe_create(cpu_fe, b->s, b->stage_helpers, &b->fe, err, errlen);
        rnnt_frontend_free(cpu_fe);
        if (st == RNNT_ERR_UNSUPPORTED) b->fe_unsupported = 1;
        RNNT_TRY(st);
    }
    const rnnt_frontend_cfg *c = &b->m->fe;
    for (int i = 0; i < n; i++) {
        size_t ns = in[i].n_samples;
        b->frames[i] = ns < (size_t)c->win_length ? 0 : (int)(1 + (ns - (size_t)c->win_length) / (size_t)c->hop_length);
    }
    RNNT_TRY(cu_encoder_stage(b->enc, n, NULL, b->frames, err, errlen));
    RNNT_TRY(cu_audio_fe_run(b->fe, n, in, b->frames, cu_encoder_raw_dev(b->enc), err, errlen));
    return decode_staged(b, n, out, timing, t_host, frontend_s, err, errlen);
}

/* Streams (cu_stream.h): the pool and buffers for max_batch streams of max_frames frames a chunk,
 * with the encoder's GEMM chunks, so a stream's arithmetic is a whole utterance's on this runner. */
rnnt_status advance(void *state, int n, struct rnnt_stream *const *st, rnnt_timing *timing, char *err, size_t errlen)
{
    cu_backend *b = (cu_backend *)state;
    CU_TRY(cudaSetDevice(b->p.device));
    if (!b->streams) {
        cu_streams_params sp;
        memset(&sp, 0, sizeof sp);
        sp.max_batch = b->p.max_batch;
        sp.max_frames = b->p.max_frames;
        sp.device = b->p.device;
        cu_encoder_chunks(b->enc, &sp.r_in, &sp.r_rec);
        RNNT_TRY(cu_streams_create(b->m, &b->w, b->s, b->blas, &sp, &rnnt_backend_cuda, &b->streams, err, errlen));
    }
    return cu_streams_advance(b->streams, n, st, timing, err, errlen);
}

} // namespace

extern "C" {

extern const rnnt_backend_ops rnnt_backend_cuda;
const rnnt_backend_ops rnnt_backend_cuda = {"cuda", create, destroy, device_name, decode, advance, decode_audio,
                                            submit, collect};

int rnnt_backend_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

int rnnt_backend_cuda_memory(int device, size_t *used, size_t *total)
{
    size_t fr = 0, tot = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    if (used) *used = tot - fr;
    if (total) *total = tot;
    return 0;
}

} // extern "C"
