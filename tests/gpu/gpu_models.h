/* gpu_models.h — random model directories of any architecture for the GPU tests (written through
 * the engine tests' safetensors writer), and random utterances for them. */
#ifndef RNNT_GPU_MODELS_H
#define RNNT_GPU_MODELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GM_MAX_LAYERS 8

typedef struct {
    const char *name;
    int F, k;                    /* feature width, frame stacking */
    int n_enc, enc_h[GM_MAX_LAYERS], enc_s[GM_MAX_LAYERS];
    int E, n_pred, pred_h[GM_MAX_LAYERS];
    int J, tanh_joint;
    int V, n_big, dur[8], max_symbols;
    int soft;                    /* soft (sigmoid/tanh) LSTMs instead of hard */
    float enc_scale;             /* multiplies joint.enc.weight: how much decisions depend on the frame */
    float blank_bias;            /* added to the standard blank's output bias */
    float out_scale;             /* > 0: the blank's output weights are 3e38, its logit overflows (and
                                    the model fits no fp16); not calibrated */
} gm_cfg;

/* Writes model.yaml, tokens.txt and weights.safetensors for c into dir (which must exist). */
void gm_write_model(const char *dir, const gm_cfg *c, uint64_t seed);

/* frames x F raw features whose normalised values are spread like speech features; malloc'd. */
float *gm_features(int frames, int F, const float *mean, const float *sd, uint64_t *seed);

#ifdef __cplusplus
}
#endif
#endif
