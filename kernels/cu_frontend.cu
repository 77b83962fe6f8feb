/* cu_frontend.cu — the feature frontend on the GPU (see cu_frontend.h). */
#include "cu_frontend.h"

#include <cufft.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cu_fe_fft.h"
#include "cu_stage.h"

namespace {

/* Frames per cuFFT call: one fixed plan (so every frame is transformed by the same algorithm, whatever
 * the batch), and FFT buffers of this many frames: 8192 x (512 + 514) floats = 32 MiB at n_fft 512,
 * which the H100's 50 MB L2 holds between the three kernels of a chunk. RNNT_CUDA_FE_CHUNK=n (read at
 * create) changes it, for the benchmark. */
const int kChunkFramesDefault = 8192;

/* The fused kernel (fe_fused_kernel): frames per block such that each of its two FFT buffers holds
 * kFusedPoints complex values (n_fft 512: 8 frames, 2 x 16 KiB of shared memory), at most kFusedMaxFpb. */
const int kFusedPoints = 2048;
const int kFusedMaxFpb = 32;
const int kFusedThreads = 256;
const int kFusedMaxNfft = 4096;
/* s_flags of a frame in fe_fused_kernel */
const int kFrameLive = 1, kFrame16 = 2, kFrameAligned = 4, kFrameFirst = 8;

/* Per utterance, uploaded at the head of the PCM buffer. */
struct fe_utt {
    long long byte_off;  /* of its samples, from the start of the device buffer */
    long long n_samples;
    int frame_start;     /* prefix sum of frames: rows [frame_start, frame_start + frames) */
    int is16;            /* 16-bit PCM, else float */
};

const char *cufft_str(cufftResult r)
{
    switch (r) {
    case CUFFT_ALLOC_FAILED: return "allocation failed";
    case CUFFT_INVALID_PLAN: return "invalid plan";
    case CUFFT_INVALID_VALUE: return "invalid value";
    case CUFFT_EXEC_FAILED: return "execution failed";
    case CUFFT_SETUP_FAILED: return "setup failed";
    case CUFFT_INVALID_SIZE: return "invalid size";
    default: return "error";
    }
}

#define CUFFT_TRY(call)                                                                                  \
    do {                                                                                                 \
        cufftResult r_ = (call);                                                                         \
        if (r_ != CUFFT_SUCCESS)                                                                         \
            return cu_set_err(err, errlen, r_ == CUFFT_ALLOC_FAILED ? RNNT_ERR_NOMEM : RNNT_ERR_DEVICE, \
                              "cufft: %s:%d: %s: %s (%d)", __FILE__, __LINE__, #call, cufft_str(r_), (int)r_); \
    } while (0)

__device__ __forceinline__ float load_sample(const char *base, const fe_utt &u, long long t)
{
    const char *p = base + u.byte_off;
    if (u.is16) {
        short v;
        memcpy(&v, p + 2 * t, 2); /* 16-bit segments start 2-byte aligned */
        return __fmul_rn((float)v, 1.0f / 32768.0f);
    }
    if ((u.byte_off & 3) == 0) return ((const float *)p)[t];
    float v; /* a float segment after an odd-length 16-bit one: 2-byte aligned */
    memcpy(&v, p + 4 * t, 4);
    return v;
}

/* The utterance holding global frame g: the last u with frame_start <= g (one with frames > 0). */
__device__ __forceinline__ int utt_of_frame(const fe_utt *utt, int n, int g)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (utt[mid].frame_start <= g) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* |X|^power of one bin, as the CPU frontend computes it (power 2: each operation rounded to float). */
__device__ __forceinline__ float bin_power(float re, float im, float power)
{
    if (power == 2.0f) return __fadd_rn(__fmul_rn(re, re), __fmul_rn(im, im));
    float m = hypotf(re, im);
    return power == 1.0f ? m : powf(m, power);
}

/* One mel band of a frame's power spectrum p: its sparse sum over bins lo.. lo + e - 1 in double in
 * ascending bin order, rounded to float, floored, logged. The product of two floats is exact in double,
 * so the fma rounds once, as the CPU's add of the product does. */
__device__ __forceinline__ float log_mel(const float *w, const float *p, int lo, int e, float log_floor)
{
    double acc = 0.0;
    for (int k = 0; k < e; k++) acc = __fma_rn((double)w[k], (double)p[lo + k], acc);
    float mel = (float)acc;
    return logf(mel > log_floor ? mel : log_floor);
}

/* frames[lf][j] for local frames lf < cnt of the chunk starting at global frame g0: the pre-emphasised
 * sample times the window for j < win, zero up to n_fft. */
__global__ void fe_frame_kernel(const char *buf, const fe_utt *utt, int n, int g0, int cnt, int win, int hop,
                                int nfft, float a, const float *window, float *frames)
{
    int total = cnt * nfft; /* < 2^31: create checks chunk x n_fft */
    for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
        int lf = idx / nfft, j = idx - lf * nfft;
        float out = 0.0f;
        if (j < win) {
            int g = g0 + lf;
            const fe_utt u = utt[utt_of_frame(utt, n, g)];
            long long t = (long long)(g - u.frame_start) * hop + j;
            float x = load_sample(buf, u, t);
            /* features.py: y[0] = x[0], y[t] = x[t] - a x[t-1], each operation rounded to float */
            float y = (a != 0.0f && t > 0) ? __fsub_rn(x, __fmul_rn(a, load_sample(buf, u, t - 1))) : x;
            out = __fmul_rn(y, window[j]);
        }
        frames[idx] = out;
    }
}

/* One block per frame: the power spectrum into shared memory, then each mel band (log_mel). */
__global__ void fe_mel_kernel(const float2 *spec, int g0, int cnt, int nbins, int F, float power, float log_floor,
                              const int *mel_lo, const int *mel_hi, const int *mel_off, const float *mel_w,
                              float *out)
{
    extern __shared__ float p[];
    int lf = blockIdx.x;
    if (lf >= cnt) return;
    const float2 *X = spec + (size_t)lf * nbins;
    for (int k = threadIdx.x; k < nbins; k += blockDim.x) {
        float2 v = X[k];
        p[k] = bin_power(v.x, v.y, power);
    }
    __syncthreads();
    float *o = out + (size_t)(g0 + lf) * F;
    for (int m = threadIdx.x; m < F; m += blockDim.x)
        o[m] = log_mel(mel_w + mel_off[m], p, mel_lo[m], mel_hi[m] - mel_lo[m], log_floor);
}

/* Sample idx of a frame whose first sample is at p: 16-bit (2-byte aligned), aligned float, or float at
 * a 2-byte aligned address (after an odd-length 16-bit segment). */
__device__ __forceinline__ float frame_sample(const char *p, int flags, int idx)
{
    if (flags & kFrame16) return __fmul_rn((float)((const short *)p)[idx], 1.0f / 32768.0f);
    if (flags & kFrameAligned) return ((const float *)p)[idx];
    float v;
    memcpy(&v, p + 4 * idx, 4);
    return v;
}

/* Everything of fpb frames in one block, nothing but the PCM read and the features written through
 * device memory: framing + pre-emphasis + window packed as M = n_fft / 2 = 2^lM complex points per
 * frame, the Stockham FFT stages between two shared buffers (cu_fe_fft.h), the real bins' |X|^power
 * into shared memory, then each mel's sparse sum in double in the CPU's order, floored and logged, as
 * fe_mel_kernel. Each float operation the CPU rounds separately is rounded separately, as in
 * fe_frame_kernel (y[0] = x[0], y[t] = x[t] - a x[t-1] with t counted from the utterance's start). */
__global__ void __launch_bounds__(kFusedThreads)
    fe_fused_kernel(const char *buf, const fe_utt *utt, int n, int total, int fpb, int win, int hop, int lM, float a,
                    const float *window, const fe_cpx *tw, int F, float power, float log_floor, const int *mel_lo,
                    const int *mel_hi, const int *mel_off, const float *mel_w, float *out)
{
    extern __shared__ fe_cpx fbuf[]; /* [2][fpb][M] */
    __shared__ long long s_byte[kFusedMaxFpb]; /* the frame's first sample, from buf */
    __shared__ int s_flags[kFusedMaxFpb];
    const int M = 1 << lM, g0 = blockIdx.x * fpb, tid = threadIdx.x;
    if (tid < fpb) {
        int g = g0 + tid, fl = 0;
        long long by = 0;
        if (g < total) {
            const fe_utt u = utt[utt_of_frame(utt, n, g)];
            long long t0 = (long long)(g - u.frame_start) * hop;
            by = u.byte_off + t0 * (u.is16 ? 2 : 4);
            fl = kFrameLive | (u.is16 ? kFrame16 : 0) | ((u.byte_off & 3) == 0 ? kFrameAligned : 0) |
                 (t0 == 0 ? kFrameFirst : 0);
        }
        s_byte[tid] = by;
        s_flags[tid] = fl;
    }
    __syncthreads();
    fe_cpx *src = fbuf, *dst = fbuf + ((size_t)fpb << lM);
    for (int i = tid; i < fpb << lM; i += blockDim.x) {
        int lf = i >> lM, j = 2 * (i & (M - 1)), fl = s_flags[lf];
        fe_cpx v = {0.0f, 0.0f};
        if ((fl & kFrameLive) && j < win) {
            const char *p = buf + s_byte[lf];
            float x0 = frame_sample(p, fl, j);
            /* t = 0 of the utterance keeps x[0]; before any other sample lies its predecessor */
            float y0 = (a != 0.0f && (j > 0 || !(fl & kFrameFirst))) ? __fsub_rn(x0, __fmul_rn(a, frame_sample(p, fl, j - 1)))
                                                                      : x0;
            v.x = __fmul_rn(y0, window[j]);
            if (j + 1 < win) {
                float x1 = frame_sample(p, fl, j + 1);
                float y1 = a != 0.0f ? __fsub_rn(x1, __fmul_rn(a, x0)) : x1;
                v.y = __fmul_rn(y1, window[j + 1]);
            }
        }
        src[i] = v;
    }
    __syncthreads();
    for (int lNs = 0; lNs < lM;) {
        int lR = fe_fft_lradix(lM, lNs), lq = lM - lR;
        for (int i = tid; i < fpb << lq; i += blockDim.x) {
            int lf = i >> lq;
            fe_fft_stage_item(src + ((size_t)lf << lM), dst + ((size_t)lf << lM), tw, lM, lNs, lR, i & ((1 << lq) - 1));
        }
        __syncthreads();
        fe_cpx *t = src;
        src = dst;
        dst = t;
        lNs += lR;
    }
    /* |X|^power of the M + 1 bins into the other buffer (fpb (M + 1) floats fit in fpb M complex): bins
     * k < M by all threads, the Nyquist bin M by one thread per frame */
    float *p = (float *)dst;
    const int nb = M + 1;
    for (int i = tid; i < (fpb << lM) + fpb; i += blockDim.x) {
        int lf, k;
        if (i < fpb << lM) {
            lf = i >> lM;
            k = i & (M - 1);
        } else {
            lf = i - (fpb << lM);
            k = M;
        }
        fe_cpx v = fe_fft_real_bin(src + ((size_t)lf << lM), tw, M, k);
        p[lf * nb + k] = bin_power(v.x, v.y, power);
    }
    __syncthreads();
    for (int i = tid; i < fpb * F; i += blockDim.x) {
        int lf = i / F, m = i - lf * F;
        if (!(s_flags[lf] & kFrameLive)) continue;
        out[(size_t)(g0 + lf) * F + m] =
            log_mel(mel_w + mel_off[m], p + (size_t)lf * nb, mel_lo[m], mel_hi[m] - mel_lo[m], log_floor);
    }
}

} // namespace

