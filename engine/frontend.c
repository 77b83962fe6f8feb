/* frontend.c — the model's feature frontend (rnnt.h, FORMAT.md `frontend:`) in C, the twin of
 * models/train/features.py: every stage in the same order and the same precision (float32 samples,
 * window, spectrum and filterbank; the filterbank and window are built in double and rounded, as the
 * Python builds them in float64 and casts). The FFT is FFTW3's single-precision r2c (default) or
 * KissFFT's kiss_fftr (-DRNNTD_FFT=kissfft); tests/bench/bench_frontend.c compares them. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#ifdef RNNT_FFT_KISSFFT
#include <kiss_fftr.h>
#else
#include <fftw3.h>
#endif

#include "backend.h"

struct rnnt_frontend {
    rnnt_frontend_cfg cfg;
    int n_bins;          /* n_fft / 2 + 1 */
    float *window;       /* [win_length] */
    int *mel_lo, *mel_hi; /* per mel: its nonzero bins [lo, hi) */
    float *mel_w;        /* per mel: hi - lo weights, packed; mel m starts at mel_off[m] */
    int *mel_off;
    float preemph, log_floor, power;
#ifdef RNNT_FFT_KISSFFT
    kiss_fftr_cfg plan;  /* kiss_fftr only reads its cfg: shareable */
#else
    fftwf_plan plan;     /* executed with fftwf_execute_dft_r2c on each stream's own aligned buffers */
#endif
};

struct rnnt_frontend_stream {
    const rnnt_frontend *fe;
    float *buf;          /* the pending frame: pre-emphasised (and dithered) samples, fill of win_length */
    int fill;
    float prev;          /* the last raw sample (pre-emphasis) */
    int have_prev;
    uint64_t seed, count; /* dither: seed and the index of the next sample in the stream */
    float *fft_in;       /* [n_fft], zero past win_length */
    void *fft_out;       /* [n_bins] complex */
    float *spec;         /* [n_bins] */
};

/* FFTW's planner (and plan destruction) is not thread-safe; every engine call to it holds this. */
static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

const char *rnnt_frontend_fft_name(void)
{
#ifdef RNNT_FFT_KISSFFT
    return "kissfft";
#else
    return fftwf_version;
#endif
}

/* ---- window and filterbank (double, as features.py builds them with numpy/torch float64) ---- */

static double hz_to_mel(double f, int htk)
{
    if (htk) return 2595.0 * log10(1.0 + f / 700.0);
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, logstep = log(6.4) / 27.0;
    if (f < min_log_hz) return f / f_sp;
    return min_log_hz / f_sp + log(f / min_log_hz) / logstep;
}

static double mel_to_hz(double m, int htk)
{
    if (htk) return 700.0 * (pow(10.0, m / 2595.0) - 1.0);
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, logstep = log(6.4) / 27.0, min_log_mel = min_log_hz / f_sp;
    return m < min_log_mel ? f_sp * m : min_log_hz * exp(logstep * (m - min_log_mel));
}

/* numpy.linspace(a, b, n)[i]: a + i * step, the last point exactly b. */
static double linspace(double a, double b, int n, int i)
{
    if (n == 1) return a;
    if (i == n - 1) return b;
    return a + i * ((b - a) / (n - 1));
}

