/* gpu_models.c — see gpu_models.h. */
#include "gpu_models.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "test_util.h"

#define MAX_TENSORS 128

typedef struct {
    tu_tensor t[MAX_TENSORS];
    char names[MAX_TENSORS][64];
    int n;
} tensors;

static float *add(tensors *ts, const char *name, int64_t d0, int64_t d1)
{
    assert_true(ts->n < MAX_TENSORS);
    size_t count = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    float *d = malloc(count * sizeof *d);
    assert_non_null(d);
    snprintf(ts->names[ts->n], sizeof ts->names[0], "%s", name);
    ts->t[ts->n] = (tu_tensor){ts->names[ts->n], "F32", d1 ? 2 : 1, {d0, d1}, d, count * 4};
    ts->n++;
    return d;
}

static void fill(float *d, size_t n, float bound, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) d[i] = bound * tu_randu(seed);
}

static void add_lstm(tensors *ts, const char *prefix, int l, int I, int H, float scale, uint64_t *seed)
{
    char name[64];
    float bound = scale / sqrtf((float)H);
    /* input weights larger than PyTorch's default, so that the state follows the input and the
     * decisions vary from frame to frame (random LSTMs otherwise barely move) */
    snprintf(name, sizeof name, "%s.lstm.%d.weight_ih", prefix, l);
    fill(add(ts, name, 4 * H, I), (size_t)4 * H * I, 2.5f / sqrtf((float)I), seed);
    snprintf(name, sizeof name, "%s.lstm.%d.weight_hh", prefix, l);
    fill(add(ts, name, 4 * H, H), (size_t)4 * H * H, bound, seed);
    snprintf(name, sizeof name, "%s.lstm.%d.bias_ih", prefix, l);
    fill(add(ts, name, 4 * H, 0), (size_t)4 * H, bound, seed);
    snprintf(name, sizeof name, "%s.lstm.%d.bias_hh", prefix, l);
    fill(add(ts, name, 4 * H, 0), (size_t)4 * H, bound, seed);
}

static void write_once(const char *dir, const gm_cfg *c, uint64_t seed, float offset)
{
    char y[8192];
    int p = snprintf(y, sizeof y,
                     "format: rnntd\nversion: 1\nname: %s\nfrontend:\n  sample_rate: 16000\n  window: hann\n"
                     "  win_length: 400\n  hop_length: 160\n  n_fft: 512\n  n_mels: %d\n  f_min: 0.0\n"
                     "  f_max: 8000.0\n  mel_scale: slaney\n  log_floor: 1.0e-10\n  normalize: global\n"
                     "feature_dim: %d\nframe_stacking: %d\nlstm_activation: %s\nencoder:\n  layers:\n",
                     c->name, c->F, c->F, c->k, c->soft ? "soft" : "hard");
    int in = c->F * c->k;
    for (int l = 0; l < c->n_enc; l++) {
        p += snprintf(y + p, sizeof y - p, "    - {input: %d, hidden: %d, time_stack: %d}\n", in, c->enc_h[l],
                      c->enc_s[l] ? c->enc_s[l] : 1);
        in = c->enc_h[l] * (c->enc_s[l] ? c->enc_s[l] : 1);
    }
    p += snprintf(y + p, sizeof y - p, "predictor:\n  embedding: %d\n  layers:\n", c->E);
    in = c->E;
    for (int l = 0; l < c->n_pred; l++) {
        p += snprintf(y + p, sizeof y - p, "    - {input: %d, hidden: %d}\n", in, c->pred_h[l]);
        in = c->pred_h[l];
    }
    p += snprintf(y + p, sizeof y - p, "joint:\n  dim: %d\n  activation: %s\nvocab_size: %d\nbig_blank_durations: [",
                  c->J, c->tanh_joint ? "tanh" : "relu", c->V);
    for (int i = 0; i < c->n_big; i++) p += snprintf(y + p, sizeof y - p, "%s%d", i ? ", " : "", c->dur[i]);
    p += snprintf(y + p, sizeof y - p, "]\nmax_symbols: %d\n", c->max_symbols);
    assert_true(p < (int)sizeof y - 1);
    tu_write_file(dir, "model.yaml", y, strlen(y));

    size_t tcap = (size_t)c->V * 16 + 64, tp = 0;
    char *tok = malloc(tcap);
    assert_non_null(tok);
    static const char *chars[] = {"\xe2\x96\x81", "'"};
    for (int v = 0; v < c->V; v++) {
        if (v < 2)
            tp += (size_t)snprintf(tok + tp, tcap - tp, "%s\n", chars[v]);
        else if (v < 28)
            tp += (size_t)snprintf(tok + tp, tcap - tp, "%c\n", 'a' + v - 2);
        else
            tp += (size_t)snprintf(tok + tp, tcap - tp, "\xe2\x96\x81w%d\n", v);
    }
    tu_write_file(dir, "tokens.txt", tok, tp);
    free(tok);

    tensors *ts = calloc(1, sizeof *ts);
    assert_non_null(ts);
    float *mean = add(ts, "frontend.mean", c->F, 0), *sd = add(ts, "frontend.std", c->F, 0);
    for (int f = 0; f < c->F; f++) {
        mean[f] = -4.0f + 3.0f * tu_randu(&seed);
        sd[f] = 1.25f + 0.75f * tu_randu(&seed);
    }
    in = c->F * c->k;
    for (int l = 0; l < c->n_enc; l++) {
        add_lstm(ts, "encoder", l, in, c->enc_h[l], 1.0f, &seed);
        in = c->enc_h[l] * (c->enc_s[l] ? c->enc_s[l] : 1);
    }
    int he = c->enc_h[c->n_enc - 1];
    fill(add(ts, "predictor.embedding", c->V + 1, c->E), (size_t)(c->V + 1) * c->E, 1.7f, &seed);
    in = c->E;
    for (int l = 0; l < c->n_pred; l++) {
        add_lstm(ts, "predictor", l, in, c->pred_h[l], 1.0f, &seed);
        in = c->pred_h[l];
    }
    int hp = c->pred_h[c->n_pred - 1], n_out = c->V + c->n_big + 1;
    float es = c->enc_scale > 0 ? c->enc_scale : 4.0f;
    fill(add(ts, "joint.enc.weight", c->J, he), (size_t)c->J * he, es / sqrtf((float)he), &seed);
    fill(add(ts, "joint.enc.bias", c->J, 0), (size_t)c->J, 0.3f, &seed);
    fill(add(ts, "joint.pred.weight", c->J, hp), (size_t)c->J * hp, 2.0f / sqrtf((float)hp), &seed);
    fill(add(ts, "joint.pred.bias", c->J, 0), (size_t)c->J, 0.3f, &seed);
    float *wo = add(ts, "joint.out.weight", n_out, c->J);
    fill(wo, (size_t)n_out * c->J, 3.0f / sqrtf((float)c->J), &seed);
    if (c->out_scale > 0) /* the standard blank's logit overflows to +inf for any non-zero relu hidden */
        for (int j = 0; j < c->J; j++) wo[(size_t)(n_out - 1) * c->J + j] = 3e38f;
    float *bo = add(ts, "joint.out.bias", n_out, 0);
    fill(bo, (size_t)n_out, 0.5f, &seed);
    for (int k = c->V; k < n_out; k++) bo[k] += offset - (k < n_out - 1 ? 0.5f : 0.0f); /* big blanks a bit below */
    bo[n_out - 1] += c->blank_bias;
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    tu_write_safetensors(path, ts->t, ts->n);
    for (int i = 0; i < ts->n; i++) free((void *)ts->t[i].data);
    free(ts);
}

