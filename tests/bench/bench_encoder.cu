/* bench_encoder.cu — our LSTM encoder (hard and soft activations) against cuDNN's cudnnRNNForward on the
 * same weights and inputs, in one process: CUDA events, warm-up, median of repeats.
 *
 *   bench_encoder [--quick] [--fast] [--wave] [--reps N] [--batches B1,B2,..]   (--batches: the 5 x 1024 shape at those
 *   B only; --wave: --fast keeps the wavefront run, e.g. RNNT_CUDA_WAVE_CHIP=1 bench_encoder --fast --wave --batches 2,3)
 *
 * Shapes (issue 5): 5 layers x 1024 hidden, input 240, 300 steps, batch 1/8/32/64/128/256, fp16; the
 * seed's 4 x 512, input 512, 100 steps, batch 64, fp32 and fp16. For each: ms, TFLOP/s (2*4H*(I+H)*T*B
 * per layer), % of the fp16 GEMM peak measured here (cuBLAS, 8192^3), the ratio to the best cuDNN
 * algorithm, device memory per batch item (our encoder's buffers vs cuDNN's workspace + x + y), and
 * the largest difference between our soft encoder and cuDNN's output (same function, so a check).
 * Our time is the replay of the encoder graph (frontend cast + every layer); the input upload is
 * excluded on both sides. cuDNN's fp32 runs without TF32 (as ours) and, separately, with it. A second table
 * times the per-step layers on the GEMM + cell kernel (cu_mma_step.h) with each tile and without
 * programmatic dependent launch. */
#include <cudnn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cu_encoder.h"
#include "cu_gemm.h"

#include "lab_util.h"

static int g_reps = 20;
static int g_fast = 0; /* --fast: only the default soft, persistent, per-step graph and layer-stream runs */
static int g_wave = 0; /* --wave: with --fast, the wavefront run too (the on-chip kernel where RNNT_CUDA_WAVE_CHIP=1) */

static uint64_t rng = 0x1234567ull;
static float frand(void) /* uniform [-1, 1) */
{
    return lab_frand(&rng);
}

/* Pseudo-random fill on the device (timing on zeros can flatter a kernel). */
__global__ void k_fill(void *p, size_t n, int f16, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned z = (unsigned)i * 2654435761u + seed;
        z ^= z >> 15;
        z *= 2246822519u;
        z ^= z >> 13;
        float v = (float)(z & 0xffff) / 32768.0f - 1.0f;
        if (f16) ((__half *)p)[i] = __float2half_rn(v);
        else ((float *)p)[i] = v;
    }
}

/* ---------------------------------------------------------------- a model in memory */

struct host_model {
    struct rnnt_model m;
    std::vector<rnnt_lstm_layer> enc, pred;
    std::vector<std::vector<float>> store;
    const float *add(size_t n, float bound)
    {
        store.emplace_back(n);
        for (auto &v : store.back()) v = bound * frand();
        return store.back().data();
    }
};

static void make_layer(host_model *hm, rnnt_lstm_layer *L, int I, int H)
{
    float b = 1.0f / sqrtf((float)H);
    L->input = I;
    L->hidden = H;
    L->time_stack = 1;
    L->w_ih = hm->add((size_t)4 * H * I, b);
    L->w_hh = hm->add((size_t)4 * H * H, b);
    L->b_ih = hm->add((size_t)4 * H, b);
    L->b_hh = hm->add((size_t)4 * H, b);
    hm->store.emplace_back((size_t)4 * H);
    for (int i = 0; i < 4 * H; i++) hm->store.back()[i] = L->b_ih[i] + L->b_hh[i];
    L->bias = hm->store.back().data();
}

/* An encoder of `layers` x H over inputs of width I (no stacking, no normalisation) with a minimal
 * predictor and joint, which the weight upload needs. */
static void make_model(host_model *hm, int layers, int I, int H)
{
    memset(&hm->m, 0, sizeof hm->m);
    hm->store.reserve(64);
    hm->enc.resize(layers);
    for (int l = 0; l < layers; l++) make_layer(hm, &hm->enc[l], l ? H : I, H);
    hm->pred.resize(1);
    make_layer(hm, &hm->pred[0], 8, 8);
    struct rnnt_model *m = &hm->m;
    m->feature_dim = I;
    m->stacking = 1;
    m->act = RNNT_ACT_HARD;
    m->n_enc = layers;
    m->enc = hm->enc.data();
    m->embed_dim = 8;
    m->vocab = 4;
    m->embedding = hm->add((size_t)5 * 8, 1.0f);
    m->n_pred = 1;
    m->pred = hm->pred.data();
    m->joint_dim = 8;
    m->joint_act = RNNT_JOINT_RELU;
    m->joint_enc_w = hm->add((size_t)8 * H, 0.1f);
    m->joint_enc_b = hm->add(8, 0.1f);
    m->joint_pred_w = hm->add((size_t)8 * 8, 0.1f);
    m->joint_pred_b = hm->add(8, 0.1f);
    m->n_out = 5;
    m->blank = 4;
    m->joint_out_w = hm->add((size_t)5 * 8, 0.1f);
    m->joint_out_b = hm->add(5, 0.1f);
    m->max_symbols = 3;
}

/* ---------------------------------------------------------------- timing */

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <typename F> static float time_ms(cudaStream_t s, F &&f, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) f(); /* warm-up: graph instantiation, cuBLAS heuristics, caches */
    CK(cudaStreamSynchronize(s));
    std::vector<float> t;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a, s));
        f();
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return median(t);
}

