/* audio.c — encoded audio to mono float samples at the model's rate (rnnt_audio.h): libsndfile from memory
 * through its virtual I/O, libsoxr for the rate. Hostile bodies meet the caps before any large
 * allocation: the header's duration, channels and rate are checked first, and the decoded length is
 * checked block by block for streams whose header does not state it (MP3, Ogg) or states too little. */
#include <errno.h>
#include <math.h>
#include <ogg/ogg.h>
#include <soxr.h>
#include <sndfile.h>
#include <vorbis/codec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnt_audio.h"
#include "status.h"

#define DEFAULT_MAX_BYTES ((size_t)256 << 20)
#define DEFAULT_MAX_SECONDS 3600.0
#define DEFAULT_MAX_CHANNELS 64
#define MIN_RATE 1000
#define MAX_RATE 384000
#define BLOCK_FRAMES 4096

int rnnt_audio_is_npy(const void *data, size_t len) { return len >= 6 && !memcmp(data, "\x93NUMPY", 6); }

const char *rnnt_audio_sniff(const void *data, size_t len)
{
    const unsigned char *b = data;
    if (len >= 12 && (!memcmp(b, "RIFF", 4) || !memcmp(b, "RIFX", 4)) && !memcmp(b + 8, "WAVE", 4)) return "wav";
    if (len >= 12 && !memcmp(b, "RF64", 4) && !memcmp(b + 8, "WAVE", 4)) return "rf64";
    if (len >= 4 && !memcmp(b, "riff", 4)) return "w64";
    if (len >= 4 && !memcmp(b, "fLaC", 4)) return "flac";
    if (len >= 4 && !memcmp(b, "OggS", 4)) return "ogg";
    if (len >= 12 && !memcmp(b, "FORM", 4) && (!memcmp(b + 8, "AIFF", 4) || !memcmp(b + 8, "AIFC", 4))) return "aiff";
    if (len >= 4 && !memcmp(b, ".snd", 4)) return "au";
    if (len >= 4 && !memcmp(b, "caff", 4)) return "caf";
    if (len >= 3 && !memcmp(b, "ID3", 3)) return "mp3";
    /* an MPEG audio frame header: 11 sync bits, a version other than 'reserved', layer I-III */
    if (len >= 2 && b[0] == 0xff && (b[1] & 0xe0) == 0xe0 && (b[1] & 0x18) != 0x08 && (b[1] & 0x06) != 0) return "mp3";
    return NULL;
}

const char *rnnt_audio_library_version(void) { return sf_version_string(); }

/* ---- libsndfile virtual I/O over a memory buffer --------------------------------------------- */

typedef struct {
    const unsigned char *data;
    sf_count_t len, pos;
} membuf;

static sf_count_t vio_len(void *u) { return ((membuf *)u)->len; }

static sf_count_t vio_seek(sf_count_t off, int whence, void *u)
{
    membuf *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->len;
    sf_count_t p = base + off;
    if (p < 0 || p > m->len) return -1;
    m->pos = p;
    return p;
}

static sf_count_t vio_read(void *dst, sf_count_t count, void *u)
{
    membuf *m = u;
    if (count <= 0 || m->pos >= m->len) return 0;
    if (count > m->len - m->pos) count = m->len - m->pos;
    memcpy(dst, m->data + m->pos, (size_t)count);
    m->pos += count;
    return count;
}

static sf_count_t vio_write(const void *src, sf_count_t count, void *u) { return 0; }
static sf_count_t vio_tell(void *u) { return ((membuf *)u)->pos; }

/* ---- Ogg Vorbis headers ------------------------------------------------------------------------
 * libsndfile 1.2.0 leaks libvorbis's codec setup (5,784 bytes) whenever a Vorbis stream's headers fail
 * to parse (it returns without vorbis_info_clear): a hostile body per request would grow the daemon
 * without bound. So the three header packets of the first Vorbis stream are parsed here first, with
 * the same libvorbis, cleaning up on every path; libsndfile only sees streams whose headers parse. */