struct cu_audio_fe {
    cudaStream_t s, cs;
    cu_stager *stager;
    int win, hop, nfft, nbins, F, chunk;
    float preemph, log_floor, power;
    float *d_window, *d_w;
    int *d_lo, *d_hi, *d_off;
    cufftHandle plan;
    int have_plan;
    int fused, fpb;  /* fe_fused_kernel (a power-of-two n_fft up to kFusedMaxNfft), frames per block */
    fe_cpx *d_tw;    /* its twiddles: exp(-2 pi i m / n_fft), m < n_fft */
    float *d_frames;
    float2 *d_spec;
    char *h_buf, *d_buf; /* [fe_utt table | PCM segments], pinned and device */
    size_t cap;
    cudaEvent_t ev_in, ev_up, ev_k0, ev_k1;
    int up_recorded, timed;
    std::vector<fe_utt> table;
    std::vector<const void *> seg_src;
    std::vector<size_t> seg_bytes;
};

void cu_audio_fe_free(cu_audio_fe *f)
{
    if (!f) return;
    if (f->s) cudaStreamSynchronize(f->s);
    if (f->cs) cudaStreamSynchronize(f->cs);
    cu_stager_free(f->stager);
    if (f->have_plan) cufftDestroy(f->plan);
    cudaFree(f->d_window);
    cudaFree(f->d_tw);
    cudaFree(f->d_w);
    cudaFree(f->d_lo);
    cudaFree(f->d_hi);
    cudaFree(f->d_off);
    cudaFree(f->d_frames);
    cudaFree(f->d_spec);
    cudaFree(f->d_buf);
    if (f->h_buf) cudaFreeHost(f->h_buf);
    cudaEvent_t *evs[] = {&f->ev_in, &f->ev_up, &f->ev_k0, &f->ev_k1};
    for (cudaEvent_t *e : evs)
        if (*e) cudaEventDestroy(*e);
    if (f->cs) cudaStreamDestroy(f->cs);
    delete f;
}

