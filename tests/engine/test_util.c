/* test_util.c — see test_util.h. Failures here abort the test (assert_*): they are the test's own
 * set-up, not the code under test. */
#include "test_util.h"

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* Set-up allocations: on failure the test cannot continue, so abort (and tell the compiler so). */
static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

char *tu_tmpdir(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *p = xmalloc(strlen(base) + 32);
    sprintf(p, "%s/rnnt-test-XXXXXX", base);
    assert_non_null(mkdtemp(p));
    return p;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (!lstat(path, &sb) && S_ISDIR(sb.st_mode)) rm_tree(path);
        else unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void tu_rmdir(char *dir)
{
    rm_tree(dir);
    free(dir);
}

void tu_write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = xmalloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

void tu_write_safetensors_raw(const char *path, const char *header, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t hl = strlen(header);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, hl, f);
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

void tu_write_safetensors(const char *path, const tu_tensor *t, int n)
{
    size_t cap = 256 + (size_t)n * 160, total = 0;
    char *h = xmalloc(cap);
    size_t p = (size_t)sprintf(h, "{");
    for (int i = 0; i < n; i++) {
        p += (size_t)sprintf(h + p, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) p += (size_t)sprintf(h + p, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        p += (size_t)sprintf(h + p, "],\"data_offsets\":[%zu,%zu]}", total, total + t[i].nbytes);
        total += t[i].nbytes;
    }
    sprintf(h + p, "}");
    unsigned char *data = xmalloc(total);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(data + off, t[i].data, t[i].nbytes);
        off += t[i].nbytes;
    }
    tu_write_safetensors_raw(path, h, data, total);
    free(h);
    free(data);
}

uint64_t tu_rand_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float tu_randu(uint64_t *s) { return (float)((double)(tu_rand_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

double tu_rel_err(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num || d != d) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

const char *tu_data_dir(void)
{
    const char *d = getenv("RNNT_TEST_DATA");
    return d ? d : "tests/data";
}

const char *tu_small_yaml =
    "format: rnntd\n"
    "version: 1\n"
    "name: unit-small\n"
    "frontend:\n"
    "  sample_rate: 16000\n"
    "  window: hann\n"
    "  win_length: 400\n"
    "  hop_length: 160\n"
    "  n_fft: 512\n"
    "  n_mels: 6\n"
    "  f_min: 0.0\n"
    "  f_max: 8000.0\n"
    "  mel_scale: slaney\n"
    "  log_floor: 1.0e-10\n"
    "  normalize: global\n"
    "feature_dim: 6\n"
    "frame_stacking: 2\n"
    "lstm_activation: hard\n"
    "encoder:\n"
    "  layers:\n"
    "    - {input: 12, hidden: 10, time_stack: 2}\n"
    "    - {input: 20, hidden: 9}\n"
    "predictor:\n"
    "  embedding: 5\n"
    "  layers:\n"
    "    - {input: 5, hidden: 7}\n"
    "joint:\n"
    "  dim: 8\n"
    "  activation: relu\n"
    "vocab_size: 4\n"
    "big_blank_durations: [2, 3]\n"
    "max_symbols: 3\n";

static const char small_tokens[] = "\xe2\x96\x81\na\nb\nc\n";

typedef struct {
    const char *name;
    int ndim;
    int64_t d0, d1;
} spec;

static const spec small_specs[] = {
    {"frontend.mean", 1, 6, 0},           {"frontend.std", 1, 6, 0},
    {"encoder.lstm.0.weight_ih", 2, 40, 12}, {"encoder.lstm.0.weight_hh", 2, 40, 10}, {"encoder.lstm.0.bias_ih", 1, 40, 0},
    {"encoder.lstm.0.bias_hh", 1, 40, 0},    {"encoder.lstm.1.weight_ih", 2, 36, 20}, {"encoder.lstm.1.weight_hh", 2, 36, 9},
    {"encoder.lstm.1.bias_ih", 1, 36, 0},    {"encoder.lstm.1.bias_hh", 1, 36, 0},    {"predictor.embedding", 2, 5, 5},
    {"predictor.lstm.0.weight_ih", 2, 28, 5}, {"predictor.lstm.0.weight_hh", 2, 28, 7}, {"predictor.lstm.0.bias_ih", 1, 28, 0},
    {"predictor.lstm.0.bias_hh", 1, 28, 0},  {"joint.enc.weight", 2, 8, 9},          {"joint.enc.bias", 1, 8, 0},
    {"joint.pred.weight", 2, 8, 7},          {"joint.pred.bias", 1, 8, 0},           {"joint.out.weight", 2, 7, 8},
    {"joint.out.bias", 1, 7, 0},
};

int tu_small_tensors(uint64_t seed, tu_tensor **out)
{
    int n = (int)(sizeof small_specs / sizeof small_specs[0]);
    tu_tensor *t = xmalloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) {
        size_t count = (size_t)small_specs[i].d0 * (small_specs[i].ndim == 2 ? (size_t)small_specs[i].d1 : 1);
        float *d = xmalloc(count * sizeof *d);
        for (size_t j = 0; j < count; j++) d[j] = 0.6f * tu_randu(&seed);
        if (!strcmp(small_specs[i].name, "frontend.std"))
            for (size_t j = 0; j < count; j++) d[j] = 0.5f + fabsf(d[j]);
        t[i] = (tu_tensor){small_specs[i].name, "F32", small_specs[i].ndim, {small_specs[i].d0, small_specs[i].d1}, d, count * 4};
    }
    *out = t;
    return n;
}

void tu_free_tensors(tu_tensor *t, int n)
{
    for (int i = 0; i < n; i++) free((void *)t[i].data);
    free(t);
}

void tu_write_small_model(const char *dir, uint64_t seed, const char *yaml)
{
    tu_write_file(dir, "model.yaml", yaml ? yaml : tu_small_yaml, strlen(yaml ? yaml : tu_small_yaml));
    tu_write_file(dir, "tokens.txt", small_tokens, strlen(small_tokens));
    tu_tensor *t;
    int n = tu_small_tensors(seed, &t);
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    tu_write_safetensors(path, t, n);
    tu_free_tensors(t, n);
}

int tu_result_diff(const rnnt_result *a, const rnnt_result *b, int i, char *msg, size_t len)
{
    msg[0] = 0;
    if (a->status != b->status || a->n_tokens != b->n_tokens || a->encoder_frames != b->encoder_frames ||
        a->frames_skipped != b->frames_skipped || a->decode_steps != b->decode_steps) {
        snprintf(msg, len, "utterance %d: status %d/%d tokens %d/%d frames %d/%d skipped %d/%d steps %d/%d", i,
                 a->status, b->status, a->n_tokens, b->n_tokens, a->encoder_frames, b->encoder_frames,
                 a->frames_skipped, b->frames_skipped, a->decode_steps, b->decode_steps);
        return 1;
    }
    for (int k = 0; k < a->n_tokens; k++)
        if (a->tokens[k] != b->tokens[k] || a->frames[k] != b->frames[k] ||
            memcmp(&a->probs[k], &b->probs[k], sizeof(float))) {
            snprintf(msg, len, "utterance %d: token %d differs (%d@%d p %.9g vs %d@%d p %.9g)", i, k, a->tokens[k],
                     a->frames[k], a->probs[k], b->tokens[k], b->frames[k], b->probs[k]);
            return 1;
        }
    if (!a->text != !b->text || (a->text && strcmp(a->text, b->text))) {
        snprintf(msg, len, "utterance %d: text \"%.100s\" vs \"%.100s\"", i, a->text ? a->text : "(null)",
                 b->text ? b->text : "(null)");
        return 1;
    }
    return 0;
}
