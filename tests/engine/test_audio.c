/* test_audio.c — audio decoding (engine/audio.c): every format libsndfile writes here (encoded in memory
 * by the test from a shipped sample), decoded exactly (lossless) or to the same transcript (lossy);
 * channels mixed, rates resampled; hostile bodies (truncated RIFF, lying chunk sizes, 0 channels, absurd
 * rates, a header claiming hours in a few bytes, zero samples, non-audio bytes, NaN samples, caps) give
 * a clear status and message; and a bounded mutation run over every container that must never crash,
 * hang or leak (ASan/UBSan in CI). */
#include <math.h>
#include <setjmp.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rnnt_audio.h"
#include "model.h"
#include "test_util.h"

/* ---- libsndfile writing into memory ---- */

typedef struct {
    unsigned char *d;
    sf_count_t len, cap, pos;
} wbuf;

static sf_count_t w_len(void *u) { return ((wbuf *)u)->len; }
static sf_count_t w_tell(void *u) { return ((wbuf *)u)->pos; }
static sf_count_t w_seek(sf_count_t off, int whence, void *u)
{
    wbuf *b = u;
    sf_count_t p = (whence == SEEK_SET ? 0 : whence == SEEK_CUR ? b->pos : b->len) + off;
    if (p < 0) return -1;
    b->pos = p;
    return p;
}
static sf_count_t w_read(void *dst, sf_count_t n, void *u)
{
    wbuf *b = u;
    if (b->pos >= b->len) return 0;
    if (n > b->len - b->pos) n = b->len - b->pos;
    memcpy(dst, b->d + b->pos, (size_t)n);
    b->pos += n;
    return n;
}
static sf_count_t w_write(const void *src, sf_count_t n, void *u)
{
    wbuf *b = u;
    if (b->pos + n > b->cap) {
        sf_count_t nc = (b->pos + n) * 2;
        b->d = realloc(b->d, (size_t)nc);
        assert_non_null(b->d);
        b->cap = nc;
    }
    if (b->pos > b->len) memset(b->d + b->len, 0, (size_t)(b->pos - b->len));
    memcpy(b->d + b->pos, src, (size_t)n);
    b->pos += n;
    if (b->pos > b->len) b->len = b->pos;
    return n;
}

/* Encodes frames x [n, channels] at rate; returns 0 and the bytes, or -1 when libsndfile cannot write it.
 * Integer and compressed formats are written from 16-bit values (x * 32768, exact for samples read from
 * 16-bit files): libsndfile scales float to int by 32767 on writing but int to float by 1/32768 on reading. */
static int encode(const float *x, size_t n, int channels, int rate, int format, unsigned char **out, size_t *len)
{
    int sub = format & SF_FORMAT_SUBMASK, as_float = sub == SF_FORMAT_FLOAT || sub == SF_FORMAT_DOUBLE;
    SF_INFO si = {.samplerate = rate, .channels = channels, .format = format};
    if (!sf_format_check(&si)) return -1;
    wbuf b = {0};
    SF_VIRTUAL_IO vio = {w_len, w_seek, w_read, w_write, w_tell};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_WRITE, &si, &b);
    if (!sf) { free(b.d); return -1; }
    if (as_float) {
        if (sf_writef_float(sf, x, (sf_count_t)n) != (sf_count_t)n) fail_msg("sf_writef_float: %s", sf_strerror(sf));
    } else {
        size_t k = n * (size_t)channels;
        short *p = malloc(sizeof(short) * (k ? k : 1));
        for (size_t i = 0; i < k; i++) {
            float v = roundf(x[i] * 32768.0f);
            p[i] = (short)(v > 32767.0f ? 32767 : v < -32768.0f ? -32768 : v);
        }
        if (sf_writef_short(sf, p, (sf_count_t)n) != (sf_count_t)n) fail_msg("sf_writef_short: %s", sf_strerror(sf));
        free(p);
    }
    sf_close(sf);
    *out = b.d;
    *len = (size_t)b.len;
    return 0;
}

/* ---- shared fixtures: the shipped model, a sample and its transcript from .npy ---- */

static rnnt_model *model;
static rnnt_frontend *fe;
static rnnt_runner *runner;
static float *sample;
static size_t sample_n;
static char *sample_text;