static rnnt_status upload(void **dst, const void *src, size_t bytes, char *err, size_t errlen)
{
    CU_TRY(cudaMalloc(dst, bytes ? bytes : 4));
    if (bytes) CU_TRY(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
    return RNNT_OK;
}

static rnnt_status create_inner(cu_audio_fe *f, const rnnt_frontend *fe, int stage_helpers, char *err, size_t errlen)
{
    rnnt_frontend_tables t;
    rnnt_frontend_get_tables(fe, &t);
    if (t.cfg->dither != 0.0)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda frontend: dither is not supported on the GPU");
    int nfft = t.cfg->n_fft;
    const char *path = getenv("RNNT_CUDA_FE"); /* "cufft": the three-pass cuFFT path even where the fused one runs */
    f->fused = !(path && strcmp(path, "cufft") == 0) && nfft >= 4 && nfft <= kFusedMaxNfft && (nfft & (nfft - 1)) == 0;
    /* cuFFT is accurate for sizes of small prime factors; with a large one (the odd 303 = 3 x 101 of a
     * test variant) it measured 1.9x the frontend's tolerance on the H100 (tests/gpu/results/
     * h100-2026-11-24-gpufe): such a model keeps the CPU frontend. */
    int rest = nfft;
    for (int p = 2; p <= 7; p++)
        while (rest % p == 0) rest /= p;
    if (!f->fused && rest != 1)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED,
                          "cuda frontend: frontend.n_fft %d has a prime factor above 7 (cuFFT's accuracy there is outside "
                          "the frontend's tolerance)", nfft);
    f->win = t.cfg->win_length;
    f->hop = t.cfg->hop_length;
    f->nfft = nfft;
    f->nbins = t.n_bins;
    f->F = t.cfg->n_mels;
    f->preemph = t.preemph;
    f->log_floor = t.log_floor;
    f->power = t.power;
    RNNT_TRY(upload((void **)&f->d_window, t.window, sizeof(float) * (size_t)f->win, err, errlen));
    RNNT_TRY(upload((void **)&f->d_w, t.mel_w, sizeof(float) * (size_t)t.n_weights, err, errlen));
    RNNT_TRY(upload((void **)&f->d_lo, t.mel_lo, sizeof(int) * (size_t)f->F, err, errlen));
    RNNT_TRY(upload((void **)&f->d_hi, t.mel_hi, sizeof(int) * (size_t)f->F, err, errlen));
    RNNT_TRY(upload((void **)&f->d_off, t.mel_off, sizeof(int) * (size_t)f->F, err, errlen));
    if (f->fused) {
        int M = nfft / 2;
        f->fpb = kFusedPoints / M < 1 ? 1 : kFusedPoints / M > kFusedMaxFpb ? kFusedMaxFpb : kFusedPoints / M;
        std::vector<fe_cpx> tw((size_t)nfft);
        for (int m = 0; m < nfft; m++) { /* in double, rounded once */
            double ang = -2.0 * 3.14159265358979323846 * (double)m / (double)nfft;
            tw[(size_t)m] = fe_cpx{(float)cos(ang), (float)sin(ang)};
        }
        RNNT_TRY(upload((void **)&f->d_tw, tw.data(), sizeof(fe_cpx) * tw.size(), err, errlen));
    } else {
        const char *ch = getenv("RNNT_CUDA_FE_CHUNK");
        f->chunk = ch && atoi(ch) > 0 ? atoi(ch) : kChunkFramesDefault;
        if ((long long)f->chunk * f->nfft > (1ll << 30))
            return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda frontend: %d frames of %d points per FFT call is too many",
                              f->chunk, f->nfft);
        CU_TRY(cudaMalloc((void **)&f->d_frames, sizeof(float) * (size_t)f->chunk * f->nfft));
        CU_TRY(cudaMalloc((void **)&f->d_spec, sizeof(float2) * (size_t)f->chunk * f->nbins));
        int n = f->nfft;
        /* NULL embeds: the basic layout, input rows of n_fft floats, output rows of n_fft / 2 + 1 complex */
        CUFFT_TRY(cufftPlanMany(&f->plan, 1, &n, NULL, 1, n, NULL, 1, f->nbins, CUFFT_R2C, f->chunk));
        f->have_plan = 1;
        CUFFT_TRY(cufftSetStream(f->plan, f->s));
    }
    CU_TRY(cudaStreamCreateWithFlags(&f->cs, cudaStreamNonBlocking));
    CU_TRY(cudaEventCreateWithFlags(&f->ev_in, cudaEventDisableTiming));
    CU_TRY(cudaEventCreateWithFlags(&f->ev_up, cudaEventDisableTiming));
    CU_TRY(cudaEventCreate(&f->ev_k0));
    CU_TRY(cudaEventCreate(&f->ev_k1));
    RNNT_TRY(cu_stager_create(stage_helpers == 0 ? -1 : stage_helpers < 0 ? 0 : stage_helpers, 0, &f->stager, err,
                              errlen));
    return RNNT_OK;
}

