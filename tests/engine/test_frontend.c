/* test_frontend.c — the C feature frontend against features.py's golden files (tests/data/frontend,
 * models/rnntd_ref/frontend_golden.py), on the shipped model's frontend and three variants (every window,
 * scale and norm, powers 1, 1.5, 2, an odd FFT size, 8 and 11.025 kHz) and awkward signals (empty, 1
 * sample, shorter than a window, odd lengths, silence, DC, full-scale square, clipping, white noise,
 * +-1 LSB); the shipped sample WAVs against their .npy features and transcripts; chunked feeding at
 * random unaligned sizes, float or int16, bitwise equal to one call; errors and dither.
 *
 * Tolerance (frontend_golden.py says why): |c - r| <= 2e-5 + 2e-6 * exp(rmax - r), r the float64
 * reference, rmax its frame's largest feature: a float32 FFT's error scales with the frame's energy, not
 * the band's. features.py in float32 uses at most 15% of it; silence must be exactly ln(log_floor). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rnnt_audio.h"
#include "model.h"
#include "rnnt_npy.h"
#include "test_util.h"

#define ATOL 2e-5
#define RTOL_FRAME 2e-6

static const char *const configs[] = {"en-char-small", "hamming-htk", "povey-8k", "odd-fft"};

static void model_dir(const char *config, char *out, size_t n)
{
    if (!strcmp(config, "en-char-small")) snprintf(out, n, "%s/../../models/en-char-small", tu_data_dir());
    else snprintf(out, n, "%s/frontend/%s", tu_data_dir(), config);
}

static void load(const char *dir, rnnt_model **m, rnnt_frontend **fe)
{
    char err[512];
    if (rnnt_model_load(dir, m, err, sizeof err)) fail_msg("%s", err);
    if (rnnt_frontend_create(*m, fe, err, sizeof err)) fail_msg("%s", err);
}

/* Largest |c - r| / allowed over [T, M]; fails past 1. */
static double check_close(const char *what, const float *c, const float *r, int T, int M)
{
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        float rmax = -INFINITY;
        for (int k = 0; k < M; k++) rmax = fmaxf(rmax, r[(size_t)t * M + k]);
        for (int k = 0; k < M; k++) {
            double rv = r[(size_t)t * M + k], d = fabs((double)c[(size_t)t * M + k] - rv);
            double allowed = ATOL + RTOL_FRAME * exp(fmin(rmax - rv, 80.0));
            if (!(d <= allowed)) fail_msg("%s: frame %d mel %d: C %.9g, reference %.9g (allowed %.3g)", what, t, k, c[(size_t)t * M + k], rv, allowed);
            if (d / allowed > worst) worst = d / allowed;
        }
    }
    return worst;
}

/* Feeds x in random chunks (1 .. 3 hops, alternately float and int16 when pcm is given) and returns the
 * malloc'd frames; *T their count. */
static float *feed_chunked(const rnnt_frontend *fe, const float *x, const int16_t *pcm, size_t n, uint64_t seed, int *T)
{
    char err[512];
    int M = rnnt_frontend_dim(fe);
    long long want = rnnt_frontend_frames(fe, (long long)n);
    float *out = malloc(sizeof(float) * (size_t)(want ? want : 1) * M);
    rnnt_frontend_stream *s;
    if (rnnt_frontend_stream_create(fe, 0, &s, err, sizeof err)) fail_msg("%s", err);
    uint64_t rs = seed;
    size_t pos = 0;
    int got = 0, step = 0;
    while (pos < n) {
        size_t k = 1 + (size_t)(tu_rand_next(&rs) % 500);
        if (k > n - pos) k = n - pos;
        assert_int_equal(rnnt_frontend_stream_frames_after(s, k) + got, rnnt_frontend_frames(fe, (long long)(pos + k)));
        int made;
        rnnt_status st = (pcm && step % 2) ? rnnt_frontend_feed_s16(s, pcm + pos, k, out + (size_t)got * M, want - got, &made, err, sizeof err)
                                           : rnnt_frontend_feed_f32(s, x + pos, k, out + (size_t)got * M, want - got, &made, err, sizeof err);
        if (st) fail_msg("%s", err);
        got += made;
        pos += k;
        step++;
    }
    rnnt_frontend_stream_free(s);
    *T = got;
    return out;
}

