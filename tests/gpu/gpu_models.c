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
    snprintf(name, sizeof name, "%s.lstm.%d.weight_ih", prefix, l);
    fill(add(ts, name, 4 * H, I), (size_t)4 * H * I, bound, seed);
    snprintf(name, sizeof name, "%s.lstm.%d.weight_hh", prefix, l);
    fill(add(ts, name, 4 * H, H), (size_t)4 * H * H, bound, seed);
    snprintf(name, sizeof name, "%s.lstm.%d.bias_ih", prefix, l);
    fill(add(ts, name, 4 * H, 0), (size_t)4 * H, bound, seed);
    snprintf(name, sizeof name, "%s.lstm.%d.bias_hh", prefix, l);
    fill(add(ts, name, 4 * H, 0), (size_t)4 * H, bound, seed);
}

void gm_write_model(const char *dir, const gm_cfg *c, uint64_t seed)
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
    float es = c->enc_scale > 0 ? c->enc_scale : 4.0f, os = c->out_scale > 0 ? c->out_scale : 1.0f;
    fill(add(ts, "joint.enc.weight", c->J, he), (size_t)c->J * he, es / sqrtf((float)he), &seed);
    fill(add(ts, "joint.enc.bias", c->J, 0), (size_t)c->J, 0.3f, &seed);
    fill(add(ts, "joint.pred.weight", c->J, hp), (size_t)c->J * hp, 2.0f / sqrtf((float)hp), &seed);
    fill(add(ts, "joint.pred.bias", c->J, 0), (size_t)c->J, 0.3f, &seed);
    float *wo = add(ts, "joint.out.weight", n_out, c->J);
    fill(wo, (size_t)n_out * c->J, 1.0f / sqrtf((float)c->J), &seed);
    for (size_t i = 0; i < (size_t)n_out * c->J; i++) wo[i] *= os;
    float *bo = add(ts, "joint.out.bias", n_out, 0);
    fill(bo, (size_t)n_out, 0.5f, &seed);
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
            /* a slowly varying part plus noise, so neighbouring frames are related as in speech */
            float u = 1.2f * tu_randu(seed) + 0.8f * sinf(0.05f * (float)t * (float)(f % 5 + 1));
            x[(size_t)t * F + f] = mean ? mean[f] + sd[f] * u : u;
        }
    return x;
}