static rnnt_status check_vorbis_headers(const char *name, const void *data, size_t len, char *err, size_t errlen)
{
    ogg_sync_state oy;
    ogg_stream_state os;
    ogg_page og;
    ogg_packet op;
    vorbis_info vi;
    vorbis_comment vc;
    int have_stream = 0, headers = 0, is_vorbis = -1, bad = 0;
    ogg_sync_init(&oy);
    vorbis_info_init(&vi);
    vorbis_comment_init(&vc);
    char *buf = ogg_sync_buffer(&oy, (long)len);
    if (!buf) bad = 1;
    else {
        memcpy(buf, data, len);
        ogg_sync_wrote(&oy, (long)len);
    }
    while (!bad && headers < 3 && ogg_sync_pageout(&oy, &og) == 1) {
        if (!have_stream) {
            if (!ogg_page_bos(&og)) continue;
            ogg_stream_init(&os, ogg_page_serialno(&og));
            have_stream = 1;
        }
        if (ogg_page_serialno(&og) != os.serialno) continue;
        if (ogg_stream_pagein(&os, &og)) { bad = 1; break; }
        while (headers < 3) {
            int r = ogg_stream_packetout(&os, &op);
            if (r == 0) break;
            if (r < 0) { bad = 1; break; }
            if (is_vorbis < 0) is_vorbis = op.bytes >= 7 && !memcmp(op.packet, "\x01vorbis", 7);
            if (!is_vorbis) break;
            if (vorbis_synthesis_headerin(&vi, &vc, &op)) { bad = 1; break; }
            headers++;
        }
        if (is_vorbis == 0) break;
    }
    vorbis_comment_clear(&vc);
    vorbis_info_clear(&vi);
    if (have_stream) ogg_stream_clear(&os);
    ogg_sync_clear(&oy);
    if (is_vorbis == 0) return RNNT_OK; /* Opus or another codec: libsndfile's own checks apply */
    if (bad || headers < 3)
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: malformed Ogg Vorbis headers (%d of 3 parsed)", name, headers);
    return RNNT_OK;
}

/* ---- decoding ------------------------------------------------------------------------------- */

static rnnt_status resample(const char *name, float *in, size_t n, int from, int to, float **out, size_t *n_out, char *err, size_t errlen)
{
    *out = NULL;
    *n_out = 0;
    size_t cap = (size_t)ceil((double)n * to / from) + 64, done_in = 0, done_out = 0;
    float *o = malloc(sizeof(float) * cap);
    if (!o) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory resampling %zu samples", name, n);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_error_t e = soxr_oneshot(from, to, 1, in, n, &done_in, o, cap, &done_out, &io, &q, NULL);
    if (e) {
        free(o);
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: resampling %d Hz to %d Hz failed: %s", name, from, to, e);
    }
    *out = o;
    *n_out = done_out;
    return RNNT_OK;
}