static void test_golden(void **state)
{
    char dir[1024], path[1400], err[512];
    for (size_t ci = 0; ci < sizeof configs / sizeof *configs; ci++) {
        rnnt_model *m;
        rnnt_frontend *fe;
        model_dir(configs[ci], dir, sizeof dir);
        if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
        rnnt_status cst = rnnt_frontend_create(m, &fe, err, sizeof err);
        if (cst == RNNT_ERR_UNSUPPORTED && strstr(err, "KissFFT")) {
            /* an odd n_fft in a -DRNNTD_FFT=kissfft build: refused by name, as it should be */
            print_message("frontend %s: %s (skipped in this build)\n", configs[ci], err);
            rnnt_model_free(m);
            continue;
        }
        if (cst) fail_msg("%s", err);
        int M = rnnt_frontend_dim(fe);
        float floor_feat = logf((float)m->fe.log_floor);
        snprintf(path, sizeof path, "%s/frontend/%s/cases.txt", tu_data_dir(), configs[ci]);
        FILE *f = fopen(path, "r");
        if (!f) fail_msg("%s: cannot open", path);
        char cname[64], sname[64];
        long nsamp;
        int ncases = 0;
        double worst = 0.0;
        while (fscanf(f, "%63s %63s %ld", cname, sname, &nsamp) == 3) {
            rnnt_npy wave, gold;
            snprintf(path, sizeof path, "%s/frontend/waves/%s.npy", tu_data_dir(), sname);
            if (rnnt_npy_load(path, 1, 0, 0, &wave, err, sizeof err)) fail_msg("%s", err);
            assert_true(nsamp <= wave.rows);
            snprintf(path, sizeof path, "%s/frontend/%s/%s.npy", tu_data_dir(), configs[ci], cname);
            if (rnnt_npy_load(path, M, 0, 0, &gold, err, sizeof err)) fail_msg("%s", err);
            size_t n = (size_t)nsamp;
            float *feats;
            int T;
            if (rnnt_frontend_compute_f32(fe, wave.data, n, 0, &feats, &T, err, sizeof err)) fail_msg("%s", err);
            if (T != gold.rows) fail_msg("%s/%s: %d frames, reference %d", configs[ci], cname, T, gold.rows);
            assert_int_equal(T, rnnt_frontend_frames(fe, (long long)n));
            char what[160];
            snprintf(what, sizeof what, "%s/%s", configs[ci], cname);
            double w = check_close(what, feats, gold.data, T, M);
            if (w > worst) worst = w;
            if (getenv("RNNT_TEST_VERBOSE")) print_message("  %s: %.3f\n", what, w);
            if (!strcmp(sname, "silence"))
                for (int i = 0; i < T * M; i++)
                    if (feats[i] != floor_feat) fail_msg("%s: silence gives %.9g, not ln(log_floor) = %.9g", what, feats[i], floor_feat);
            /* the same samples as int16 PCM, and in random chunks (float and int16 mixed): the same bits */
            int16_t *pcm = malloc(sizeof(int16_t) * (n ? n : 1));
            for (size_t i = 0; i < n; i++) pcm[i] = (int16_t)lrintf(wave.data[i] * 32768.0f);
            for (uint64_t seed = 1; seed <= 3; seed++) {
                int T2;
                float *g = feed_chunked(fe, wave.data, seed == 1 ? NULL : pcm, n, seed * 7919, &T2);
                assert_int_equal(T2, T);
                if (T && memcmp(g, feats, sizeof(float) * (size_t)T * M)) fail_msg("%s: chunked feeding (seed %d) changed the bits", what, (int)seed);
                free(g);
            }
            free(pcm);
            free(feats);
            rnnt_npy_free(&wave);
            rnnt_npy_free(&gold);
            ncases++;
        }
        fclose(f);
        assert_true(ncases >= 13);
        print_message("frontend %s (%s): %d cases, largest error %.3f of the tolerance\n", configs[ci], rnnt_frontend_fft_name(), ncases, worst);
        rnnt_frontend_free(fe);
        rnnt_model_free(m);
    }
}