static double gemm_peak(cudaStream_t s, cublasHandle_t h, int f16)
{
    int n = f16 ? 8192 : 4096;
    void *A, *B, *C;
    size_t es = f16 ? 2 : 4;
    CK(cudaMalloc(&A, (size_t)n * n * es));
    CK(cudaMalloc(&B, (size_t)n * n * es));
    CK(cudaMalloc(&C, (size_t)n * n * es));
    /* random data (zeros can run faster than real data) */
    std::vector<float> hv((size_t)n * n);
    for (auto &v : hv) v = frand();
    if (f16) {
        std::vector<__half> hh(hv.size());
        for (size_t i = 0; i < hv.size(); i++) hh[i] = __float2half_rn(hv[i]);
        CK(cudaMemcpy(A, hh.data(), hh.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hh.data(), hh.size() * 2, cudaMemcpyHostToDevice));
    } else {
        CK(cudaMemcpy(A, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hv.data(), hv.size() * 4, cudaMemcpyHostToDevice));
    }
    cu_dtype dt = f16 ? CU_F16 : CU_F32;
    float ms = time_ms(s, [&] { RK(cu_gemm_rows(h, dt, n, n, n, A, n, B, n, C, 0, n, n, err, errlen)); }, 10);
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(C));
    return 2.0 * n * (double)n * n / (ms * 1e-3) / 1e12;
}

/* ---------------------------------------------------------------- cuDNN */