static rnnt_status build_filterbank(rnnt_frontend *fe, char *err, size_t errlen)
{
    const rnnt_frontend_cfg *c = &fe->cfg;
    int nb = fe->n_bins, nm = c->n_mels, htk = !strcmp(c->mel_scale, "htk"), slaney_norm = !strcmp(c->mel_norm, "slaney");
    double *f_pts = malloc(sizeof(double) * (size_t)(nm + 2)), *freqs = malloc(sizeof(double) * (size_t)nb);
    float *dense = calloc((size_t)nb * (size_t)nm, sizeof(float));
    fe->mel_lo = calloc((size_t)nm, sizeof(int));
    fe->mel_hi = calloc((size_t)nm, sizeof(int));
    fe->mel_off = calloc((size_t)nm, sizeof(int));
    rnnt_status st = RNNT_OK;
    if (!f_pts || !freqs || !dense || !fe->mel_lo || !fe->mel_hi || !fe->mel_off) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory");
        goto out;
    }
    double m_min = hz_to_mel(c->f_min, htk), m_max = hz_to_mel(c->f_max, htk);
    for (int i = 0; i < nm + 2; i++) f_pts[i] = mel_to_hz(linspace(m_min, m_max, nm + 2, i), htk);
    for (int k = 0; k < nb; k++) freqs[k] = linspace(0.0, (double)(c->sample_rate / 2), nb, k);
    int total = 0;
    for (int m = 0; m < nm; m++) {
        double d0 = f_pts[m + 1] - f_pts[m], d1 = f_pts[m + 2] - f_pts[m + 1];
        double enorm = slaney_norm ? 2.0 / (f_pts[m + 2] - f_pts[m]) : 1.0;
        int lo = nb, hi = 0;
        for (int k = 0; k < nb; k++) {
            /* features.py: slopes = f_pts - freq; down = -slopes[m] / d0; up = slopes[m+2] / d1 */
            double down = -(f_pts[m] - freqs[k]) / d0, up = (f_pts[m + 2] - freqs[k]) / d1;
            double w = fmax(0.0, fmin(down, up));
            if (slaney_norm) w *= enorm;
            float wf = (float)w;
            dense[(size_t)k * nm + m] = wf;
            if (wf != 0.0f) {
                if (k < lo) lo = k;
                hi = k + 1;
            }
        }
        if (hi <= lo) lo = hi = 0; /* an empty filter (possible with many mels over few bins): feature = log_floor */
        fe->mel_lo[m] = lo;
        fe->mel_hi[m] = hi;
        fe->mel_off[m] = total;
        total += hi - lo;
    }
    if (!(fe->mel_w = malloc(sizeof(float) * (size_t)(total ? total : 1)))) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory");
        goto out;
    }
    for (int m = 0; m < nm; m++)
        for (int k = fe->mel_lo[m]; k < fe->mel_hi[m]; k++) fe->mel_w[fe->mel_off[m] + k - fe->mel_lo[m]] = dense[(size_t)k * nm + m];
out:
    free(f_pts);
    free(freqs);
    free(dense);
    return st;
}

static void build_window(rnnt_frontend *fe)
{
    const rnnt_frontend_cfg *c = &fe->cfg;
    int L = c->win_length;
    /* torch.{hann,hamming}_window(L, periodic=False): alpha - beta cos(2 pi n / (L - 1)); L = 1 gives [1] */
    double alpha = !strcmp(c->window, "hamming") ? 0.54 : 0.5, beta = 1.0 - alpha;
    for (int n = 0; n < L; n++) {
        double w = L == 1 ? 1.0 : alpha - beta * cos(2.0 * M_PI * n / (L - 1));
        if (!strcmp(c->window, "povey")) w = pow(w, 0.85);
        fe->window[n] = (float)w;
    }
}

/* ---- the shared frontend ------------------------------------------------------------------- */

rnnt_status rnnt_frontend_create(const rnnt_model *m, rnnt_frontend **out, char *err, size_t errlen)
{
    *out = NULL;
    const rnnt_frontend_cfg *c = &m->fe;
#ifdef RNNT_FFT_KISSFFT
    if (c->n_fft % 2)
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "frontend.n_fft: %d is odd; this engine's FFT (KissFFT real) needs an even size", c->n_fft);
#endif
    rnnt_frontend *fe = calloc(1, sizeof *fe);
    if (!fe) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory");
    fe->cfg = *c;
    fe->n_bins = c->n_fft / 2 + 1;
    fe->preemph = (float)c->preemphasis;
    fe->log_floor = (float)c->log_floor;
    fe->power = (float)c->power;
    rnnt_status st;
    if (!(fe->window = malloc(sizeof(float) * (size_t)c->win_length))) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory");
        goto fail;
    }
    build_window(fe);
    if ((st = build_filterbank(fe, err, errlen))) goto fail;
    pthread_mutex_lock(&plan_lock);