float *gm_features(int frames, int F, const float *mean, const float *sd, uint64_t *seed)
{
    float *x = malloc(((size_t)frames * F + 1) * sizeof *x);
    assert_non_null(x);
    for (int t = 0; t < frames; t++)
        for (int f = 0; f < F; f++) {
            /* N(0, 0.8^2) noise (Box-Muller) plus a slowly varying part, so neighbouring frames are
             * related as in speech and the normalised values are spread as the random models expect */
            /* r1 in (0, 1]: tu_randu can round to 1.0f, and r1 > 1 made logf positive and z NaN
             * (the runner's input check caught it, about once per run of this test) */
            float r1 = 0.5f * (tu_randu(seed) + 1.0f), r2 = tu_randu(seed);
            r1 = r1 < 1e-7f ? 1e-7f : r1 > 1.0f ? 1.0f : r1;
            float z = sqrtf(-2.0f * logf(r1)) * cosf(3.14159265f * r2);
            float u = 0.8f * z + 0.6f * sinf(0.05f * (float)t * (float)(f % 5 + 1));
            x[(size_t)t * F + f] = mean ? mean[f] + sd[f] * u : u;
        }
    return x;
}

/* Share of decoding steps that emit a label, on the CPU engine, over a few random utterances. */
static double label_share(const char *dir, uint64_t seed)
{
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = 1;
    p.max_frames = 200;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    long labels = 0, steps = 0;
    for (int u = 0; u < 12; u++) {
        int T = 40 + (int)(tu_rand_next(&seed) % 160);
        float *x = gm_features(T, m->feature_dim, m->fe_mean, m->fe_std, &seed);
        rnnt_input in = {x, T, 0};
        rnnt_result res;
        memset(&res, 0, sizeof res);
        if (rnnt_runner_decode(r, 1, &in, &res, NULL, err, sizeof err)) fail_msg("%s", err);
        labels += res.n_tokens;
        steps += res.decode_steps;
        rnnt_result_clear(&res);
        free(x);
    }
    rnnt_runner_free(r);
    rnnt_model_free(m);
    return steps ? (double)labels / (double)steps : 0.0;
}

void gm_write_model(const char *dir, const gm_cfg *c, uint64_t seed)
{
    /* Random joints favour the labels (the max of V outputs beats the one blank) or never emit, and
     * such a model tests little. Bisect a common offset of the blank outputs' biases until 15-45% of
     * the decoding steps emit a label (the share falls as the offset grows). */
    float lo = -30.0f, hi = 30.0f, off = 0.0f;
    for (int it = 0; it < 16; it++) {
        write_once(dir, c, seed, off);
        if (c->out_scale > 0) return; /* the overflow model is not calibrated */
        double sh = label_share(dir, seed ^ 0x5151);
        if (sh > 0.45)
            lo = off;
        else if (sh < 0.15)
            hi = off;
        else
            return;
        off = 0.5f * (lo + hi);
    }
}