/* The shipped model's four sample WAVs (models/en-char-small/samples). */
static const char *const shipped_names[] = {"01-flite-kal16", "02-espeak-en-gb-x-rp-klatt", "03-festival-kal-diphone",
                                            "04-flite-rms"};

/* The shipped model, its frontend and a CPU runner of max_batch utterances; dir gets the model's path. */
static void open_shipped(char *dir, size_t dirlen, int max_batch, rnnt_model **m, rnnt_frontend **fe, rnnt_runner **r)
{
    char err[512];
    model_dir("en-char-small", dir, dirlen);
    load(dir, m, fe);
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = max_batch;
    p.max_frames = 2000;
    if (rnnt_runner_create(*m, &p, r, err, sizeof err)) fail_msg("%s", err);
}

/* The shipped samples: WAV -> decoder -> frontend against the shipped .npy (features.py in float32), and
 * the same transcript from both. */
static void test_shipped_samples(void **state)
{
    char dir[1024], path[1400], err[512];
    rnnt_model *m;
    rnnt_frontend *fe;
    rnnt_runner *r;
    open_shipped(dir, sizeof dir, 2, &m, &fe, &r);
    const char *const *names = shipped_names;
    for (int i = 0; i < 4; i++) {
        float *x, *feats;
        size_t n;
        int T;
        rnnt_audio_info ai;
        snprintf(path, sizeof path, "%s/samples/%s.wav", dir, names[i]);
        if (rnnt_audio_load_file(path, 16000, NULL, &x, &n, &ai, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(ai.channels, 1);
        assert_false(ai.resampled);
        if (rnnt_frontend_compute_f32(fe, x, n, 0, &feats, &T, err, sizeof err)) fail_msg("%s", err);
        rnnt_npy ref;
        snprintf(path, sizeof path, "%s/samples/%s.npy", dir, names[i]);
        if (rnnt_npy_load(path, 80, 0, 0, &ref, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(T, ref.rows);
        double w = check_close(names[i], feats, ref.data, T, 80);
        rnnt_input in[2] = {{feats, T, 0}, {ref.data, ref.rows, 1}};
        rnnt_result res[2];
        memset(res, 0, sizeof res);
        if (rnnt_runner_decode(r, 2, in, res, NULL, err, sizeof err)) fail_msg("%s", err);
        if (strcmp(res[0].text, res[1].text)) fail_msg("%s: from audio '%s', from .npy '%s'", names[i], res[0].text, res[1].text);
        assert_int_equal(res[0].n_tokens, res[1].n_tokens);
        assert_memory_equal(res[0].tokens, res[1].tokens, sizeof(int) * (size_t)res[0].n_tokens);
        print_message("%s: %d frames, largest error %.3f of the tolerance (vs features.py float32), '%s'\n", names[i], T, w, res[0].text);
        rnnt_result_clear(&res[0]);
        rnnt_result_clear(&res[1]);
        rnnt_npy_free(&ref);
        free(feats);
        free(x);
    }
    rnnt_runner_free(r);
    rnnt_frontend_free(fe);
    rnnt_model_free(m);
}

/* rnnt_runner_decode_audio on the CPU backend (the CUDA path has its own test in tests/gpu): the four
 * shipped WAVs as float samples, one again as 16-bit PCM and one utterance shorter than a window, in one
 * batch, give exactly what rnnt_runner_decode gives on rnnt_frontend_compute_f32's features; two sample
 * pointers, none, or a NaN sample are refused with the batch untouched. */
static void test_decode_audio_cpu(void **state)
{
    char dir[1024], path[1400], err[512];
    rnnt_model *m;
    rnnt_frontend *fe;
    rnnt_runner *r;
    open_shipped(dir, sizeof dir, 6, &m, &fe, &r);
    const char *const *names = shipped_names;
    enum { N = 6 };
    float *x[4];
    size_t nx[4];
    rnnt_audio_input ain[N];
    memset(ain, 0, sizeof ain);
    for (int i = 0; i < 4; i++) {
        rnnt_audio_info ai;
        snprintf(path, sizeof path, "%s/samples/%s.wav", dir, names[i]);
        if (rnnt_audio_load_file(path, 16000, NULL, &x[i], &nx[i], &ai, err, sizeof err)) fail_msg("%s", err);
        ain[i].samples = x[i];
        ain[i].n_samples = nx[i];
    }
    /* 02 again as 16-bit PCM: its WAV is 16-bit, so x * 32768 is the file's integers exactly */
    int16_t *pcm = malloc(nx[1] * sizeof *pcm);
    assert_non_null(pcm);
    for (size_t k = 0; k < nx[1]; k++) pcm[k] = (int16_t)lrintf(x[1][k] * 32768.0f);
    ain[4].pcm16 = pcm;
    ain[4].n_samples = nx[1];
    ain[5].samples = x[0];
    ain[5].n_samples = 399; /* one sample short of a window: no frames */
    rnnt_result got[N], want[N];
    memset(got, 0, sizeof got);
    memset(want, 0, sizeof want);
    if (rnnt_runner_decode_audio(r, N, ain, got, NULL, NULL, err, sizeof err)) fail_msg("%s", err);
    float *feats[N];
    rnnt_input fin[N];
    for (int i = 0; i < N; i++) {
        int T;
        const float *src = i == 4 ? x[1] : ain[i].samples;
        if (rnnt_frontend_compute_f32(fe, src, ain[i].n_samples, 0, &feats[i], &T, err, sizeof err)) fail_msg("%s", err);
        fin[i] = (rnnt_input){feats[i], T, 0};
    }
    assert_int_equal(fin[5].frames, 0);
    if (rnnt_runner_decode(r, N, fin, want, NULL, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < N; i++) {
        assert_int_equal(got[i].status, RNNT_OK);
        assert_int_equal(got[i].n_tokens, want[i].n_tokens);
        assert_memory_equal(got[i].tokens, want[i].tokens, sizeof(int) * (size_t)got[i].n_tokens);
        assert_memory_equal(got[i].frames, want[i].frames, sizeof(int) * (size_t)got[i].n_tokens);
        assert_string_equal(got[i].text ? got[i].text : "", want[i].text ? want[i].text : "");
    }
    assert_int_equal(got[5].n_tokens, 0);
    assert_string_equal(got[4].text, got[1].text);
    print_message("decode_audio on the CPU: %d utterances = decode of the frontend's features ('%s')\n", N, got[1].text);
    for (int i = 0; i < N; i++) {
        rnnt_result_clear(&got[i]);
        rnnt_result_clear(&want[i]);
        free(feats[i]);
    }
    /* refused: both pointers, none, a NaN sample */
    rnnt_audio_input bad = {x[0], pcm, 1000, 0};
    assert_int_equal(rnnt_runner_decode_audio(r, 1, &bad, got, NULL, NULL, err, sizeof err), RNNT_ERR_INVALID);
    bad = (rnnt_audio_input){NULL, NULL, 1000, 0};
    assert_int_equal(rnnt_runner_decode_audio(r, 1, &bad, got, NULL, NULL, err, sizeof err), RNNT_ERR_INVALID);
    float saved = x[0][500];
    x[0][500] = NAN;
    bad = (rnnt_audio_input){x[0], NULL, nx[0], 0};
    assert_int_not_equal(rnnt_runner_decode_audio(r, 1, &bad, got, NULL, NULL, err, sizeof err), RNNT_OK);
    assert_non_null(strstr(err, "inite"));
    x[0][500] = saved;
    free(pcm);
    for (int i = 0; i < 4; i++) free(x[i]);
    rnnt_runner_free(r);
    rnnt_frontend_free(fe);
    rnnt_model_free(m);
}

static void test_feed_errors(void **state)
{
    char dir[1024], err[512];
    model_dir("en-char-small", dir, sizeof dir);
    rnnt_model *m;
    rnnt_frontend *fe;
    load(dir, &m, &fe);
    enum { N = 2000 };
    float x[N], out[20 * 80], ref[20 * 80];
    uint64_t rs = 5;
    for (int i = 0; i < N; i++) x[i] = 0.3f * tu_randu(&rs);
    rnnt_frontend_stream *s;
    if (rnnt_frontend_stream_create(fe, 0, &s, err, sizeof err)) fail_msg("%s", err);
    int T, made;
    assert_int_equal(rnnt_frontend_feed_f32(s, x, N, ref, 20, &T, err, sizeof err), RNNT_OK);
    assert_int_equal(T, 1 + (N - 400) / 160);
    rnnt_frontend_stream_reset(s);
    /* a NaN in a chunk: refused, nothing consumed */
    float bad[300];
    memcpy(bad, x, sizeof bad);
    bad[123] = NAN;
    assert_int_equal(rnnt_frontend_feed_f32(s, x, 500, out, 20, &made, err, sizeof err), RNNT_OK);
    assert_int_equal(made, 1);
    assert_int_equal(rnnt_frontend_feed_f32(s, bad, 300, out + 80, 20, &made, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "sample 123 is not finite"));
    assert_int_equal(made, 0);
    /* too little room: refused, nothing consumed */
    assert_int_equal(rnnt_frontend_feed_f32(s, x + 500, 1500, out + 80, 2, &made, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_int_equal(made, 0);
    assert_int_equal(rnnt_frontend_feed_f32(s, x + 500, 1500, out + 80, 19, &made, err, sizeof err), RNNT_OK);
    assert_int_equal(made + 1, T);
    assert_memory_equal(out, ref, sizeof(float) * (size_t)T * 80);
    rnnt_frontend_stream_free(s);
    /* the whole-utterance call: the frame cap, and non-finite input even when too short for a frame */
    float *feats;
    assert_int_equal(rnnt_frontend_compute_f32(fe, x, N, 5, &feats, &T, err, sizeof err), RNNT_ERR_TOO_LARGE);
    assert_null(feats);
    assert_int_equal(rnnt_frontend_compute_f32(fe, bad, 300, 0, &feats, &T, err, sizeof err), RNNT_ERR_INVALID);
    assert_int_equal(rnnt_frontend_compute_f32(fe, x, 0, 0, &feats, &T, err, sizeof err), RNNT_OK);
    assert_int_equal(T, 0);
    assert_null(feats);
    rnnt_frontend_free(fe);
    rnnt_model_free(m);
}

static char *yaml_with(const char *from, const char *to)
{
    const char *at = strstr(tu_small_yaml, from);
    assert_non_null(at);
    size_t n = strlen(tu_small_yaml) + strlen(to) + 1;
    char *y = malloc(n);
    snprintf(y, n, "%.*s%s%s", (int)(at - tu_small_yaml), tu_small_yaml, to, at + strlen(from));
    return y;
}

/* Unsupported or unknown frontend settings stop the load, naming the key. */
static void test_load_errors(void **state)
{
    static const struct { const char *from, *to, *want; } cases[] = {
        {"  window: hann\n", "  window: hann\n  pad_mode: reflect\n", "frontend.pad_mode: only allowed with center: true"},
        {"  window: hann\n", "  window: hann\n  center: true\n  pad_mode: edge\n", "pad_mode"},
        {"  window: hann\n", "  window: hann\n  log_guard: clamp\n", "log_guard"},
        {"  window: hann\n", "  window: hann\n  length: floor\n", "length"},
        {"  window: hann\n", "  window: hann\n  spectrum_offset: 2.0\n", "spectrum_offset"},
        {"  window: hann\n", "  window: blackman\n", "window"},
        {"  window: hann\n", "  window: hann\n  lifter: 22\n", "lifter"},
        {"  mel_scale: slaney\n", "  mel_scale: kaldi\n", "mel_scale"},
        {"  window: hann\n", "  window: hann\n  mel_norm: area\n", "mel_norm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = tu_tmpdir(), err[512];
        char *y = yaml_with(cases[i].from, cases[i].to);
        tu_write_small_model(dir, 3, y);
        rnnt_model *m = NULL;
        rnnt_status st = rnnt_model_load(dir, &m, err, sizeof err);
        if (st == RNNT_OK) fail_msg("case %zu loaded", i);
        assert_int_equal(st, RNNT_ERR_FORMAT);
        if (!strstr(err, cases[i].want) || !strstr(err, "model.yaml:")) fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].want);
        free(y);
        tu_rmdir(dir);
    }
}

/* Dither: reproducible per seed, chunking-invariant, different between seeds, lifts silence off the floor. */
static void test_dither(void **state)
{
    char *dir = tu_tmpdir(), err[512];
    char *y = yaml_with("  window: hann\n", "  window: hann\n  dither: 0.001\n");
    tu_write_small_model(dir, 3, y);
    rnnt_model *m;
    rnnt_frontend *fe;
    load(dir, &m, &fe);
    enum { N = 4000, M = 6 };
    static float zeros[N], a[40 * M], b[40 * M], c[40 * M];
    int T, Tb, Tc;
    rnnt_frontend_stream *s;
    if (rnnt_frontend_stream_create(fe, 42, &s, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(rnnt_frontend_feed_f32(s, zeros, N, a, 40, &T, err, sizeof err), RNNT_OK);
    rnnt_frontend_stream_reset(s);
    int made, got = 0;
    for (int pos = 0; pos < N; pos += 333) {
        int k = N - pos < 333 ? N - pos : 333;
        assert_int_equal(rnnt_frontend_feed_f32(s, zeros + pos, (size_t)k, b + got * M, 40 - got, &made, err, sizeof err), RNNT_OK);
        got += made;
    }
    Tb = got;
    rnnt_frontend_stream_free(s);
    assert_int_equal(T, Tb);
    assert_memory_equal(a, b, sizeof(float) * (size_t)T * M);
    if (rnnt_frontend_stream_create(fe, 43, &s, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(rnnt_frontend_feed_f32(s, zeros, N, c, 40, &Tc, err, sizeof err), RNNT_OK);
    rnnt_frontend_stream_free(s);
    assert_int_equal(Tc, T);
    assert_true(memcmp(a, c, sizeof(float) * (size_t)T * M) != 0);
    /* white noise of std 1e-3 over a 400-sample Hann window: mel energies around 1e-6 * sum(w^2) ~ 1e-4,
       far above the 1e-10 floor */
    for (int i = 0; i < T * M; i++) {
        assert_true(isfinite(a[i]));
        assert_true(a[i] > logf(1e-10f) + 5.0f);
    }
    rnnt_frontend_free(fe);
    rnnt_model_free(m);
    free(y);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),     cmocka_unit_test(test_shipped_samples), cmocka_unit_test(test_decode_audio_cpu),
        cmocka_unit_test(test_feed_errors),
        cmocka_unit_test(test_load_errors), cmocka_unit_test(test_dither),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