#ifdef RNNT_FFT_KISSFFT
    fe->plan = kiss_fftr_alloc(c->n_fft, 0, NULL, NULL);
#else
    {
        /* FFTW_ESTIMATE: the plan is chosen without timing runs, so the same build computes the same
         * bits on every run (FFTW_MEASURE may pick another algorithm each time). The arrays only give
         * the planner their alignment: streams allocate theirs with fftwf_malloc, which aligns alike. */
        float *in = fftwf_malloc(sizeof(float) * (size_t)c->n_fft);
        fftwf_complex *o = fftwf_malloc(sizeof(fftwf_complex) * (size_t)fe->n_bins);
        if (in && o) fe->plan = fftwf_plan_dft_r2c_1d(c->n_fft, in, o, FFTW_ESTIMATE | FFTW_DESTROY_INPUT);
        fftwf_free(in);
        fftwf_free(o);
    }
#endif
    pthread_mutex_unlock(&plan_lock);
    if (!fe->plan) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: could not plan an FFT of %d points", c->n_fft);
        goto fail;
    }
    *out = fe;
    return RNNT_OK;
fail:
    rnnt_frontend_free(fe);
    return st;
}

void rnnt_frontend_free(rnnt_frontend *fe)
{
    if (!fe) return;
    if (fe->plan) {
        pthread_mutex_lock(&plan_lock);
#ifdef RNNT_FFT_KISSFFT
        kiss_fftr_free(fe->plan);
#else
        fftwf_destroy_plan(fe->plan);
#endif
        pthread_mutex_unlock(&plan_lock);
    }
    free(fe->window);
    free(fe->mel_lo);
    free(fe->mel_hi);
    free(fe->mel_off);
    free(fe->mel_w);
    free(fe);
}

int rnnt_frontend_dim(const rnnt_frontend *fe) { return fe->cfg.n_mels; }

void rnnt_frontend_get_tables(const rnnt_frontend *fe, rnnt_frontend_tables *t)
{
    int nm = fe->cfg.n_mels;
    t->cfg = &fe->cfg;
    t->n_bins = fe->n_bins;
    t->window = fe->window;
    t->mel_lo = fe->mel_lo;
    t->mel_hi = fe->mel_hi;
    t->mel_off = fe->mel_off;
    t->mel_w = fe->mel_w;
    t->n_weights = nm ? fe->mel_off[nm - 1] + fe->mel_hi[nm - 1] - fe->mel_lo[nm - 1] : 0;
    t->preemph = fe->preemph;
    t->log_floor = fe->log_floor;
    t->power = fe->power;
}
int rnnt_frontend_sample_rate(const rnnt_frontend *fe) { return fe->cfg.sample_rate; }
int rnnt_frontend_fft_size(const rnnt_frontend *fe) { return fe->cfg.n_fft; }

/* Frames of a whole utterance of n samples (FORMAT.md, frontend.center and frontend.length). */
long long rnnt_frontend_frames(const rnnt_frontend *fe, long long n)
{
    const rnnt_frontend_cfg *c = &fe->cfg;
    long long frames;
    if (!c->center) frames = n < c->win_length ? 0 : 1 + (n - c->win_length) / c->hop_length;
    else if (n == 0 || (c->pad_reflect && n <= c->n_fft / 2)) frames = 0; /* torch cannot reflect-pad more than n - 1 samples */
    else frames = 1 + (n + 2LL * (c->n_fft / 2) - c->n_fft) / c->hop_length;
    if (c->length_hop_ceil) {
        /* Jasper/MLPerf: ceil(n / hop) frames, then ceil(. / k) stacked frames; a stacked frame past
         * that holds only the one extra frame centring makes, so dropping that frame is the same */
        long long k = c->stacking > 0 ? c->stacking : 1, keep = ((n + c->hop_length - 1) / c->hop_length + k - 1) / k * k;
        if (frames > keep) frames = keep;
    }
    return frames;
}