#define DK(call)                                                                                   \
    do {                                                                                           \
        cudnnStatus_t e_ = (call);                                                                 \
        if (e_ != CUDNN_STATUS_SUCCESS) {                                                          \
            snprintf(why, sizeof why, "%s: %s", #call, cudnnGetErrorString(e_));                  \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

struct cudnn_result {
    int ok;
    float ms;
    size_t work, reserve, weights;
    std::vector<float> y; /* [T][B][H] */
    char why[256];
};

static const char *algo_name(cudnnRNNAlgo_t a)
{
    switch (a) {
    case CUDNN_RNN_ALGO_STANDARD: return "standard";
    case CUDNN_RNN_ALGO_PERSIST_STATIC: return "persist_static";
    case CUDNN_RNN_ALGO_PERSIST_DYNAMIC: return "persist_dynamic";
    case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H: return "persist_static_small_h";
    default: return "?";
    }
}

static cudnn_result run_cudnn(cudnnHandle_t dh, cudaStream_t s, const host_model *hm, int T, int B, int f16, int tf32,
                              cudnnRNNAlgo_t algo, const std::vector<float> &x_tbi, int want_y)
{
    cudnn_result r;
    r.ok = 0;
    r.ms = 0;
    r.work = r.reserve = r.weights = 0;
    char why[256] = "";
    const struct rnnt_model *m = &hm->m;
    int L = m->n_enc, I = m->enc[0].input, H = m->enc[0].hidden;
    cudnnDataType_t dtype = f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    size_t es = f16 ? 2 : 4;
    cudnnRNNDescriptor_t rnn = NULL;
    cudnnDropoutDescriptor_t drop = NULL;
    cudnnRNNDataDescriptor_t xd = NULL, yd = NULL;
    cudnnTensorDescriptor_t hd = NULL, md = NULL, bd = NULL;
    void *states = NULL, *wspace = NULL, *work = NULL, *reserve = NULL, *x = NULL, *y = NULL;
    int *dseq = NULL;
    size_t ssize = 0, wsize = 0;
    std::vector<int> seq(B, T);
    cudnnMathType_t math = f16 ? CUDNN_TENSOR_OP_MATH : (tf32 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH);
    DK(cudnnCreateRNNDescriptor(&rnn));
    DK(cudnnCreateDropoutDescriptor(&drop));
    DK(cudnnDropoutGetStatesSize(dh, &ssize));
    CK(cudaMalloc(&states, ssize));
    DK(cudnnSetDropoutDescriptor(drop, dh, 0.0f, states, ssize, 0));
    if (cudnnSetRNNDescriptor_v8(rnn, algo, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                 dtype, CUDNN_DATA_FLOAT, math, I, H, H, L, drop, CUDNN_RNN_PADDED_IO_ENABLED) !=
        CUDNN_STATUS_SUCCESS)
        DK(cudnnSetRNNDescriptor_v8(rnn, algo, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                                    dtype, dtype, math, I, H, H, L, drop, CUDNN_RNN_PADDED_IO_ENABLED));
    if (algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) DK(cudnnBuildRNNDynamic(dh, rnn, B));
    DK(cudnnCreateRNNDataDescriptor(&xd));
    DK(cudnnCreateRNNDataDescriptor(&yd));
    DK(cudnnSetRNNDataDescriptor(xd, dtype, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, I, seq.data(), NULL));
    DK(cudnnSetRNNDataDescriptor(yd, dtype, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, T, B, H, seq.data(), NULL));
    DK(cudnnCreateTensorDescriptor(&hd));
    {
        int dims[3] = {L, B, H}, strides[3] = {B * H, H, 1};
        DK(cudnnSetTensorNdDescriptor(hd, dtype, 3, dims, strides));
    }
    DK(cudnnGetRNNWeightSpaceSize(dh, rnn, &wsize));
    DK(cudnnGetRNNTempSpaceSizes(dh, rnn, CUDNN_FWD_MODE_INFERENCE, xd, &r.work, &r.reserve));
    r.weights = wsize;
    CK(cudaMalloc(&wspace, wsize));
    CK(cudaMemset(wspace, 0, wsize));
    if (r.work) CK(cudaMalloc(&work, r.work));
    if (r.reserve) CK(cudaMalloc(&reserve, r.reserve));
    CK(cudaMalloc(&x, (size_t)T * B * I * es));
    CK(cudaMalloc(&y, (size_t)T * B * H * es));
    CK(cudaMalloc(&dseq, (size_t)B * sizeof(int)));
    CK(cudaMemcpy(dseq, seq.data(), (size_t)B * sizeof(int), cudaMemcpyHostToDevice));
    DK(cudnnCreateTensorDescriptor(&md));
    DK(cudnnCreateTensorDescriptor(&bd));
    for (int l = 0; l < L; l++) {
        const rnnt_lstm_layer *Ly = &m->enc[l];
        for (int id = 0; id < 8; id++) {
            void *ma = NULL, *ba = NULL;
            DK(cudnnGetRNNWeightParams(dh, rnn, l, wsize, wspace, id, md, &ma, bd, &ba));
            int g = id & 3, K = id < 4 ? Ly->input : H;
            const float *W = (id < 4 ? Ly->w_ih : Ly->w_hh) + (size_t)g * H * K;
            const float *bb = (id < 4 ? Ly->b_ih : Ly->b_hh) + (size_t)g * H;
            std::vector<unsigned char> buf((size_t)H * K * es);
            for (size_t i = 0; i < (size_t)H * K; i++) {
                if (f16) ((__half *)buf.data())[i] = __float2half_rn(W[i]);
                else ((float *)buf.data())[i] = W[i];
            }
            if (ma) CK(cudaMemcpy(ma, buf.data(), buf.size(), cudaMemcpyHostToDevice));
            for (int i = 0; i < H; i++) {
                if (f16) ((__half *)buf.data())[i] = __float2half_rn(bb[i]);
                else ((float *)buf.data())[i] = bb[i];
            }
            if (ba) CK(cudaMemcpy(ba, buf.data(), (size_t)H * es, cudaMemcpyHostToDevice));
        }
    }
    {
        std::vector<unsigned char> buf(x_tbi.size() * es);
        for (size_t i = 0; i < x_tbi.size(); i++) {
            if (f16) ((__half *)buf.data())[i] = __float2half_rn(x_tbi[i]);
            else ((float *)buf.data())[i] = x_tbi[i];
        }
        CK(cudaMemcpy(x, buf.data(), buf.size(), cudaMemcpyHostToDevice));
    }
    DK(cudnnSetStream(dh, s));
    {
        cudnnStatus_t fst = CUDNN_STATUS_SUCCESS;
        auto fwd = [&] {
            cudnnStatus_t st = cudnnRNNForward(dh, rnn, CUDNN_FWD_MODE_INFERENCE, dseq, xd, x, yd, y, hd, NULL, NULL, hd,
                                               NULL, NULL, wsize, wspace, r.work, work, r.reserve, reserve);
            if (st != CUDNN_STATUS_SUCCESS) fst = st;
        };
        fwd();
        CK(cudaStreamSynchronize(s));
        if (fst != CUDNN_STATUS_SUCCESS) {
            snprintf(why, sizeof why, "cudnnRNNForward: %s", cudnnGetErrorString(fst));
            goto fail;
        }
        r.ms = time_ms(s, fwd, g_reps);
        if (fst != CUDNN_STATUS_SUCCESS) {
            snprintf(why, sizeof why, "cudnnRNNForward: %s", cudnnGetErrorString(fst));
            goto fail;
        }
    }
    if (want_y) {
        std::vector<unsigned char> buf((size_t)T * B * H * es);
        CK(cudaMemcpy(buf.data(), y, buf.size(), cudaMemcpyDeviceToHost));
        r.y.resize((size_t)T * B * H);
        for (size_t i = 0; i < r.y.size(); i++) r.y[i] = f16 ? __half2float(((__half *)buf.data())[i]) : ((float *)buf.data())[i];
    }
    r.ok = 1;
fail:
    snprintf(r.why, sizeof r.why, "%s", why);
    cudaGetLastError();
    if (rnn) cudnnDestroyRNNDescriptor(rnn);
    if (drop) cudnnDestroyDropoutDescriptor(drop);
    if (xd) cudnnDestroyRNNDataDescriptor(xd);
    if (yd) cudnnDestroyRNNDataDescriptor(yd);
    if (hd) cudnnDestroyTensorDescriptor(hd);
    if (md) cudnnDestroyTensorDescriptor(md);
    if (bd) cudnnDestroyTensorDescriptor(bd);
    cudaFree(states);
    cudaFree(wspace);
    cudaFree(work);
    cudaFree(reserve);
    cudaFree(x);
    cudaFree(y);
    cudaFree(dseq);
    return r;
}

/* ---------------------------------------------------------------- ours */

/* --fast: layer streams (soft) at these chunks (steps of the last layer, projections in calls of one chunk) and
 * SM targets of the recurrent GEMMs (0: cuBLAS's own choice), for B >= 16 */
static const int kSweep[][2] = {{8, 0}, {16, 0}, {32, 0}, {8, 33}, {16, 33}, {16, 22}, {16, 66}, {32, 66}, {64, 66}};
static const int kSweepN = (int)(sizeof kSweep / sizeof kSweep[0]);

struct ours_result {
    float ms_hard, ms_soft, ms_inproj; /* the default path for this max_batch (cu_encoder.h) */
    char persist_txt[32];              /* soft with the persistent kernel asked for, or "n/a" */
    char graph_txt[32];                /* soft with per-step GEMMs in a graph (persistent kernel off) */
    int default_persist;               /* whether the default path is the persistent kernel */
    char fused_txt[32];                /* hard with the fused step kernel (max_batch <= 32), or "n/a" */
    float ms_wave;                     /* soft with layer pairs as one wavefront (cu_wave.h), 0 if n/a */
    std::vector<float> y_wave;         /* its output [B][T][H] */
    float ms_mma[5];                   /* soft, per-step layers on cu_lstm_mma_step: auto tile, tiles 1-3, auto
                                          tile without programmatic dependent launch; 0 if n/a */
    std::vector<float> y_mma;          /* the auto tile's output [B][T][H] */
    int default_mma;                   /* whether the default path runs the mma steps */
    int default_ls;                    /* whether the default path runs the layers as a wavefront over streams */
    float ms_ls[4];                    /* soft, per-step layers as a wavefront over streams (lstreams = 1): the
                                          default chunk, a quarter of it; 0 if n/a */
    int ls_chunk[4];                   /* their chunks (steps of the last layer) */
    std::vector<float> y_ls;           /* the default chunk's output [B][T][H] */
    std::vector<float> ms_sweep;       /* --fast: layer streams at each kSweep setting (0: not run) */
    size_t bytes;
    std::vector<float> y_soft; /* [B][T][H] */
};

static ours_result run_ours(cudaStream_t s, cublasHandle_t h, const host_model *hm, int T, int B, int f16,
                            const std::vector<float> &x_bti)
{
    ours_result r;
    const struct rnnt_model *m = &hm->m;
    int I = m->enc[0].input, H = m->enc[0].hidden;
    cu_weights w;
    RK(cu_weights_upload(m, f16 ? CU_F16 : CU_F32, &w, err, errlen));
    std::vector<const float *> feats(B);
    std::vector<int> frames(B, T);
    for (int b = 0; b < B; b++) feats[b] = x_bti.data() + (size_t)b * T * I;
    snprintf(r.persist_txt, sizeof r.persist_txt, "n/a");
    snprintf(r.fused_txt, sizeof r.fused_txt, "n/a");
    snprintf(r.graph_txt, sizeof r.graph_txt, "n/a");
    r.default_persist = 0;
    r.ms_wave = 0;
    r.default_mma = 0;
    r.default_ls = 0;
    r.ms_hard = 0; /* --fast skips the hard run */
    for (int i = 0; i < 5; i++) r.ms_mma[i] = 0;
    for (int i = 0; i < 4; i++) r.ms_ls[i] = 0, r.ls_chunk[i] = 0;
    for (int run = 0; run < 16; run++) {
        /* 0/1 default hard/soft, 2 soft persistent on, 3 soft per-step cuBLAS GEMM + cell kernel, 4/5 fused
         * hard/soft, 6 soft wavefront pairs, 7-10 soft per-step mma steps (cu_mma_step.h) with the auto
         * tile and tiles 1-3 (RNNT_CUDA_MMA_TILE, read when the graph is captured), 11 auto tile with
         * RNNT_CUDA_MMA_PDL=0, 12-13 soft per-step layers as a wavefront over streams (lstreams) with the default
         * chunk and a quarter of it */
        int soft = run != 0 && run != 4, persist = run == 2 ? 1 : run == 3 || run >= 7 ? -1 : 0, fused = run == 4 || run == 5;
        if (!f16 && run >= 7 && run <= 11) continue;
        if (g_fast && (run == 0 || (run >= 4 && run <= 11)) && !(run == 6 && g_wave)) continue;
        if (run >= 14 && B < 32) continue;
        /* 14-15: the default chunk with the recurrent GEMMs chosen for 66 and 33 SMs (RNNT_CUDA_LSTREAM_SMS) */
        if (run == 14) setenv("RNNT_CUDA_LSTREAM_SMS", "66", 1);
        else if (run == 15) setenv("RNNT_CUDA_LSTREAM_SMS", "33", 1);
        else unsetenv("RNNT_CUDA_LSTREAM_SMS");
        if (run == 13) {
            int bcap = (B + 7) / 8 * 8, c = (B >= 64 ? 4096 : 1024) / bcap; /* the encoder's default chunk */
            char ce[16];
            snprintf(ce, sizeof ce, "%d", c / 4 > 1 ? c / 4 : 1);
            setenv("RNNT_CUDA_LSTREAM_CHUNK", ce, 1);
        } else {
            unsetenv("RNNT_CUDA_LSTREAM_CHUNK");
        }
        char tile_env[8];
        snprintf(tile_env, sizeof tile_env, "%d", run - 7);
        if (run >= 8 && run <= 10) setenv("RNNT_CUDA_MMA_TILE", tile_env, 1);
        else unsetenv("RNNT_CUDA_MMA_TILE");
        if (run == 11) setenv("RNNT_CUDA_MMA_PDL", "0", 1);
        else unsetenv("RNNT_CUDA_MMA_PDL");
        cu_weights wa = w; /* shares the device arena; only the activation differs */
        wa.act = soft ? RNNT_ACT_SOFT : RNNT_ACT_HARD;
        cu_encoder_params p;
        memset(&p, 0, sizeof p);
        p.max_batch = B;
        p.max_frames = T;
        p.graphs = 1;
        p.persist = persist;
        p.fused = fused;
        p.wave = run == 6 ? 1 : run <= 1 ? 0 : -1; /* the default runs (0, 1) take the runner's default */
        p.mma_step = run >= 7 && run <= 11 ? 1 : run == 3 || run >= 12 ? -1 : 0;
        p.lstreams = run >= 12 ? 1 : run <= 1 ? 0 : -1; /* the default runs (0, 1) as a runner would */
        cu_encoder *e;
        RK(cu_encoder_create(&wa, s, h, &p, &e, err, errlen));
        if ((run == 2 && cu_encoder_persistent_layers(e) == 0) || ((run == 4 || run == 5) && !cu_encoder_fused_steps(e)) ||
            (run == 6 && cu_encoder_wave_pairs(e) == 0) || (run >= 12 && cu_encoder_lstream_chunk(e) == 0)) {
            /* does not apply (fp32, or too large) */
            cu_encoder_free(e);
            continue;
        }
        RK(cu_encoder_stage(e, B, feats.data(), frames.data(), err, errlen));
        RK(cu_encoder_upload(e, err, errlen));
        float ms = time_ms(s, [&] { RK(cu_encoder_compute(e, err, errlen)); }, g_reps);
        const cu_encoder_batch *bt = cu_encoder_get_batch(e);
        if (!bt->graphs_on) fprintf(stderr, "warning: our encoder ran without graphs (%s)\n", bt->graph_note ? bt->graph_note : "?");
        if (run >= 7 && run <= 11) r.ms_mma[run - 7] = ms;
        if (run >= 12) {
            r.ms_ls[run - 12] = ms;
            r.ls_chunk[run - 12] = cu_encoder_lstream_chunk(e);
            if (run >= 14) r.ls_chunk[run - 12] = cu_encoder_lstream_sms(e);
        }
        if (run == 1 || run == 6 || run == 7 || run == 12) {
            std::vector<float> &ys = run == 1 ? r.y_soft : run == 6 ? r.y_wave : run == 12 ? r.y_ls : r.y_mma;
            if (run == 1) r.ms_soft = ms;
            else if (run == 6) r.ms_wave = ms;
            size_t n = (size_t)bt->nb * bt->t_enc * w.hep;
            std::vector<float> out(n);
            if (f16) {
                std::vector<__half> hb(n);
                CK(cudaMemcpy(hb.data(), bt->out, n * 2, cudaMemcpyDeviceToHost));
                for (size_t i = 0; i < n; i++) out[i] = __half2float(hb[i]);
            } else {
                CK(cudaMemcpy(out.data(), bt->out, n * 4, cudaMemcpyDeviceToHost));
            }
            ys.resize((size_t)B * T * H);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++)
                    memcpy(&ys[((size_t)b * T + t) * H], &out[((size_t)b * bt->t_enc + t) * w.hep], (size_t)H * 4);
            if (run == 1) {
                r.bytes = cu_encoder_device_bytes(e);
                r.default_persist = cu_encoder_persistent_layers(e) > 0;
                r.default_mma = cu_encoder_mma_steps(e);
                r.default_ls = cu_encoder_lstream_chunk(e) > 0;
            }
        } else if (run == 0) {
            r.ms_hard = ms;
        } else if (run == 2) {
            snprintf(r.persist_txt, sizeof r.persist_txt, "%.3f", ms);
        } else if (run == 3) {
            snprintf(r.graph_txt, sizeof r.graph_txt, "%.3f", ms);
        } else if (run >= 7) {
        } else if (run == 4) {
            snprintf(r.fused_txt, sizeof r.fused_txt, "%.3f", ms);
        } else {
            size_t tl = strlen(r.fused_txt);
            snprintf(r.fused_txt + tl, sizeof r.fused_txt - tl, " / %.3f", ms);
        }
        cu_encoder_free(e);
    }
    unsetenv("RNNT_CUDA_MMA_TILE");
    unsetenv("RNNT_CUDA_MMA_PDL");
    r.ms_sweep.assign(kSweepN, 0.0f);
    for (int i = 0; g_fast && B >= 16 && i < kSweepN; i++) {
        char ce[16], cs[16];
        snprintf(ce, sizeof ce, "%d", kSweep[i][0]);
        snprintf(cs, sizeof cs, "%d", kSweep[i][1]);
        setenv("RNNT_CUDA_LSTREAM_CHUNK", ce, 1);
        if (kSweep[i][1]) setenv("RNNT_CUDA_LSTREAM_SMS", cs, 1);
        else unsetenv("RNNT_CUDA_LSTREAM_SMS");
        cu_weights wa = w;
        wa.act = RNNT_ACT_SOFT;
        cu_encoder_params p;
        memset(&p, 0, sizeof p);
        p.max_batch = B;
        p.max_frames = T;
        p.graphs = 1;
        p.persist = -1;
        p.mma_step = -1;
        p.wave = -1;
        p.lstreams = 1;
        cu_encoder *e;
        RK(cu_encoder_create(&wa, s, h, &p, &e, err, errlen));
        if (cu_encoder_lstream_chunk(e)) {
            RK(cu_encoder_stage(e, B, feats.data(), frames.data(), err, errlen));
            RK(cu_encoder_upload(e, err, errlen));
            r.ms_sweep[i] = time_ms(s, [&] { RK(cu_encoder_compute(e, err, errlen)); }, g_reps);
        }
        cu_encoder_free(e);
    }
    unsetenv("RNNT_CUDA_LSTREAM_CHUNK");
    unsetenv("RNNT_CUDA_LSTREAM_SMS");
    /* the input projections alone (all layers), to split the time: GEMM over all steps vs recurrence */
    {
        int chunk = B >= 64 ? 4096 : 1024; /* the encoder's default r_in (cu_encoder.h) */
        size_t es = f16 ? 2 : 4, rows = cu_round_up((size_t)B * T, chunk);
        int maxw = 0;
        for (int l = 0; l < w.n_enc; l++) maxw = std::max(maxw, std::max(w.enc[l].in_w, w.enc[l].g4));
        void *A, *C;
        CK(cudaMalloc(&A, rows * maxw * es));
        CK(cudaMalloc(&C, rows * maxw * es));
        k_fill<<<1024, 256, 0, s>>>(A, rows * maxw, f16, 7u);
        CK(cudaGetLastError());
        r.ms_inproj = time_ms(s, [&] {
            for (int l = 0; l < w.n_enc; l++)
                RK(cu_gemm_rows(h, w.dt, B * T, 4 * w.enc[l].hidden, w.enc[l].in_w, A, w.enc[l].in_w, w.enc[l].w_ih,
                                w.enc[l].in_w, C, 0, w.enc[l].g4, chunk, err, errlen));
        }, g_reps);
        CK(cudaFree(A));
        CK(cudaFree(C));
    }
    cu_weights_free(&w);
    return r;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    int quick = 0;
    std::vector<int> only_b; /* --batches 1,2,3: those batch sizes of the 5 x 1024 shape alone */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
            for (const char *p = argv[++i]; *p;) {
                char *end;
                long b = strtol(p, &end, 10);
                if (end == p || b < 1 || b > 4096) {
                    fprintf(stderr, "--batches: a comma-separated list of batch sizes 1..4096\n");
                    return 2;
                }
                only_b.push_back((int)b);
                p = *end == ',' ? end + 1 : end;
            }
        }
        else if (!strcmp(argv[i], "--fast")) g_fast = 1;
        else if (!strcmp(argv[i], "--wave")) g_wave = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--fast] [--wave] [--reps N] [--batches B1,B2,..]\n", argv[0]);
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || !count) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *ws;
    CK(cudaMalloc(&ws, 32 << 20));
    cublasHandle_t h;
    RK(cu_blas_create(s, ws, 32 << 20, &h, err, errlen));
    cudnnHandle_t dh;
    if (cudnnCreate(&dh) != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "cudnnCreate failed\n");
        return 1;
    }
    double peak16 = gemm_peak(s, h, 1), peak32 = gemm_peak(s, h, 0);
    printf("device %s, cuDNN %zu, median of %d; cuBLAS GEMM peak measured here: fp16 %.0f TFLOP/s (8192^3), fp32 %.1f "
           "TFLOP/s (4096^3, no TF32)\n",
           prop.name, cudnnGetVersion(), g_reps, peak16, peak32);

    struct shape {
        int layers, I, H, T, B, f16;
    };
    std::vector<shape> shapes;
    static const int Bs[] = {1, 8, 16, 24, 32, 64, 128, 256};
    for (int i = 0; i < 8 && only_b.empty(); i++)
        if ((!quick || Bs[i] == 1 || Bs[i] == 256) && (g_fast || (Bs[i] != 16 && Bs[i] != 24)))
            shapes.push_back({5, 240, 1024, 300, Bs[i], 1});
    for (int b : only_b) shapes.push_back({5, 240, 1024, 300, b, 1});
    if (only_b.empty()) {
        shapes.push_back({4, 512, 512, 100, 64, 0});
        shapes.push_back({4, 512, 512, 100, 64, 1});
    }

    printf("\n| shape (layers x H, in, T) | dtype | B | default path | ours hard ms | ours soft ms | ours soft, persistent kernel ms | ours soft, per-step graph ms | ours fused step hard / soft ms | cuDNN standard ms | cuDNN best ms "
           "(algo) | soft / cuDNN best | hard / cuDNN | soft TFLOP/s | %% of fp16 peak | in-proj ms | mem/item ours MiB | mem/item "
           "cuDNN MiB | max abs(soft - cuDNN) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    std::vector<std::string> notes, waves, mmas, lss, sweeps;
    for (const shape &sh : shapes) {
        host_model hm;
        make_model(&hm, sh.layers, sh.I, sh.H);
        std::vector<float> x_bti((size_t)sh.B * sh.T * sh.I), x_tbi(x_bti.size());
        for (auto &v : x_bti) v = frand();
        for (int b = 0; b < sh.B; b++)
            for (int t = 0; t < sh.T; t++)
                memcpy(&x_tbi[((size_t)t * sh.B + b) * sh.I], &x_bti[((size_t)b * sh.T + t) * sh.I], (size_t)sh.I * 4);
        ours_result o = run_ours(s, h, &hm, sh.T, sh.B, sh.f16, x_bti);
        static const cudnnRNNAlgo_t algos[] = {CUDNN_RNN_ALGO_STANDARD, CUDNN_RNN_ALGO_PERSIST_STATIC,
                                               CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, CUDNN_RNN_ALGO_PERSIST_DYNAMIC};
        cudnn_result best;
        best.ok = 0;
        cudnnRNNAlgo_t best_algo = CUDNN_RNN_ALGO_STANDARD;
        std::vector<float> ystd; /* the standard algorithm's output, for the check */
        float std_ms = 0;
        char tried[512] = "";
        for (int a = 0; a < 4; a++) {
            cudnn_result c = run_cudnn(dh, s, &hm, sh.T, sh.B, sh.f16, 0, algos[a], x_tbi, a == 0);
            size_t tl = strlen(tried);
            if (c.ok)
                snprintf(tried + tl, sizeof tried - tl, "%s %.3f ms; ", algo_name(algos[a]), c.ms);
            else
                snprintf(tried + tl, sizeof tried - tl, "%s: %s; ", algo_name(algos[a]), c.why);
            if (c.ok && a == 0) {
                ystd.swap(c.y);
                std_ms = c.ms;
            }
            if (c.ok && (!best.ok || c.ms < best.ms)) {
                best = c;
                best_algo = algos[a];
            }
        }
        char shp[64];
        snprintf(shp, sizeof shp, "%d x %d, in %d, T %d", sh.layers, sh.H, sh.I, sh.T);
        double flop = 0;
        for (int l = 0; l < sh.layers; l++) flop += 2.0 * 4 * sh.H * ((l ? sh.H : sh.I) + sh.H) * (double)sh.T * sh.B;
        double tf = flop / (o.ms_soft * 1e-3) / 1e12;
        double diff = 0;
        if (ystd.size())
            for (int b = 0; b < sh.B; b++)
                for (int t = 0; t < sh.T; t++)
                    for (int j = 0; j < sh.H; j++)
                        diff = std::max(diff, (double)fabsf(o.y_soft[((size_t)b * sh.T + t) * sh.H + j] -
                                                            ystd[((size_t)t * sh.B + b) * sh.H + j]));
        if (o.ms_wave > 0 && best.ok) {
            double dw = 0;
            if (ystd.size())
                for (int b = 0; b < sh.B; b++)
                    for (int t = 0; t < sh.T; t++)
                        for (int j = 0; j < sh.H; j++)
                            dw = std::max(dw, (double)fabsf(o.y_wave[((size_t)b * sh.T + t) * sh.H + j] -
                                                            ystd[((size_t)t * sh.B + b) * sh.H + j]));
            char wl[400];
            snprintf(wl, sizeof wl, "| %s | %s | %d | %.3f | %.3f | %.3f (%s) | %.2f | %.2f | %.2g |", shp, sh.f16 ? "fp16" : "fp32",
                     sh.B, o.ms_soft, o.ms_wave, best.ms, algo_name(best_algo), o.ms_soft / best.ms, o.ms_wave / best.ms, dw);
            waves.push_back(wl);
        }
        if (o.ms_mma[0] > 0 && best.ok) {
            double dm = 0;
            if (ystd.size())
                for (int b = 0; b < sh.B; b++)
                    for (int t = 0; t < sh.T; t++)
                        for (int j = 0; j < sh.H; j++)
                            dm = std::max(dm, (double)fabsf(o.y_mma[((size_t)b * sh.T + t) * sh.H + j] -
                                                            ystd[((size_t)t * sh.B + b) * sh.H + j]));
            double tfm = flop / (o.ms_mma[0] * 1e-3) / 1e12;
            char ml[480];
            snprintf(ml, sizeof ml, "| %s | %s | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f (%s) | %.2f | %.1f | %.1f | %.2g |", shp,
                     sh.f16 ? "fp16" : "fp32", sh.B, o.graph_txt, o.ms_mma[0], o.ms_mma[1], o.ms_mma[2], o.ms_mma[3], o.ms_mma[4], best.ms,
                     algo_name(best_algo), o.ms_mma[0] / best.ms, tfm, 100.0 * tfm / peak16, dm);
            mmas.push_back(ml);
        }
        if (o.ms_ls[0] > 0 && best.ok) {
            double dl = 0;
            if (ystd.size())
                for (int b = 0; b < sh.B; b++)
                    for (int t = 0; t < sh.T; t++)
                        for (int j = 0; j < sh.H; j++)
                            dl = std::max(dl, (double)fabsf(o.y_ls[((size_t)b * sh.T + t) * sh.H + j] -
                                                            ystd[((size_t)t * sh.B + b) * sh.H + j]));
            double tfl = flop / (o.ms_ls[0] * 1e-3) / 1e12;
            char ll[480];
            snprintf(ll, sizeof ll, "| %s | %s | %d | %.3f | %s | %.3f (%d) | %.3f (%d) | %.3f / %.3f | %.3f (%s) | %.2f | %.2f | %.2f | %.1f | %.1f | %.2g | %s |",
                     shp, sh.f16 ? "fp16" : "fp32", sh.B, o.ms_soft, o.graph_txt, o.ms_ls[0], o.ls_chunk[0], o.ms_ls[1],
                     o.ls_chunk[1], o.ms_ls[2], o.ms_ls[3], best.ms, algo_name(best_algo), o.ms_soft / best.ms, o.ms_ls[0] / best.ms,
                     o.ms_ls[1] / best.ms, tfl, 100.0 * tfl / peak16, dl,
                     o.y_ls == o.y_soft ? "yes" : "no");
            lss.push_back(ll);
        }
        if (best.ok && o.ms_sweep.size() && o.ms_sweep[0] > 0) {
            std::string sl = "| " + std::string(shp) + " | " + (sh.f16 ? "fp16" : "fp32") + " | " + std::to_string(sh.B) + " | ";
            char c[64];
            snprintf(c, sizeof c, "%.3f (%s) | %.3f (%.2f) |", best.ms, algo_name(best_algo), o.ms_soft, o.ms_soft / best.ms);
            sl += c;
            for (int i = 0; i < kSweepN; i++) {
                snprintf(c, sizeof c, " %.3f (%.2f) |", o.ms_sweep[i], o.ms_sweep[i] / best.ms);
                sl += c;
            }
            sweeps.push_back(sl);
        }
        size_t es = sh.f16 ? 2 : 4;
        double cud_mem = best.ok ? (double)(best.work + best.reserve + (size_t)sh.T * sh.B * (sh.I + sh.H) * es) / sh.B / 1048576.0 : 0;
        if (best.ok)
            printf("| %s | %s | %d | %s | %.3f | %.3f | %s | %s | %s | %.3f | %.3f (%s) | %.2f | %.2f | %.1f | %.1f | %.3f | %.2f | %.2f | %.2g |\n", shp,
                   sh.f16 ? "fp16" : "fp32", sh.B, o.default_persist ? "persistent" : o.default_mma ? "mma step" : o.default_ls ? "layer streams" : "per-step", o.ms_hard, o.ms_soft, o.persist_txt, o.graph_txt, o.fused_txt, std_ms, best.ms, algo_name(best_algo), o.ms_soft / best.ms,
                   o.ms_hard / best.ms, tf, 100.0 * tf / peak16, o.ms_inproj, o.bytes / (double)sh.B / 1048576.0, cud_mem, diff);
        else
            printf("| %s | %s | %d | %s | %.3f | %.3f | %s | %s | %s | - | failed | - | - | %.1f | %.1f | %.3f | %.2f | - | - |\n", shp,
                   sh.f16 ? "fp16" : "fp32", sh.B, o.default_persist ? "persistent" : o.default_mma ? "mma step" : o.default_ls ? "layer streams" : "per-step", o.ms_hard, o.ms_soft, o.persist_txt, o.graph_txt, o.fused_txt, tf, 100.0 * tf / peak16, o.ms_inproj,
                   o.bytes / (double)sh.B / 1048576.0);
        fflush(stdout);
        char nb[700];
        snprintf(nb, sizeof nb, "%s %s B=%d cuDNN: %s", shp, sh.f16 ? "fp16" : "fp32", sh.B, tried);
        notes.push_back(nb);
        if (!sh.f16) {
            cudnn_result t = run_cudnn(dh, s, &hm, sh.T, sh.B, 0, 1, CUDNN_RNN_ALGO_STANDARD, x_tbi, 0);
            snprintf(nb, sizeof nb, "%s fp32 B=%d cuDNN with TF32 allowed: %s", shp, sh.B,
                     t.ok ? (std::to_string(t.ms) + " ms").c_str() : t.why);
            notes.push_back(nb);
        }
    }
    if (waves.size()) {
        printf("\nLayer wavefront pairs (cu_wave.h, encoder param wave = 1), soft, same process:\n| shape | dtype | B | ours "
               "default ms | ours wave pairs ms | cuDNN best ms (algo) | default / cuDNN | wave / cuDNN | max abs(wave - cuDNN) |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
        for (auto &l : waves) printf("%s\n", l.c_str());
    }
    if (mmas.size()) {
        printf("\nPer-step layers with the GEMM + cell in one kernel (cu_mma_step.h, encoder param mma_step = 1, persistent "
               "kernel off), soft, same process:\n| shape | dtype | B | cuBLAS GEMM + cell kernel (graph) ms | mma step, auto tile ms "
               "| tile 8 units x 64 rows | 16 x 64 | 16 x 128 | auto tile, no PDL | cuDNN best ms (algo) | mma auto / cuDNN | TFLOP/s | %% of fp16 "
               "peak | max abs(mma - cuDNN) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (auto &l : mmas) printf("%s\n", l.c_str());
    }
    if (lss.size()) {
        printf("\nPer-step layers as a wavefront over streams (encoder param lstreams = 1, persistent kernel off), soft, "
               "same process:\n| shape | dtype | B | ours default ms | per-step graph ms | layer streams ms (chunk) | "
               "quarter chunk ms (chunk) | GEMMs for 66 / 33 SMs ms | cuDNN best ms (algo) | default / cuDNN | layer streams / cuDNN | quarter chunk / "
               "cuDNN | TFLOP/s | %% of fp16 peak | max abs(layer streams - cuDNN) | bitwise = default |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (auto &l : lss) printf("%s\n", l.c_str());
    }
    if (sweeps.size()) {
        printf("\nLayer streams, soft, ms (ratio to cuDNN best of the same process), chunk C steps (projections in calls of "
               "one chunk) / SM target of the recurrent GEMMs:\n| shape | dtype | B | cuDNN best ms (algo) | ours default ms "
               "(ratio) |");
        for (int i = 0; i < kSweepN; i++) printf(" C %d / %s |", kSweep[i][0], kSweep[i][1] ? std::to_string(kSweep[i][1]).c_str() : "all");
        printf("\n|---|---|---|---|---|");
        for (int i = 0; i < kSweepN; i++) printf("---|");
        printf("\n");
        for (auto &l : sweeps) printf("%s\n", l.c_str());
    }
    printf("\nAll cuDNN algorithms tried (the table uses the fastest that ran):\n");
    for (auto &n : notes) printf("  %s\n", n.c_str());
    cudnnDestroy(dh);
    cublasDestroy(h);
    CK(cudaFree(ws));
    return 0;
}