static char *transcribe(const float *x, size_t n)
{
    char err[512];
    float *feats;
    int T;
    if (rnnt_frontend_compute_f32(fe, x, n, 0, &feats, &T, err, sizeof err)) fail_msg("%s", err);
    rnnt_input in = {feats, T, 0};
    rnnt_result res = {0};
    if (rnnt_runner_decode(runner, 1, &in, &res, NULL, err, sizeof err)) fail_msg("%s", err);
    char *t = strdup(res.text);
    rnnt_result_clear(&res);
    free(feats);
    return t;
}

static int setup(void **state)
{
    char dir[1024], path[1200], err[512];
    snprintf(dir, sizeof dir, "%s/../../models/en-char-small", tu_data_dir());
    if (rnnt_model_load(dir, &model, err, sizeof err)) fail_msg("%s", err);
    if (rnnt_frontend_create(model, &fe, err, sizeof err)) fail_msg("%s", err);
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = 1;
    p.max_frames = 3000;
    if (rnnt_runner_create(model, &p, &runner, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/samples/01-flite-kal16.wav", dir);
    if (rnnt_audio_load_file(path, 16000, NULL, &sample, &sample_n, NULL, err, sizeof err)) fail_msg("%s", err);
    sample_text = transcribe(sample, sample_n);
    assert_string_equal(sample_text, "they entered into the land of cainan");   /* samples.tsv's model_output */
    return 0;
}

static int teardown(void **state)
{
    free(sample_text);
    free(sample);
    rnnt_runner_free(runner);
    rnnt_frontend_free(fe);
    rnnt_model_free(model);
    return 0;
}

/* ---- formats ---- */

static void test_formats(void **state)
{
    static const struct {
        const char *name, *container;
        int format, lossless, required;
    } F[] = {
        {"WAV 16-bit", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 1},
        {"WAV 24-bit", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_24, 1, 1},
        {"WAV 32-bit", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_32, 1, 1},
        {"WAV float", "wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 1},
        {"WAV double", "wav", SF_FORMAT_WAV | SF_FORMAT_DOUBLE, 1, 1},
        {"WAV 8-bit", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_U8, 0, 1},
        {"WAVEX 16-bit", "wav", SF_FORMAT_WAVEX | SF_FORMAT_PCM_16, 1, 1},
        {"RF64 16-bit", "rf64", SF_FORMAT_RF64 | SF_FORMAT_PCM_16, 1, 1},
        {"FLAC 16-bit", "flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1, 1},
        {"FLAC 24-bit", "flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_24, 1, 1},
        {"AIFF 16-bit", "aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_16, 1, 1},
        {"AU 16-bit", "au", SF_FORMAT_AU | SF_FORMAT_PCM_16, 1, 1},
        {"CAF 16-bit", "caf", SF_FORMAT_CAF | SF_FORMAT_PCM_16, 1, 1},
        {"W64 16-bit", "w64", SF_FORMAT_W64 | SF_FORMAT_PCM_16, 1, 1},
        {"Ogg Vorbis", "ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 0, 1},
        {"Ogg Opus", "ogg", SF_FORMAT_OGG | SF_FORMAT_OPUS, 0, 1},
        {"MP3", "mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 0, 0},
    };
    char err[512];
    for (size_t i = 0; i < sizeof F / sizeof *F; i++) {
        unsigned char *buf;
        size_t len;
        if (encode(sample, sample_n, 1, 16000, F[i].format, &buf, &len)) {
            if (F[i].required) fail_msg("%s: %s cannot write it", F[i].name, rnnt_audio_library_version());
            print_message("%-12s not supported by %s: skipped\n", F[i].name, rnnt_audio_library_version());
            continue;
        }
        assert_string_equal(rnnt_audio_sniff(buf, len), F[i].container);
        float *x;
        size_t n;
        rnnt_audio_info ai;
        if (rnnt_audio_decode(F[i].name, buf, len, 16000, NULL, &x, &n, &ai, err, sizeof err)) fail_msg("%s", err);
        assert_int_equal(ai.channels, 1);
        assert_int_equal(ai.sample_rate, 16000);
        assert_false(ai.resampled);
        assert_string_equal(ai.container, F[i].container);
        double maxd = 0;
        if (F[i].lossless) {
            /* 16-bit values are exact in every lossless format here: the same samples, bit for bit */
            assert_int_equal(n, sample_n);
            if (memcmp(x, sample, n * sizeof(float))) fail_msg("%s: samples differ from the WAV's", F[i].name);
        } else {
            /* lossy codecs: encoder delay and padding may change the length a little */
            assert_true(n + 4000 > sample_n && n < sample_n + 4000);
            for (size_t k = 0; k < n && k < sample_n; k++) maxd = fmax(maxd, fabs(x[k] - sample[k]));
        }
        char *t = transcribe(x, n);
        print_message("%-12s %7zu bytes, %zu samples, %s: '%s'\n", F[i].name, len, n, ai.codec, t);
        /* lossless formats must give the transcript of the .npy; lossy ones are reported (a transcript
           of a 3.5 M-parameter model can move with codec noise) but must decode to something */
        if (F[i].lossless) assert_string_equal(t, sample_text);
        else assert_true(strlen(t) > 10);
        free(t);
        free(x);
        free(buf);
    }
}

static void test_channels_and_rates(void **state)
{
    char err[512];
    size_t n = sample_n;
    /* stereo: the same signal twice mixes to itself exactly; L = -R mixes to silence */
    float *st = malloc(sizeof(float) * 2 * n);
    for (size_t i = 0; i < n; i++) st[2 * i] = st[2 * i + 1] = sample[i];
    unsigned char *buf;
    size_t len;
    float *x;
    size_t nx;
    rnnt_audio_info ai;
    assert_int_equal(encode(st, n, 2, 16000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, &buf, &len), 0);
    if (rnnt_audio_decode("stereo", buf, len, 16000, NULL, &x, &nx, &ai, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ai.channels, 2);
    assert_int_equal(nx, n);
    assert_memory_equal(x, sample, n * sizeof(float));
    free(x);
    free(buf);
    for (size_t i = 0; i < n; i++) st[2 * i + 1] = -sample[i];
    assert_int_equal(encode(st, n, 2, 16000, SF_FORMAT_WAV | SF_FORMAT_FLOAT, &buf, &len), 0);
    if (rnnt_audio_decode("antiphase", buf, len, 16000, NULL, &x, &nx, &ai, err, sizeof err)) fail_msg("%s", err);
    for (size_t i = 0; i < nx; i++) assert_true(x[i] == 0.0f);
    free(x);
    free(buf);
    free(st);
    /* 6 channels of 44.1 kHz FLAC: resampled back to 16 kHz by libsoxr; the same transcript */
    size_t n44 = (size_t)ceil(n * 44100.0 / 16000.0) + 64, done_in, done_out;
    float *up = malloc(sizeof(float) * n44);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    assert_null(soxr_oneshot(16000, 44100, 1, sample, n, &done_in, up, n44, &done_out, &io, &q, NULL));
    float *six = malloc(sizeof(float) * 6 * done_out);
    for (size_t i = 0; i < done_out; i++)
        for (int c = 0; c < 6; c++) six[6 * i + c] = up[i] * (c < 3 ? 1.0f : 0.5f);
    assert_int_equal(encode(six, done_out, 6, 44100, SF_FORMAT_FLAC | SF_FORMAT_PCM_24, &buf, &len), 0);
    if (rnnt_audio_decode("44k1-6ch", buf, len, 16000, NULL, &x, &nx, &ai, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ai.sample_rate, 44100);
    assert_int_equal(ai.channels, 6);
    assert_true(ai.resampled);
    assert_true(nx + 3 >= n && nx <= n + 3);
    /* the mix is 0.75 x: scale back for the transcript */
    for (size_t i = 0; i < nx; i++) x[i] /= 0.75f;
    char *t = transcribe(x, nx);
    print_message("44.1 kHz, 6 channels, FLAC 24-bit: %zu samples at 16 kHz: '%s'\n", nx, t);
    assert_string_equal(t, sample_text);
    free(t);
    free(x);
    free(buf);
    free(six);
    free(up);
    /* 8 kHz: upsampled to 16 kHz (band-limited, so only the length is checked) */
    float *down = malloc(sizeof(float) * (n / 2 + 64));
    assert_null(soxr_oneshot(16000, 8000, 1, sample, n, &done_in, down, n / 2 + 64, &done_out, &io, &q, NULL));
    assert_int_equal(encode(down, done_out, 1, 8000, SF_FORMAT_WAV | SF_FORMAT_PCM_16, &buf, &len), 0);
    if (rnnt_audio_decode("8k", buf, len, 16000, NULL, &x, &nx, &ai, err, sizeof err)) fail_msg("%s", err);
    assert_true(ai.resampled);
    assert_true(nx + 4 >= n && nx <= n + 4);
    free(x);
    free(buf);
    free(down);
}

/* ---- hostile bodies ---- */

/* A canonical 44-byte-header PCM WAV of n 16-bit samples (values i % 200). */
static unsigned char *wav16(int channels, uint32_t rate, uint32_t n, size_t *len)
{
    size_t data = (size_t)n * 2 * (channels > 0 ? channels : 1);
    unsigned char *b = calloc(1, 44 + data);
    uint32_t u;
    uint16_t h;
    memcpy(b, "RIFF", 4);
    u = (uint32_t)(36 + data); memcpy(b + 4, &u, 4);
    memcpy(b + 8, "WAVEfmt ", 8);
    u = 16; memcpy(b + 16, &u, 4);
    h = 1; memcpy(b + 20, &h, 2);
    h = (uint16_t)channels; memcpy(b + 22, &h, 2);
    memcpy(b + 24, &rate, 4);
    u = rate * 2u * (uint32_t)channels; memcpy(b + 28, &u, 4);
    h = (uint16_t)(2 * channels); memcpy(b + 32, &h, 2);
    h = 16; memcpy(b + 34, &h, 2);
    memcpy(b + 36, "data", 4);
    u = (uint32_t)data; memcpy(b + 40, &u, 4);
    for (size_t i = 0; i < data / 2; i++) { int16_t v = (int16_t)(i % 200); memcpy(b + 44 + 2 * i, &v, 2); }
    *len = 44 + data;
    return b;
}

static rnnt_audio_info last_info;

static rnnt_status dec(const char *name, const void *buf, size_t len, const rnnt_audio_limits *lim, size_t *n, char *err, size_t errlen)
{
    float *x = NULL;
    size_t nx = 0;
    memset(&last_info, 0, sizeof last_info);
    rnnt_status st = rnnt_audio_decode(name, buf, len, 16000, lim, &x, &nx, &last_info, err, errlen);
    if (st == RNNT_OK) {
        assert_non_null(x);
        for (size_t i = 0; i < nx; i++) assert_true(isfinite(x[i]));
    } else {
        assert_null(x);
        assert_true(strlen(err) > 0);
    }
    free(x);
    if (n) *n = nx;
    return st;
}

#define EXPECT(st_, want_st, frag)                                                                              \
    do {                                                                                                        \
        rnnt_status got_ = (st_);                                                                               \
        if (got_ != (want_st) || !strstr(err, frag)) fail_msg("line %d: status %s '%s', expected %s with '%s'", __LINE__, \
                                                              rnnt_status_str(got_), err, rnnt_status_str(want_st), frag); \
    } while (0)

static void test_hostile(void **state)
{
    char err[512];
    size_t len, n;
    unsigned char *w = wav16(1, 16000, 1000, &len);
    err[0] = 0;
    EXPECT(dec("ok", w, len, NULL, &n, err, sizeof err), RNNT_OK, "");
    assert_int_equal(n, 1000);
    EXPECT(dec("empty", w, 0, NULL, NULL, err, sizeof err), RNNT_ERR_INVALID, "empty");
    EXPECT(dec("text", "hello, this is not audio at all", 31, NULL, NULL, err, sizeof err), RNNT_ERR_FORMAT, "not a recognised audio file");
    /* truncated RIFF: the header cut short */
    for (size_t cut = 12; cut < 44; cut += 7) {
        rnnt_status st = dec("truncated", w, cut, NULL, NULL, err, sizeof err);
        if (st != RNNT_ERR_FORMAT && st != RNNT_ERR_INVALID) fail_msg("truncated at %zu: %s '%s'", cut, rnnt_status_str(st), err);
    }
    /* a header with no sample data: zero samples */
    EXPECT(dec("header only", w, 44, NULL, NULL, err, sizeof err), RNNT_ERR_INVALID, "no audio samples");
    size_t l0;
    unsigned char *w0 = wav16(1, 16000, 0, &l0);
    EXPECT(dec("zero samples", w0, l0, NULL, NULL, err, sizeof err), RNNT_ERR_INVALID, "no audio samples");
    free(w0);
    /* lying chunk sizes: data and RIFF sizes far past the end; only what is there is decoded */
    unsigned char *lie = malloc(len);
    memcpy(lie, w, len);
    uint32_t big = 0x7ffffff0u;
    memcpy(lie + 40, &big, 4);
    memcpy(lie + 4, &big, 4);
    rnnt_status st = dec("lying sizes", lie, len, NULL, &n, err, sizeof err);
    if (!(st == RNNT_OK && last_info.frames <= 1000) && st != RNNT_ERR_FORMAT && st != RNNT_ERR_TOO_LARGE) fail_msg("lying sizes: %s '%s' n %zu", rnnt_status_str(st), err, n);
    /* a header claiming hours in a few bytes: 0x7ffffff0 bytes of data at 1 kHz = 298 h (the limit is 1 h)
       in a 100-byte body. libsndfile bounds a WAV's data chunk by the bytes present, so this decodes the
       28 samples that are there (resampled to 16 kHz) and allocates nothing for the claim. */
    uint32_t slow = 1000, slow_bps = 2000;
    memcpy(lie + 24, &slow, 4);
    memcpy(lie + 28, &slow_bps, 4);
    st = dec("hours", lie, 100, NULL, &n, err, sizeof err);
    if (!(st == RNNT_OK && last_info.frames <= 28) && st != RNNT_ERR_TOO_LARGE && st != RNNT_ERR_FORMAT)
        fail_msg("hours: %s '%s', %lld frames", rnnt_status_str(st), st ? err : "", last_info.frames);
    free(lie);
    /* 0 channels, 100000 channels, absurd rates */
    unsigned char *b = malloc(len);
    uint16_t ch;
    uint32_t rate;
    memcpy(b, w, len); ch = 0; memcpy(b + 22, &ch, 2);
    EXPECT(dec("0 channels", b, len, NULL, NULL, err, sizeof err), RNNT_ERR_FORMAT, "0 channels");
    memcpy(b, w, len); ch = 1000; memcpy(b + 22, &ch, 2);
    st = dec("1000 channels", b, len, NULL, NULL, err, sizeof err);
    if (st != RNNT_ERR_FORMAT) fail_msg("1000 channels: %s '%s'", rnnt_status_str(st), err);
    memcpy(b, w, len); rate = 1; memcpy(b + 24, &rate, 4);
    EXPECT(dec("1 Hz", b, len, NULL, NULL, err, sizeof err), RNNT_ERR_FORMAT, "sample rate 1 Hz");
    memcpy(b, w, len); rate = 2000000000u; memcpy(b + 24, &rate, 4);
    st = dec("2 GHz", b, len, NULL, NULL, err, sizeof err);
    if (st != RNNT_ERR_FORMAT || !strstr(err, "rate")) fail_msg("2 GHz: %s '%s'", rnnt_status_str(st), err);
    free(b);
    /* caps: bytes, and seconds from the header before decoding */
    rnnt_audio_limits lim = {.max_bytes = 1000};
    EXPECT(dec("bytes", w, len, &lim, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE, "more than the limit of 1000");
    free(w);
    unsigned char *flac;
    size_t flen;
    assert_int_equal(encode(sample, sample_n, 1, 16000, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, &flac, &flen), 0);
    lim = (rnnt_audio_limits){.max_seconds = 1.0};
    EXPECT(dec("seconds", flac, flen, &lim, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE, "the header says 2.0 s of audio, more than the limit of 1.0 s");
    /* a FLAC header claiming 10 hours (STREAMINFO total samples) over a 2-second body */
    unsigned char *fl = malloc(flen);
    memcpy(fl, flac, flen);
    assert_memory_equal(fl, "fLaC", 4);
    uint64_t total = 16000ull * 36000; /* 36 bits, at byte 8 + 13 of the first metadata block's data, low 4 bits of byte 21 */
    unsigned char *si = fl + 8;
    si[13] = (unsigned char)((si[13] & 0xf0) | ((total >> 32) & 0x0f));
    si[14] = (unsigned char)(total >> 24);
    si[15] = (unsigned char)(total >> 16);
    si[16] = (unsigned char)(total >> 8);
    si[17] = (unsigned char)total;
    EXPECT(dec("10 h FLAC", fl, flen, NULL, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE, "the header says 36000.0 s of audio");
    free(fl);
    /* an Ogg stream, whose length is found while decoding: the cap applies block by block */
    unsigned char *ogg;
    size_t olen;
    assert_int_equal(encode(sample, sample_n, 1, 16000, SF_FORMAT_OGG | SF_FORMAT_VORBIS, &ogg, &olen), 0);
    lim = (rnnt_audio_limits){.max_seconds = 0.5};
    st = dec("ogg seconds", ogg, olen, &lim, NULL, err, sizeof err);
    if (st != RNNT_ERR_TOO_LARGE) fail_msg("ogg over the cap: %s '%s'", rnnt_status_str(st), err);
    free(ogg);
    free(flac);
    /* NaN samples in a float WAV */
    float f[2000];
    for (int i = 0; i < 2000; i++) f[i] = 0.01f * (float)(i % 7);
    f[1234] = NAN;
    unsigned char *fw;
    size_t fwl;
    assert_int_equal(encode(f, 2000, 1, 16000, SF_FORMAT_WAV | SF_FORMAT_FLOAT, &fw, &fwl), 0);
    EXPECT(dec("nan", fw, fwl, NULL, NULL, err, sizeof err), RNNT_ERR_FORMAT, "sample 1234 is not finite");
    free(fw);
    /* MPEG sync bytes followed by noise */
    unsigned char junk[4096];
    uint64_t rs = 99;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)tu_rand_next(&rs);
    junk[0] = 0xff;
    junk[1] = 0xfb;
    st = dec("mp3 junk", junk, sizeof junk, NULL, NULL, err, sizeof err);
    print_message("MPEG sync + noise: %s '%s'\n", rnnt_status_str(st), st ? err : "");
}

/* Bounded mutations of valid bodies of every container: truncations and byte flips. Whatever the status,
 * nothing crashes, hangs or leaks, and decoded samples are finite. */
static void test_mutations(void **state)
{
    static const int formats[] = {SF_FORMAT_WAV | SF_FORMAT_PCM_16, SF_FORMAT_WAV | SF_FORMAT_FLOAT, SF_FORMAT_FLAC | SF_FORMAT_PCM_16,
                                  SF_FORMAT_OGG | SF_FORMAT_VORBIS, SF_FORMAT_OGG | SF_FORMAT_OPUS,
                                  SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, SF_FORMAT_AIFF | SF_FORMAT_PCM_16};
    char err[512];
    size_t n = 8000; /* half a second keeps each decode short */
    uint64_t rs = 12345;
    int counts[5] = {0};
    rnnt_audio_limits lim = {.max_seconds = 5.0};
    /* RNNT_AUDIO_MUTATIONS=N runs N per container instead of 120 (a longer hunt outside CI) */
    int iters = getenv("RNNT_AUDIO_MUTATIONS") ? atoi(getenv("RNNT_AUDIO_MUTATIONS")) : 120;
    for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
        unsigned char *buf;
        size_t len;
        if (encode(sample + 8000, n, 1, 16000, formats[f], &buf, &len)) continue;
        unsigned char *m = malloc(len);
        for (int it = 0; it < iters; it++) {
            memcpy(m, buf, len);
            size_t ml = len;
            int kind = (int)(tu_rand_next(&rs) % 3);
            if (kind == 0) ml = (size_t)(tu_rand_next(&rs) % len);
            else {
                int flips = 1 + (int)(tu_rand_next(&rs) % 8);
                /* mostly in the headers, where the parsers are */
                for (int k = 0; k < flips; k++) {
                    size_t at = (size_t)(tu_rand_next(&rs) % (kind == 1 && len > 256 ? 256 : len));
                    m[at] = (unsigned char)tu_rand_next(&rs);
                }
            }
            rnnt_status st = dec("mutant", m, ml, &lim, NULL, err, sizeof err);
            counts[st == RNNT_OK ? 0 : st == RNNT_ERR_FORMAT ? 1 : st == RNNT_ERR_INVALID ? 2 : st == RNNT_ERR_TOO_LARGE ? 3 : 4]++;
        }
        free(m);
        free(buf);
    }
    print_message("mutations: %d decoded, %d malformed, %d empty, %d over a cap, %d other\n", counts[0], counts[1], counts[2], counts[3], counts[4]);
    assert_int_equal(counts[4], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_channels_and_rates),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