/* A frontend whose frames depend on the end of the utterance (centring pads it at both ends). */
static int needs_whole(const rnnt_frontend_cfg *c) { return c->center || c->length_hop_ceil; }

/* ---- streams ------------------------------------------------------------------------------- */

rnnt_status rnnt_frontend_stream_create(const rnnt_frontend *fe, uint64_t dither_seed, rnnt_frontend_stream **out, char *err,
                                        size_t errlen)
{
    *out = NULL;
    rnnt_frontend_stream *s = calloc(1, sizeof *s);
    if (!s) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory");
    s->fe = fe;
    s->seed = dither_seed;
    size_t nfft = (size_t)fe->cfg.n_fft, nb = (size_t)fe->n_bins;
    s->buf = malloc(sizeof(float) * (size_t)fe->cfg.win_length);
    s->spec = malloc(sizeof(float) * nb);
#ifdef RNNT_FFT_KISSFFT
    s->fft_in = calloc(nfft, sizeof(float));
    s->fft_out = malloc(sizeof(kiss_fft_cpx) * nb);
#else
    s->fft_in = fftwf_malloc(sizeof(float) * nfft);
    s->fft_out = fftwf_malloc(sizeof(fftwf_complex) * nb);
#endif
    if (!s->buf || !s->spec || !s->fft_in || !s->fft_out) {
        rnnt_frontend_stream_free(s);
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory");
    }
    memset(s->fft_in, 0, sizeof(float) * nfft);
    *out = s;
    return RNNT_OK;
}

void rnnt_frontend_stream_free(rnnt_frontend_stream *s)
{
    if (!s) return;
    free(s->buf);
    free(s->spec);
#ifdef RNNT_FFT_KISSFFT
    free(s->fft_in);
    free(s->fft_out);
#else
    fftwf_free(s->fft_in);
    fftwf_free(s->fft_out);
#endif
    free(s);
}

void rnnt_frontend_stream_reset(rnnt_frontend_stream *s)
{
    s->fill = 0;
    s->have_prev = 0;
    s->prev = 0.0f;
    s->count = 0;
}

long long rnnt_frontend_stream_frames_after(const rnnt_frontend_stream *s, size_t n)
{
    const rnnt_frontend_cfg *c = &s->fe->cfg;
    unsigned long long have = (unsigned long long)s->fill + n;
    if (have < (unsigned long long)c->win_length) return 0;
    return (long long)(1 + (have - (unsigned long long)c->win_length) / (unsigned long long)c->hop_length);
}

/* Standard normal noise for sample `i` of a stream with seed `seed`: splitmix64 of (seed, i), then
 * Box-Muller on the two 32-bit halves. Counter-based, so chunking cannot change it. */
