/* bench_frontend.c — the CPU feature frontend's speed on one core, and the two FFT libraries side by side.
 *   bench_frontend [MODEL_DIR] [--seconds S] [--reps N] [--frontend-only]
 * 1. The engine's frontend (whichever FFT it was built with: -DRNNTD_FFT=fftw3|kissfft) on S seconds of
 *    speech-like audio in one call and in 4000-sample chunks: median wall time of N runs after a warm-up,
 *    as x real time and microseconds per frame.
 * 2. The FFT step alone (real FFT of n_fft points, the model's size), FFTW3 single precision with an
 *    FFTW_ESTIMATE plan (what the engine uses) and an FFTW_MEASURE plan, and KissFFT's kiss_fftr (when
 *    built with it), in ns per transform, same inputs, same run.
 * Prints what it saw; asserts nothing about speed. */
#include <fftw3.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BENCH_HAVE_KISSFFT
#include <kiss_fftr.h>
#endif

#include "rnnt.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    const char *dir = "models/en-char-small";
    double seconds = 60.0;
    int reps = 7, fft_alone = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--frontend-only")) fft_alone = 0; /* e.g. under perf */
        else dir = argv[i];
    }
    if (reps < 1 || reps > 101 || !(seconds > 0)) { fprintf(stderr, "bench_frontend: bad --reps or --seconds\n"); return 2; }
    char err[512];
    rnnt_model *m;
    rnnt_frontend *fe;
    if (rnnt_model_load(dir, &m, err, sizeof err) || rnnt_frontend_create(m, &fe, err, sizeof err)) {
        fprintf(stderr, "bench_frontend: %s\n", err);
        return 1;
    }
    int sr = rnnt_frontend_sample_rate(fe), M = rnnt_frontend_dim(fe);
    size_t n = (size_t)(seconds * sr);
    float *x = malloc(sizeof(float) * n);
    uint64_t s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double noise = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.02;
        x[i] = (float)(0.2 * sin(2 * M_PI * 220.0 * i / sr) + 0.1 * sin(2 * M_PI * 1234.5 * i / sr) + noise);
    }
    long long T = rnnt_frontend_frames(fe, (long long)n);
    float *out = malloc(sizeof(float) * (size_t)T * M);
    rnnt_frontend_stream *st;
    if (rnnt_frontend_stream_create(fe, 0, &st, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    double whole[101], chunked[101];
    for (int r = -1; r < reps; r++) {
        int made;
        rnnt_frontend_stream_reset(st);
        double t0 = now();
        if (rnnt_frontend_feed_f32(st, x, n, out, T, &made, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
        double t1 = now();
        rnnt_frontend_stream_reset(st);
        long long got = 0;
        for (size_t pos = 0; pos < n; pos += 4000) {
            size_t k = n - pos < 4000 ? n - pos : 4000;
            if (rnnt_frontend_feed_f32(st, x + pos, k, out + got * M, T - got, &made, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
            got += made;
        }
        double t2 = now();
        if (r >= 0) {
            whole[r] = t1 - t0;
            chunked[r] = t2 - t1;
        }
    }
    double tw = median(whole, reps), tc = median(chunked, reps);
    printf("frontend of %s (FFT: %s), %.0f s of audio at %d Hz = %lld frames x %d mels, one thread, median of %d:\n", dir,
           rnnt_frontend_fft_name(), seconds, sr, T, M, reps);
    printf("  one call:        %8.2f ms  %8.0f x real time  %6.2f us/frame\n", tw * 1e3, seconds / tw, tw / T * 1e6);
    printf("  4000-sample feed: %7.2f ms  %8.0f x real time  %6.2f us/frame\n", tc * 1e3, seconds / tc, tc / T * 1e6);
    rnnt_frontend_stream_free(st);
    if (!fft_alone) {
        free(out);
        free(x);
        rnnt_frontend_free(fe);
        rnnt_model_free(m);
        return 0;
    }

    /* 2. the FFT alone, on the first frames of the same audio */
    int nfft = rnnt_frontend_fft_size(fe);
    enum { NT = 20000 };
    float *in = fftwf_malloc(sizeof(float) * nfft * 2), *buf = fftwf_malloc(sizeof(float) * nfft);
    fftwf_complex *o = fftwf_malloc(sizeof(fftwf_complex) * (nfft / 2 + 1));
    for (int i = 0; i < nfft; i++) in[i] = x[i];
    double t_est[101], t_meas[101];
    fftwf_plan pe = fftwf_plan_dft_r2c_1d(nfft, buf, o, FFTW_ESTIMATE);
    double tp = now();
    fftwf_plan pm = fftwf_plan_dft_r2c_1d(nfft, buf, o, FFTW_MEASURE);
    tp = now() - tp;
    volatile float sink = 0;
    for (int r = -1; r < reps; r++) {
        double t0 = now();
        for (int k = 0; k < NT; k++) {
            memcpy(buf, in, sizeof(float) * nfft);
            fftwf_execute_dft_r2c(pe, buf, o);
            sink += o[k % (nfft / 2)][0];
        }
        double t1 = now();
        for (int k = 0; k < NT; k++) {
            memcpy(buf, in, sizeof(float) * nfft);
            fftwf_execute_dft_r2c(pm, buf, o);
            sink += o[k % (nfft / 2)][0];
        }
        double t2 = now();
        if (r >= 0) {
            t_est[r] = (t1 - t0) / NT;
            t_meas[r] = (t2 - t1) / NT;
        }
    }
    printf("real FFT of %d points alone (copy in + transform), median of %d x %d transforms:\n", nfft, reps, NT);
    printf("  FFTW %s, FFTW_ESTIMATE plan: %7.1f ns\n", fftwf_version, median(t_est, reps) * 1e9);
    printf("  FFTW %s, FFTW_MEASURE plan:  %7.1f ns  (planning took %.1f ms)\n", fftwf_version, median(t_meas, reps) * 1e9, tp * 1e3);
#ifdef BENCH_HAVE_KISSFFT
    kiss_fftr_cfg kc = kiss_fftr_alloc(nfft, 0, NULL, NULL);
    kiss_fft_cpx *ko = malloc(sizeof(kiss_fft_cpx) * (nfft / 2 + 1));
    double t_kiss[101];
    for (int r = -1; r < reps; r++) {
        double t0 = now();
        for (int k = 0; k < NT; k++) {
            memcpy(buf, in, sizeof(float) * nfft);
            kiss_fftr(kc, buf, ko);
            sink += ko[k % (nfft / 2)].r;
        }
        if (r >= 0) t_kiss[r] = (now() - t0) / NT;
    }
    printf("  KissFFT kiss_fftr:               %7.1f ns\n", median(t_kiss, reps) * 1e9);
    /* the two libraries agree to float rounding */
    fftwf_execute_dft_r2c(pe, in, o);
    memcpy(buf, in, sizeof(float) * nfft);
    for (int i = 0; i < nfft; i++) buf[i] = x[i];
    kiss_fftr(kc, buf, ko);
    double md = 0, mx = 0;
    for (int k = 0; k <= nfft / 2; k++) {
        md = fmax(md, fmax(fabs(o[k][0] - ko[k].r), fabs(o[k][1] - ko[k].i)));
        mx = fmax(mx, hypot(o[k][0], o[k][1]));
    }
    printf("  FFTW vs KissFFT: max |difference| %.3g of max |X| %.3g\n", md, mx);
    free(ko);
    kiss_fftr_free(kc);
#else
    printf("  KissFFT: not built in (install libkissfft-dev and reconfigure)\n");
#endif
    fftwf_destroy_plan(pe);
    fftwf_destroy_plan(pm);
    fftwf_free(in);
    fftwf_free(buf);
    fftwf_free(o);
    free(out);
    free(x);
    rnnt_frontend_free(fe);
    rnnt_model_free(m);
    return 0;
}
