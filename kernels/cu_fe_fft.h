/* cu_fe_fft.h — the real FFT of the fused GPU frontend (cu_frontend.cu), written once for the device
 * and the host: a frame's n_fft real samples x are packed as M = n_fft / 2 complex values
 * z[n] = x[2n] + i x[2n+1], transformed by a Stockham autosort FFT of radix-4 stages (and one radix-2
 * stage when log2(M) is odd) between two buffers, then unpacked into the n_fft / 2 + 1 bins of the
 * real FFT. Twiddles come from one table tw[m] = exp(-2 pi i m / n_fft), m < n_fft, computed in double
 * and rounded once (the angle is never formed in float), so every twiddle is within half an ulp.
 *
 * Each function is one work item of a stage (the kernel runs the items of a stage in parallel, a
 * barrier between stages); tests/engine/test_fe_fft.c runs the same items in loops on the CPU and
 * checks them against a double-precision DFT, so the algorithm has a plain CPU twin that CI runs.
 * n_fft must be a power of two, 4 <= n_fft. Plain C (and CUDA): no templates. */
#ifndef RNNT_CU_FE_FFT_H
#define RNNT_CU_FE_FFT_H

#ifdef __CUDACC__
#define FE_FN __host__ __device__ __forceinline__
#define FE_ALIGN8 __align__(8)
#else
#define FE_FN static inline
#define FE_ALIGN8 __attribute__((aligned(8)))
#endif

typedef struct FE_ALIGN8 {
    float x, y;
} fe_cpx;

FE_FN fe_cpx fe_cadd(fe_cpx a, fe_cpx b) { fe_cpx r = {a.x + b.x, a.y + b.y}; return r; }
FE_FN fe_cpx fe_csub(fe_cpx a, fe_cpx b) { fe_cpx r = {a.x - b.x, a.y - b.y}; return r; }
FE_FN fe_cpx fe_cmul(fe_cpx a, fe_cpx b) { fe_cpx r = {a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x}; return r; }
/* -i a */
FE_FN fe_cpx fe_cmi(fe_cpx a) { fe_cpx r = {a.y, -a.x}; return r; }

/* Sizes are powers of two and passed as their log2 (lM = log2 M, ...): every index below is a shift or
 * a mask, no integer division (a division is ~20 instructions on the GPU; with divisions the kernel
 * was instruction-bound: 1.1 ms at batch 256 on the H100).
 * The log2 of the radix of the stage after sub-transforms of Ns = 2^lNs points: 4 while 4 divides
 * what is left, else 2. */
FE_FN int fe_fft_lradix(int lM, int lNs) { return lM - lNs >= 2 ? 2 : 1; }

/* One item of a Stockham stage over a frame's M points (src and dst the frame's two buffers):
 * j < M / R, k = j mod Ns; v[r] = src[j + r M/R] w^(r k), w = exp(-2 pi i / (Ns R)); v = DFT_R(v);
 * dst[(j / Ns) Ns R + k + r Ns] = v[r]. tw is the n_fft-point table (n_fft = 2M): w^(r k) =
 * tw[2 r k M / (Ns R)]. */
FE_FN void fe_fft_stage_item(const fe_cpx *src, fe_cpx *dst, const fe_cpx *tw, int lM, int lNs, int lR, int j)
{
    int Ns = 1 << lNs, k = j & (Ns - 1), q = 1 << (lM - lR);
    int step = k << (1 + lM - lNs - lR); /* 2 k M / (Ns R): the twiddle index of r = 1; < 2M */
    int d = ((j >> lNs) << (lNs + lR)) + k;
    if (lR == 2) {
        fe_cpx v0 = src[j], v1 = src[j + q], v2 = src[j + 2 * q], v3 = src[j + 3 * q];
        if (k) {
            v1 = fe_cmul(v1, tw[step]);
            v2 = fe_cmul(v2, tw[2 * step]);
            v3 = fe_cmul(v3, tw[3 * step]);
        }
        fe_cpx s02 = fe_cadd(v0, v2), d02 = fe_csub(v0, v2), s13 = fe_cadd(v1, v3), d13 = fe_cmi(fe_csub(v1, v3));
        dst[d] = fe_cadd(s02, s13);
        dst[d + Ns] = fe_cadd(d02, d13);     /* v0 - i v1 - v2 + i v3 */
        dst[d + 2 * Ns] = fe_csub(s02, s13); /* v0 - v1 + v2 - v3 */
        dst[d + 3 * Ns] = fe_csub(d02, d13); /* v0 + i v1 - v2 - i v3 */
    } else {
        fe_cpx v0 = src[j], v1 = src[j + q];
        if (k) v1 = fe_cmul(v1, tw[step]);
        dst[d] = fe_cadd(v0, v1);
        dst[d + Ns] = fe_csub(v0, v1);
    }
}

/* Bin k (0 <= k <= M) of the real FFT from Z = DFT_M(z): with A = Z[k mod M] and B = conj(Z[(M - k)
 * mod M]), X[k] = (A + B) / 2 + tw[k] (-i) (A - B) / 2. */
FE_FN fe_cpx fe_fft_real_bin(const fe_cpx *Z, const fe_cpx *tw, int M, int k)
{
    fe_cpx a = Z[k == M ? 0 : k], b = Z[k == 0 ? 0 : M - k];
    b.y = -b.y;
    fe_cpx e = fe_cadd(a, b), o = fe_cmi(fe_csub(a, b));
    e.x *= 0.5f;
    e.y *= 0.5f;
    o.x *= 0.5f;
    o.y *= 0.5f;
    return fe_cadd(e, fe_cmul(tw[k], o)); /* tw has n_fft = 2M entries: k <= M is inside */
}

#endif