static float dither_noise(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u1 = ((double)(z >> 32) + 1.0) / 4294967296.0, u2 = (double)(z & 0xffffffffu) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* One frame from the full buffer into out[n_mels]. */
static void frame_features(rnnt_frontend_stream *s, float *out)
{
    const rnnt_frontend *fe = s->fe;
    const rnnt_frontend_cfg *c = &fe->cfg;
    int L = c->win_length, nb = fe->n_bins;
    float *in = s->fft_in;
    for (int n = 0; n < L; n++) in[n] = s->buf[n] * fe->window[n];
#ifdef RNNT_FFT_KISSFFT
    kiss_fftr(fe->plan, in, (kiss_fft_cpx *)s->fft_out);
    const float *X = (const float *)s->fft_out;
#else
    fftwf_execute_dft_r2c(fe->plan, in, (fftwf_complex *)s->fft_out);
    const float *X = (const float *)s->fft_out;
    /* FFTW_DESTROY_INPUT lets r2c scribble over its input: restore the zero padding */
    if (c->n_fft > L) memset(in + L, 0, sizeof(float) * (size_t)(c->n_fft - L));
#endif
    if (fe->power == 2.0f) {
        for (int k = 0; k < nb; k++) s->spec[k] = X[2 * k] * X[2 * k] + X[2 * k + 1] * X[2 * k + 1];
    } else {
        /* torch: .abs() (hypot) then .pow(power), both in float */
        for (int k = 0; k < nb; k++) {
            float a = hypotf(X[2 * k], X[2 * k + 1]);
            s->spec[k] = fe->power == 1.0f ? a : powf(a, fe->power);
        }
    }
    if (c->spectrum_offset != 0.0) {
        /* Jasper/MLPerf's "deterministic dithering": dither^2 added to the power spectrum */
        const float off = (float)c->spectrum_offset;
        for (int k = 0; k < nb; k++) s->spec[k] += off;
    }
    for (int m = 0; m < c->n_mels; m++) {
        const float *w = fe->mel_w + fe->mel_off[m];
        const float *p = s->spec + fe->mel_lo[m];
        double acc = 0.0;
        for (int k = 0, e = fe->mel_hi[m] - fe->mel_lo[m]; k < e; k++) acc += (double)w[k] * p[k];
        float mel = (float)acc;
        out[m] = c->log_add ? logf(mel + fe->log_floor) : logf(mel > fe->log_floor ? mel : fe->log_floor);
    }
}

/* The body of the two feeds: exactly one of xf (float) and xs (16-bit PCM) is set. */
static rnnt_status feed(rnnt_frontend_stream *s, const float *xf, const int16_t *xs, size_t n, float *out, long long max_frames,
                        int *n_frames, char *err, size_t errlen)
{
    const rnnt_frontend_cfg *c = &s->fe->cfg;
    *n_frames = 0;
    if (needs_whole(c))
        return rnnt_set_err(err, errlen, RNNT_ERR_UNSUPPORTED,
                            "frontend: this model's frames (center: true or length: hop_ceil) need the whole utterance; use rnnt_frontend_compute_f32");
    long long want = rnnt_frontend_stream_frames_after(s, n);
    if (want > max_frames || want > INT_MAX)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "frontend: %zu samples complete %lld frames, more than %lld", n, want, max_frames);
    if (xf)
        for (size_t i = 0; i < n; i++)
            if (!isfinite(xf[i])) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "frontend: sample %zu is not finite", i);
    const float a = s->fe->preemph, dither = (float)c->dither;
    int L = c->win_length, hop = c->hop_length, nm = c->n_mels, made = 0;
    size_t i = 0;
    while (i < n) {
        size_t take = (size_t)(L - s->fill);
        if (take > n - i) take = n - i;
        float *b = s->buf + s->fill;
        for (size_t j = 0; j < take; j++) {
            float x = xf ? xf[i + j] : (float)xs[i + j] * (1.0f / 32768.0f);
            /* features.py: y[0] = x[0], y[n] = x[n] - a x[n-1], each op rounded to float; skipped when a == 0 */
            float y = (a != 0.0f && s->have_prev) ? x - a * s->prev : x;
            s->prev = x;
            s->have_prev = 1;
            if (dither != 0.0f) y += dither * dither_noise(s->seed, s->count);
            s->count++;
            b[j] = y;
        }
        s->fill += (int)take;
        i += take;
        if (s->fill == L) {
            frame_features(s, out + (size_t)made * nm);
            made++;
            memmove(s->buf, s->buf + hop, sizeof(float) * (size_t)(L - hop));
            s->fill = L - hop;
        }
    }
    *n_frames = made;
    return RNNT_OK;
}