rnnt_status cu_audio_fe_create(const rnnt_frontend *fe, cudaStream_t stream, int stage_helpers, cu_audio_fe **out,
                               char *err, size_t errlen)
{
    *out = NULL;
    cu_audio_fe *f = new (std::nothrow) cu_audio_fe();
    if (!f) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda frontend: out of host memory");
    f->s = stream;
    rnnt_status st = create_inner(f, fe, stage_helpers, err, errlen);
    if (st != RNNT_OK) {
        cu_audio_fe_free(f);
        cudaGetLastError();
        return st;
    }
    *out = f;
    return RNNT_OK;
}

rnnt_status cu_audio_fe_run(cu_audio_fe *f, int n, const rnnt_audio_input *in, const int *frames, float *out_dev,
                            char *err, size_t errlen)
{
    f->timed = 0;
    f->table.resize((size_t)n);
    f->seg_src.resize((size_t)n + 1);
    f->seg_bytes.resize((size_t)n + 1);
    size_t head = cu_round_up(sizeof(fe_utt) * (size_t)n, 256), off = head;
    int total = 0;
    for (int i = 0; i < n; i++) {
        int is16 = in[i].samples == NULL;
        size_t bytes = in[i].n_samples * (is16 ? 2 : 4);
        f->table[(size_t)i] = fe_utt{(long long)off, (long long)in[i].n_samples, total, is16};
        f->seg_src[(size_t)i + 1] = is16 ? (const void *)in[i].pcm16 : (const void *)in[i].samples;
        f->seg_bytes[(size_t)i + 1] = bytes;
        off += bytes;
        total += frames[i];
    }
    /* the stager packs segments back to back: the table, padded to `head` bytes, then the PCM */
    f->seg_src[0] = f->table.data();
    f->seg_bytes[0] = sizeof(fe_utt) * (size_t)n;
    if (head > f->seg_bytes[0]) {
        /* pad the table segment with a host copy large enough */
        f->table.resize(head / sizeof(fe_utt) + 1);
        f->seg_src[0] = f->table.data();
        f->seg_bytes[0] = head;
    }
    /* the previous batch's transfers read the pinned buffer until they are done */
    if (f->up_recorded) CU_TRY(cudaEventSynchronize(f->ev_up));
    if (off > f->cap) {
        CU_TRY(cudaStreamSynchronize(f->s)); /* the previous batch's kernels read the device buffer */
        cudaFree(f->d_buf);
        if (f->h_buf) cudaFreeHost(f->h_buf);
        f->d_buf = f->h_buf = NULL;
        f->cap = 0;
        size_t cap = cu_round_up(off + off / 4, 1 << 20);
        CU_TRY(cudaMalloc((void **)&f->d_buf, cap));
        CU_TRY(cudaHostAlloc((void **)&f->h_buf, cap, cudaHostAllocDefault));
        f->cap = cap;
    }
    /* transfers on cs after the kernels already enqueued on s (they may still read the device buffer) */
    CU_TRY(cudaEventRecord(f->ev_in, f->s));
    CU_TRY(cudaStreamWaitEvent(f->cs, f->ev_in, 0));
    rnnt_status st = cu_stager_copy(f->stager, n + 1, f->seg_src.data(), f->seg_bytes.data(), f->h_buf, f->d_buf,
                                    f->cs, err, errlen);
    CU_TRY(cudaEventRecord(f->ev_up, f->cs));
    f->up_recorded = 1;
    RNNT_TRY(st);
    CU_TRY(cudaStreamWaitEvent(f->s, f->ev_up, 0));
    CU_TRY(cudaEventRecord(f->ev_k0, f->s));
    const fe_utt *utt = (const fe_utt *)f->d_buf;
    if (f->fused && total > 0) {
        int lM = 0;
        while ((2 << lM) < f->nfft) lM++; /* M = n_fft / 2 = 2^lM */
        size_t smem = sizeof(fe_cpx) * 2 * ((size_t)f->fpb << lM);
        fe_fused_kernel<<<(total + f->fpb - 1) / f->fpb, kFusedThreads, smem, f->s>>>(
            f->d_buf, utt, n, total, f->fpb, f->win, f->hop, lM, f->preemph, f->d_window, f->d_tw, f->F, f->power,
            f->log_floor, f->d_lo, f->d_hi, f->d_off, f->d_w, out_dev);
        CU_TRY_LAUNCH();
    }
    for (int g0 = 0; !f->fused && g0 < total; g0 += f->chunk) {
        int cnt = total - g0 < f->chunk ? total - g0 : f->chunk;
        int threads = 256, blocks = (cnt * f->nfft + threads - 1) / threads;
        fe_frame_kernel<<<blocks, threads, 0, f->s>>>(f->d_buf, utt, n, g0, cnt, f->win, f->hop, f->nfft, f->preemph,
                                                     f->d_window, f->d_frames);
        CU_TRY_LAUNCH();
        CUFFT_TRY(cufftExecR2C(f->plan, f->d_frames, (cufftComplex *)f->d_spec));
        fe_mel_kernel<<<cnt, 128, sizeof(float) * (size_t)f->nbins, f->s>>>(
            f->d_spec, g0, cnt, f->nbins, f->F, f->power, f->log_floor, f->d_lo, f->d_hi, f->d_off, f->d_w, out_dev);
        CU_TRY_LAUNCH();
    }
    CU_TRY(cudaEventRecord(f->ev_k1, f->s));
    f->timed = 1;
    return RNNT_OK;
}

const char *cu_audio_fe_path(const cu_audio_fe *f) { return f->fused ? "fused" : "cufft"; }

rnnt_status cu_audio_fe_last_ms(cu_audio_fe *f, float *ms, char *err, size_t errlen)
{
    *ms = 0;
    if (f->timed) CU_TRY(cudaEventElapsedTime(ms, f->ev_k0, f->ev_k1));
    return RNNT_OK;
}