rnnt_status rnnt_audio_decode(const char *name, const void *data, size_t len, int target_rate, const rnnt_audio_limits *limits,
                              float **samples, size_t *n, rnnt_audio_info *info, char *err, size_t errlen)
{
    *samples = NULL;
    *n = 0;
    size_t max_bytes = limits && limits->max_bytes ? limits->max_bytes : DEFAULT_MAX_BYTES;
    double max_s = limits && limits->max_seconds > 0 ? limits->max_seconds : DEFAULT_MAX_SECONDS;
    int max_ch = limits && limits->max_channels > 0 ? limits->max_channels : DEFAULT_MAX_CHANNELS;
    rnnt_audio_info inf;
    memset(&inf, 0, sizeof inf);
    if (len == 0) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: empty: no audio", name);
    if (len > max_bytes) return rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: %zu bytes, more than the limit of %zu", name, len, max_bytes);
    if (target_rate < MIN_RATE || target_rate > MAX_RATE)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: target sample rate %d Hz outside [%d, %d]", name, target_rate, MIN_RATE, MAX_RATE);
    if (!(inf.container = rnnt_audio_sniff(data, len)))
        return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT,
                            "%s: not a recognised audio file (no WAV, FLAC, Ogg, MP3, AIFF, AU, CAF or W64 signature at the start)", name);

    if (!strcmp(inf.container, "ogg")) {
        rnnt_status vs = check_vorbis_headers(name, data, len, err, errlen);
        if (vs) return vs;
    }
    membuf mb = {data, (sf_count_t)len, 0};
    SF_VIRTUAL_IO vio = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO si;
    memset(&si, 0, sizeof si);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &si, &mb);
    if (!sf) return rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: cannot decode as %s: %s", name, inf.container, sf_strerror(NULL));

    rnnt_status st = RNNT_OK;
    float *block = NULL, *mono = NULL;
    SF_FORMAT_INFO fi = {.format = si.format & SF_FORMAT_SUBMASK};
    if (sf_command(NULL, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name) snprintf(inf.codec, sizeof inf.codec, "%s", fi.name);
    inf.channels = si.channels;
    inf.sample_rate = si.samplerate;
    if (si.channels < 1 || si.channels > max_ch) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: %d channels, expected 1 to %d", name, si.channels, max_ch);
        goto out;
    }
    if (si.samplerate < MIN_RATE || si.samplerate > MAX_RATE) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: sample rate %d Hz outside [%d, %d]", name, si.samplerate, MIN_RATE, MAX_RATE);
        goto out;
    }
    /* The cap in frames at the body's rate; the header's claim (when it makes one) is checked before decoding. */
    long long max_frames = (long long)floor(max_s * si.samplerate);
    if (si.frames > max_frames && si.frames != SF_COUNT_MAX) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: the header says %.1f s of audio, more than the limit of %.1f s", name,
                          (double)si.frames / si.samplerate, max_s);
        goto out;
    }
    block = malloc(sizeof(float) * BLOCK_FRAMES * (size_t)si.channels);
    size_t cap = si.frames > 0 && si.frames != SF_COUNT_MAX ? (size_t)si.frames + 1 : BLOCK_FRAMES, got = 0;
    /* a header that claims more than the bytes can hold is not trusted for the allocation */
    if (cap > len + BLOCK_FRAMES) cap = len + BLOCK_FRAMES;
    mono = malloc(sizeof(float) * cap);
    if (!block || !mono) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", name); goto out; }
    for (;;) {
        sf_count_t r = sf_readf_float(sf, block, BLOCK_FRAMES);
        if (r <= 0) break;
        if ((long long)got + r > max_frames) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: more than the limit of %.1f s of audio", name, max_s);
            goto out;
        }
        if (got + (size_t)r > cap) {
            size_t nc = cap * 2 > got + (size_t)r ? cap * 2 : got + (size_t)r;
            float *g = realloc(mono, sizeof(float) * nc);
            if (!g) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", name); goto out; }
            mono = g;
            cap = nc;
        }
        int C = si.channels;
        for (sf_count_t f = 0; f < r; f++) {
            const float *fr = block + (size_t)f * C;
            float v;
            if (C == 1) v = fr[0];
            else {
                double acc = 0.0;
                for (int c = 0; c < C; c++) acc += fr[c];
                v = (float)(acc / C);
            }
            if (!isfinite(v)) {
                st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: sample %zu is not finite", name, got + (size_t)f);
                goto out;
            }
            mono[got + (size_t)f] = v;
        }
        got += (size_t)r;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR && got == 0) {
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: cannot decode as %s: %s", name, inf.container, sf_strerror(sf));
        goto out;
    }
    if (got == 0) { st = rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: no audio samples", name); goto out; }
    inf.frames = (long long)got;
    inf.duration_s = (double)got / si.samplerate;
    if (si.samplerate != target_rate) {
        float *rs = NULL;
        size_t nr = 0;
        if ((st = resample(name, mono, got, si.samplerate, target_rate, &rs, &nr, err, errlen))) goto out;
        free(mono);
        mono = rs;
        got = nr;
        inf.resampled = 1;
        if (got == 0) { st = rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: no audio samples after resampling", name); goto out; }
    }
    *samples = mono;
    *n = got;
    mono = NULL;
    if (info) *info = inf;
out:
    sf_close(sf);
    free(block);
    free(mono);
    return st;
}

rnnt_status rnnt_audio_load_file(const char *path, int target_rate, const rnnt_audio_limits *limits, float **samples, size_t *n,
                                 rnnt_audio_info *info, char *err, size_t errlen)
{
    *samples = NULL;
    *n = 0;
    size_t max_bytes = limits && limits->max_bytes ? limits->max_bytes : DEFAULT_MAX_BYTES;
    FILE *f = fopen(path, "rb");
    if (!f) return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    rnnt_status st = RNNT_OK;
    while (buf) {
        if (len == cap) {
            if (cap > max_bytes) break;
            unsigned char *g = realloc(buf, cap * 2);
            if (!g) { free(buf); buf = NULL; break; }
            buf = g;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
        if (len > max_bytes) break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (!buf) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path);
    if (rerr) st = rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: read error", path);
    else if (len > max_bytes) st = rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: larger than the limit of %zu bytes", path, max_bytes);
    else st = rnnt_audio_decode(path, buf, len, target_rate, limits, samples, n, info, err, errlen);
    free(buf);
    return st;
}