rnnt_status rnnt_frontend_feed_f32(rnnt_frontend_stream *s, const float *x, size_t n, float *out, long long max_frames, int *n_frames,
                                   char *err, size_t errlen)
{
    return feed(s, x, NULL, n, out, max_frames, n_frames, err, errlen);
}

rnnt_status rnnt_frontend_feed_s16(rnnt_frontend_stream *s, const int16_t *x, size_t n, float *out, long long max_frames, int *n_frames,
                                   char *err, size_t errlen)
{
    return feed(s, NULL, x, n, out, max_frames, n_frames, err, errlen);
}

/* A whole utterance with centring (torch.stft center=True): pre-emphasis (and dither) over the
 * signal as feed() does, then n_fft/2 samples of padding at each end (the reflection without the edge
 * sample, or zeros); frame i is the win_length samples at i*hop + (n_fft - win)/2 of the padded
 * signal (torch centres a shorter window in the FFT; where it sits in the FFT does not change |X|). */
static rnnt_status compute_whole(rnnt_frontend_stream *s, const float *x, size_t n, float *out, int want, int *n_frames, char *err,
                                 size_t errlen)
{
    const rnnt_frontend_cfg *c = &s->fe->cfg;
    *n_frames = 0;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "frontend: sample %zu is not finite", i);
    size_t P = c->center ? (size_t)(c->n_fft / 2) : 0, off = c->center ? (size_t)((c->n_fft - c->win_length) / 2) : 0;
    float *z = calloc(n + 2 * P, sizeof(float));
    if (!z) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory for %zu samples", n);
    const float a = s->fe->preemph, dither = (float)c->dither;
    float *y = z + P;
    for (size_t i = 0; i < n; i++) {
        float v = (a != 0.0f && i > 0) ? x[i] - a * x[i - 1] : x[i];
        if (dither != 0.0f) v += dither * dither_noise(s->seed, i);
        y[i] = v;
    }
    if (c->center && c->pad_reflect && n > P)
        for (size_t j = 1; j <= P; j++) {
            y[-(ptrdiff_t)j] = y[j];
            y[n - 1 + j] = y[n - 1 - j];
        }
    int L = c->win_length, nm = c->n_mels;
    for (int i = 0; i < want; i++) {
        memcpy(s->buf, z + (size_t)i * (size_t)c->hop_length + off, sizeof(float) * (size_t)L);
        frame_features(s, out + (size_t)i * nm);
    }
    free(z);
    *n_frames = want;
    return RNNT_OK;
}

rnnt_status rnnt_frontend_compute_f32(const rnnt_frontend *fe, const float *x, size_t n, int max_frames, float **feats, int *frames,
                                      char *err, size_t errlen)
{
    *feats = NULL;
    *frames = 0;
    long long want = rnnt_frontend_frames(fe, (long long)n), cap = max_frames > 0 ? max_frames : INT_MAX;
    if (want > cap)
        return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "frontend: %zu samples give %lld frames, more than %lld", n, want, cap);
    if (want == 0) {
        /* still reject non-finite samples, as a feed would */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(x[i])) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "frontend: sample %zu is not finite", i);
        return RNNT_OK;
    }
    float *out = malloc(sizeof(float) * (size_t)want * (size_t)fe->cfg.n_mels);
    if (!out) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "frontend: out of memory for %lld frames", want);
    rnnt_frontend_stream *s;
    rnnt_status st = rnnt_frontend_stream_create(fe, 0, &s, err, errlen);
    if (st) { free(out); return st; }
    st = needs_whole(&fe->cfg) ? compute_whole(s, x, n, out, (int)want, frames, err, errlen)
                               : rnnt_frontend_feed_f32(s, x, n, out, want, frames, err, errlen);
    rnnt_frontend_stream_free(s);
    if (st) { free(out); *frames = 0; return st; }
    *feats = out;
    return RNNT_OK;
}
