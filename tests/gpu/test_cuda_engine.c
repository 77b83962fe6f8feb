/* test_cuda_engine.c — the CUDA backend through the public API, against the CPU engine:
 *   - fp32: every utterance's tokens, frames, encoder frames, skipped frames, decode steps and status
 *     identical to the CPU backend's, on generated models of awkward shapes (hidden sizes not multiples
 *     of 8 or 64, time stacking, no big blanks, 1030 outputs), on every golden model (also against the
 *     golden tokens) and on the model directories listed in $RNNT_GPU_MODELS (colon-separated);
 *   - fp16: the share of utterances identical to the CPU's (printed; a floor catches real bugs);
 *   - batch invariance on the GPU: alone and in shuffled batches of 3, 7 and 16, bitwise the same;
 *   - the decoding loop modes (WHILE graph with 1, 3 or the default number of steps per iteration,
 *     host-polled, profiled), graph-less encoding and staging in small chunks by one or several threads
 *     agree;
 *   - each token's probability (rnnt_result.probs, the joint's softmax of the emitted label: the input of
 *     the per-word confidence, include/rnnt_words.h) within PROB_TOL of the CPU's in fp32, and each word's
 *     confidence (rnnt_result_words) within PROB_TOL too; bitwise the same in any batch;
 *   - overflowing joints fail the same utterances with RNNT_ERR_NUMERIC as on the CPU;
 *   - too large batches and inputs, bad devices and impossible memory sizes give clear errors, and a
 *     runner still works afterwards.
 * Exits 77 (skipped) when no CUDA device is usable. RNNT_TEST_SEED replays a seed; RNNT_TEST_QUICK=1
 * runs one generated model, fewer and shorter utterances (for the sanitizer runs); RNNT_TEST_ONLY=glob
 * picks tests and RNNT_TEST_GOLDEN=glob golden models, so a slow tool can take one per process. */
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "gpu_models.h"
#include "model.h"
#include "safetensors.h"
#include "test_util.h"
#include "rnnt_words.h"

#define N_UTT 48
#define MAX_B 16
/* fp32 logits on the GPU differ from the CPU's by summation order (~1e-6 relative); a probability
 * 1 / sum exp(z - z*) moves by about |dz| times the non-best mass: far below 1e-4. */
#define PROB_TOL 1e-4
static double g_prob_worst, g_conf_worst;

static uint64_t g_seed;
static int g_quick, g_nutt = N_UTT;
static long g_fp16_same, g_fp16_total, g_persist_same, g_fused_same;

typedef struct {
    int n;
    rnnt_input in[N_UTT];
    float *x[N_UTT];
    int max_frames;
} utts;

static void make_utts(const rnnt_model *m, int max_t, uint64_t *seed, utts *u)
{
    u->n = g_nutt;
    u->max_frames = 1;
    for (int i = 0; i < u->n; i++) {
        int T = i == 0 ? 0 : i == 1 ? 1 : i == 2 ? max_t : (int)(tu_rand_next(seed) % (uint64_t)(max_t + 1));
        u->x[i] = gm_features(T, m->feature_dim, m->fe_mean, m->fe_std, seed);
        u->in[i] = (rnnt_input){u->x[i], T, 0};
        if (T > u->max_frames) u->max_frames = T;
    }
}

static void free_utts(utts *u)
{
    for (int i = 0; i < u->n; i++) free(u->x[i]);
}

/* Sets an RNNT_CUDA_* switch for the runners made next; env_pop puts back what the caller had (a
 * sanitizer run may set switches for the whole test). */
static char *env_push(const char *var, const char *val)
{
    const char *old = getenv(var);
    char *saved = old ? strdup(old) : NULL;
    if (old) assert_non_null(saved);
    setenv(var, val, 1);
    return saved;
}

static void env_pop(const char *var, char *saved)
{
    if (saved) setenv(var, saved, 1);
    else unsetenv(var);
    free(saved);
}

static rnnt_runner *make_runner(const rnnt_model *m, rnnt_backend_kind kind, rnnt_precision prec, int max_batch,
                                int max_frames)
{
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = kind;
    p.precision = prec;
    p.max_batch = max_batch;
    p.max_frames = max_frames;
    rnnt_runner *r;
    char err[512];
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("runner: %s", err);
    return r;
}

/* Decode utterances order[0..n) in batches of `batch`; results land at res[order[i]]. */
static void decode_order(rnnt_runner *r, const utts *u, const int *order, int batch, rnnt_result *res)
{
    char err[512];
    for (int first = 0; first < u->n; first += batch) {
        int nb = u->n - first < batch ? u->n - first : batch;
        rnnt_input bin[MAX_B];
        rnnt_result out[MAX_B];
        memset(out, 0, sizeof out);
        for (int k = 0; k < nb; k++) bin[k] = u->in[order[first + k]];
        if (rnnt_runner_decode(r, nb, bin, out, NULL, err, sizeof err)) fail_msg("decode: %s", err);
        for (int k = 0; k < nb; k++) {
            rnnt_result_clear(&res[order[first + k]]);
            res[order[first + k]] = out[k];
        }
    }
}

static void decode_shuffled(rnnt_runner *r, const utts *u, int batch, uint64_t *seed, rnnt_result *res)
{
    int order[N_UTT] = {0};
    for (int i = 0; i < u->n; i++) order[i] = i;
    for (int i = u->n - 1; i > 0; i--) {
        int j = (int)(tu_rand_next(seed) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    decode_order(r, u, order, batch, res);
}

static int same_tokens(const rnnt_result *a, const rnnt_result *b)
{
    return a->status == b->status && a->n_tokens == b->n_tokens &&
           !memcmp(a->tokens, b->tokens, sizeof(int) * (size_t)a->n_tokens) &&
           !memcmp(a->frames, b->frames, sizeof(int) * (size_t)a->n_tokens);
}

/* Largest |a.probs - b.probs| over the tokens (a and b have the same tokens); 1 where one has none. */
static double probs_diff(const rnnt_result *a, const rnnt_result *b)
{
    if (a->n_tokens && (!a->probs || !b->probs)) return 1.0;
    double worst = 0;
    for (int k = 0; k < a->n_tokens; k++) {
        double d = fabs((double)a->probs[k] - (double)b->probs[k]);
        if (!(d <= worst)) worst = isnan(d) ? 1.0 : d;
    }
    return worst;
}

/* Largest difference of the words' confidences (rnnt_result_words) of two results with the same tokens. */
static double conf_diff(const rnnt_model *m, const rnnt_result *a, const rnnt_result *b)
{
    rnnt_word *wa = NULL, *wb = NULL;
    int na = 0, nb = 0;
    char err[200];
    if (rnnt_result_words(m, a, &wa, &na, err, sizeof err) || rnnt_result_words(m, b, &wb, &nb, err, sizeof err))
        fail_msg("words: %s", err);
    double worst = na == nb ? 0 : 1;
    for (int i = 0; i < na && i < nb; i++) {
        double d = fabs(wa[i].confidence - wb[i].confidence);
        if (!(d <= worst)) worst = isnan(d) ? 1.0 : d;
        if (wa[i].confidence <= 0 || wa[i].confidence > 1) worst = 1; /* -1: no probabilities */
    }
    rnnt_words_free(wa, na);
    rnnt_words_free(wb, nb);
    return worst;
}

static int same_result(const rnnt_result *a, const rnnt_result *b)
{
    return same_tokens(a, b) && a->encoder_frames == b->encoder_frames && a->frames_skipped == b->frames_skipped &&
           a->decode_steps == b->decode_steps;
}

static void describe(const char *what, const char *dir, int i, const utts *u, const rnnt_result *got,
                     const rnnt_result *want)
{
    fprintf(stderr, "%s: %s utterance %d (%d frames): got status %d, %d tokens, %d steps, %d skipped; want status %d, "
                    "%d tokens, %d steps, %d skipped\n",
            what, dir, i, u->in[i].frames, got->status, got->n_tokens, got->decode_steps, got->frames_skipped, want->status,
            want->n_tokens, want->decode_steps, want->frames_skipped);
    int n = got->n_tokens < want->n_tokens ? got->n_tokens : want->n_tokens;
    for (int k = 0; k < n; k++)
        if (got->tokens[k] != want->tokens[k] || got->frames[k] != want->frames[k]) {
            fprintf(stderr, "  first difference at token %d: got %d@%d, want %d@%d\n", k, got->tokens[k], got->frames[k],
                    want->tokens[k], want->frames[k]);
            break;
        }
}

static void clear_all(rnnt_result *r, int n)
{
    for (int i = 0; i < n; i++) rnnt_result_clear(&r[i]);
}

/* Everything for one model directory; returns the number of labels the CPU emitted. */
static int check_model(const char *dir, int max_t, uint64_t seed)
{
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    utts u;
    make_utts(m, max_t, &seed, &u);
    int order[N_UTT] = {0};
    for (int i = 0; i < u.n; i++) order[i] = i;
    rnnt_result cpu[N_UTT], g32[N_UTT], g16[N_UTT], other[N_UTT];
    memset(cpu, 0, sizeof cpu);
    memset(g32, 0, sizeof g32);
    memset(g16, 0, sizeof g16);
    memset(other, 0, sizeof other);

    rnnt_runner *rc = make_runner(m, RNNT_BACKEND_CPU, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
    decode_order(rc, &u, order, MAX_B, cpu);
    rnnt_runner_free(rc);
    int labels = 0, steps = 0, skipped = 0;
    for (int i = 0; i < u.n; i++) {
        labels += cpu[i].n_tokens;
        steps += cpu[i].decode_steps;
        skipped += cpu[i].frames_skipped;
    }

    /* fp32: identical to the CPU, in batches of 16, then shuffled in batches of 3 and 7 and alone. */
    rnnt_runner *r32 = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
    decode_order(r32, &u, order, MAX_B, g32);
    int bad = 0;
    for (int i = 0; i < u.n; i++)
        if (!same_result(&g32[i], &cpu[i])) {
            if (bad++ < 3) describe("fp32 vs cpu", dir, i, &u, &g32[i], &cpu[i]);
        }
    if (bad) fail_msg("%s: %d of %d utterances differ between CUDA fp32 and the CPU (seed %llu)", dir, bad, u.n,
                      (unsigned long long)g_seed);
    double pw = 0, cw = 0;
    for (int i = 0; i < u.n; i++) {
        if (cpu[i].status != RNNT_OK) continue;
        double d = probs_diff(&g32[i], &cpu[i]), c = conf_diff(m, &g32[i], &cpu[i]);
        if (!(d <= PROB_TOL) || !(c <= PROB_TOL))
            fail_msg("%s: utterance %d: CUDA fp32 token probabilities %.3g, word confidences %.3g from the CPU's (> %g)", dir, i, d,
                     c, PROB_TOL);
        if (d > pw) pw = d;
        if (c > cw) cw = c;
    }
    if (pw > g_prob_worst) g_prob_worst = pw;
    if (cw > g_conf_worst) g_conf_worst = cw;
    static const int sizes[] = {1, 3, 7};
    for (int s = 0; s < 3; s++) {
        decode_shuffled(r32, &u, sizes[s], &seed, other);
        for (int i = 0; i < u.n; i++)
            if (!same_result(&other[i], &g32[i]) || probs_diff(&other[i], &g32[i]) != 0) {
                describe("fp32 batch invariance", dir, i, &u, &other[i], &g32[i]);
                fail_msg("%s: fp32 utterance %d differs in a batch of %d", dir, i, sizes[s]);
            }
    }
    rnnt_runner_free(r32);

    /* fp16: agreement with the CPU (counted), bitwise batch invariance, loop modes. */
    rnnt_runner *r16 = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP16, MAX_B, u.max_frames);
    decode_order(r16, &u, order, MAX_B, g16);
    int same16 = 0;
    for (int i = 0; i < u.n; i++) same16 += same_tokens(&g16[i], &cpu[i]);
    g_fp16_same += same16;
    g_fp16_total += u.n;
    for (int s = 0; s < 3; s++) {
        decode_shuffled(r16, &u, sizes[s], &seed, other);
        for (int i = 0; i < u.n; i++)
            if (!same_result(&other[i], &g16[i])) {
                describe("fp16 batch invariance", dir, i, &u, &other[i], &g16[i]);
                fail_msg("%s: fp16 utterance %d differs in a batch of %d", dir, i, sizes[s]);
            }
    }
    rnnt_runner_free(r16);
    /* the WHILE graph at every batch size (the default runs batches of up to CU_DEC_AUTO_CLUSTER_MAX
     * slots through the cluster loop), the host loop and the profiled host loop; then staging in chunks of 1000 bytes (utterances split across chunks, a transfer per chunk) by
     * the caller alone and with 3 helper threads; then 1 and 3 decoding steps per WHILE iteration
     * (the default is CU_DEC_UNROLL_DEFAULT); the whole loop in one kernel (cu_dec_fused.h) with the
     * default group and with 1 and 8 slots per block; the predictor kernels one row at a time; the loop
     * in one kernel per cluster of blocks (cu_dec_cluster) with 8 and 16 blocks, 1 (the default
     * here), 3 and 16 slots per cluster, and 16 warps per block */
    static const char *modes[][4] = {{"RNNT_CUDA_DECODE", "while", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "host", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "profile", NULL, NULL},
                                     {"RNNT_CUDA_GRAPHS", "0", NULL, NULL},
                                     {"RNNT_CUDA_MAPPED", "0", NULL, NULL},
                                     {"RNNT_CUDA_STAGE_CHUNK", "1000", "RNNT_CUDA_STAGE_THREADS", "0"},
                                     {"RNNT_CUDA_STAGE_CHUNK", "1000", "RNNT_CUDA_STAGE_THREADS", "3"},
                                     {"RNNT_CUDA_DECODE_UNROLL", "1", NULL, NULL},
                                     {"RNNT_CUDA_DECODE_UNROLL", "3", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "fused", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "fused", "RNNT_CUDA_DEC_GROUP", "1"},
                                     {"RNNT_CUDA_DECODE", "fused", "RNNT_CUDA_DEC_GROUP", "8"},
                                     {"RNNT_CUDA_PRED_ROWS", "1", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "cluster", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "cluster", "RNNT_CUDA_DEC_CLUSTER", "16"},
                                     {"RNNT_CUDA_DECODE", "cluster", "RNNT_CUDA_DEC_CLUSTER_G", "3"},
                                     {"RNNT_CUDA_DECODE", "cluster", "RNNT_CUDA_DEC_CLUSTER_G", "16"},
                                     {"RNNT_CUDA_DECODE", "cluster", "RNNT_CUDA_DEC_CLUSTER_WARPS", "16"},
                                     {"RNNT_CUDA_DECODE", "grid", NULL, NULL},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_BLOCKS", "1"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "0"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "1"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "2"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_VST", "0"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_CNT", "1"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_OCC", "1"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_OCC", "2"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_SLICES", "64"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_PAIR", "1"}};
    for (int k = 0; k < (int)(sizeof modes / sizeof modes[0]); k++) {
        char *saved = env_push(modes[k][0], modes[k][1]);
        char *saved2 = modes[k][2] ? env_push(modes[k][2], modes[k][3]) : NULL;
        rnnt_runner *rm = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP16, MAX_B, u.max_frames);
        if (modes[k][2]) env_pop(modes[k][2], saved2);
        env_pop(modes[k][0], saved);
        decode_order(rm, &u, order, MAX_B, other);
        for (int i = 0; i < u.n; i++)
            if (!same_result(&other[i], &g16[i])) {
                describe("decode mode", dir, i, &u, &other[i], &g16[i]);
                fail_msg("%s: %s=%s%s%s%s%s changes utterance %d", dir, modes[k][0], modes[k][1], modes[k][2] ? " " : "",
                         modes[k][2] ? modes[k][2] : "", modes[k][2] ? "=" : "", modes[k][3] ? modes[k][3] : "", i);
            }
        if (k == 2) { /* the profiled loop fills the time split */
            rnnt_timing tm;
            rnnt_result one;
            memset(&one, 0, sizeof one);
            if (rnnt_runner_decode(rm, 1, &u.in[2], &one, &tm, err, sizeof err)) fail_msg("%s", err);
            assert_true(tm.encoder_s > 0 && tm.predictor_s > 0 && tm.joint_s > 0 && tm.decode_s > 0);
            rnnt_result_clear(&one);
        }
        rnnt_runner_free(rm);
    }
    /* the other recurrence paths (persistent kernel, fused step kernel) and the fused decoding loop, each
     * fixed per runner: fp32
     * identical to the CPU (the persistent kernel is fp16-only, its fp32 runner is the default path),
     * fp16 counted against the CPU and bitwise batch-invariant */
    static const char *paths[] = {"RNNT_CUDA_PERSIST", "RNNT_CUDA_FUSED", "RNNT_CUDA_DECODE", "RNNT_CUDA_DECODE",
                                  "RNNT_CUDA_DECODE", "RNNT_CUDA_DECODE"};
    static const char *path_val[] = {"1", "1", "fused", "cluster", "cluster", "grid"};
    /* the cluster loop with 5 slots per cluster (a batch of 16 leaves a partial last cluster), and with
     * 16 warps per block */
    static const char *path_var2[] = {NULL, NULL, NULL, "RNNT_CUDA_DEC_CLUSTER_G", "RNNT_CUDA_DEC_CLUSTER_WARPS", NULL};
    static const char *path_g[] = {NULL, NULL, NULL, "5", "16", NULL};
    int samep[6] = {0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 6; k++) {
        char *saved = env_push(paths[k], path_val[k]);
        char *saved_g = path_g[k] ? env_push(path_var2[k], path_g[k]) : NULL;
        rnnt_runner *rp = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
        rnnt_runner *rq = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP16, MAX_B, u.max_frames);
        if (path_g[k]) env_pop(path_var2[k], saved_g);
        env_pop(paths[k], saved);
        decode_order(rp, &u, order, MAX_B, other);
        for (int i = 0; i < u.n; i++)
            if (!same_result(&other[i], &cpu[i])) {
                describe(paths[k], dir, i, &u, &other[i], &cpu[i]);
                fail_msg("%s: %s=%s fp32 utterance %d differs from the CPU", dir, paths[k], path_val[k], i);
            }
        if (k >= 2) /* the fused loops compute the label probabilities themselves */
            for (int i = 0; i < u.n; i++) {
                double d = cpu[i].status == RNNT_OK ? probs_diff(&other[i], &cpu[i]) : 0;
                if (!(d <= PROB_TOL))
                    fail_msg("%s: %s=%s fp32 utterance %d: token probabilities %.3g from the CPU's (> %g)", dir, paths[k],
                             path_val[k], i, d, PROB_TOL);
            }
        decode_order(rq, &u, order, MAX_B, g32); /* g32 is done with: reuse it */
        for (int i = 0; i < u.n; i++) samep[k] += same_tokens(&g32[i], &cpu[i]);
        if (k >= 2) /* the fused and cluster loops run the per-step kernels' arithmetic: the default's bits */
            for (int i = 0; i < u.n; i++)
                if (!same_result(&g32[i], &g16[i])) {
                    describe("fused decoding vs WHILE graph", dir, i, &u, &g32[i], &g16[i]);
                    fail_msg("%s: RNNT_CUDA_DECODE=%s fp16 utterance %d differs from the default loop", dir, path_val[k], i);
                }
        decode_shuffled(rq, &u, 3, &seed, other);
        for (int i = 0; i < u.n; i++)
            if (!same_result(&other[i], &g32[i])) {
                describe(paths[k], dir, i, &u, &other[i], &g32[i]);
                fail_msg("%s: %s=%s fp16 utterance %d differs in a batch of 3", dir, paths[k], path_val[k], i);
            }
        rnnt_runner_free(rp);
        rnnt_runner_free(rq);
    }
    g_persist_same += samep[0];
    g_fused_same += samep[1];
    printf("%s: %d utterances (max %d frames), %d labels, %d steps, %d frames skipped: fp32 identical to the CPU and "
           "batch-invariant, token probabilities within %.2g and word confidences within %.2g of the CPU's; fp16 %d/%d identical to the CPU, batch-invariant; loop modes agree; persistent fp16 %d/%d, fused-step fp16 %d/%d; "
           "fused, cluster and grid decoding fp32 identical to the CPU, fp16 to the default loop\n",
           dir, u.n, u.max_frames, labels, steps, skipped, pw, cw, same16, u.n, samep[0], u.n, samep[1], u.n);
    clear_all(cpu, u.n);
    clear_all(g32, u.n);
    clear_all(g16, u.n);
    clear_all(other, u.n);
    free_utts(&u);
    rnnt_model_free(m);
    return labels;
}

static const gm_cfg gen_models[] = {
    {.name = "g-tiny-hard", .F = 6, .k = 2, .n_enc = 2, .enc_h = {20, 20}, .enc_s = {2, 1}, .E = 10, .n_pred = 1,
     .pred_h = {14}, .J = 18, .V = 9, .n_big = 3, .dur = {2, 4, 8}, .max_symbols = 5},
    {.name = "g-odd-soft", .F = 7, .k = 3, .n_enc = 3, .enc_h = {33, 63, 17}, .enc_s = {2, 3, 1}, .E = 11, .n_pred = 2,
     .pred_h = {19, 23}, .J = 29, .tanh_joint = 1, .V = 40, .n_big = 1, .dur = {3}, .max_symbols = 2, .soft = 1},
    {.name = "g-noblank", .F = 80, .k = 3, .n_enc = 3, .enc_h = {130, 100, 70}, .enc_s = {1, 2, 1}, .E = 32,
     .n_pred = 1, .pred_h = {50}, .J = 64, .V = 28, .n_big = 0, .max_symbols = 10},
    {.name = "g-bigvocab", .F = 16, .k = 1, .n_enc = 1, .enc_h = {64}, .enc_s = {1}, .E = 16, .n_pred = 1,
     .pred_h = {64}, .J = 96, .V = 1030, .n_big = 2, .dur = {2, 4}, .max_symbols = 4, .blank_bias = 2.0f},
};

static void test_generated(void **state)
{
    (void)state;
    size_t n_models = g_quick ? 1 : sizeof gen_models / sizeof gen_models[0];
    for (size_t i = 0; i < n_models; i++) {
        /* a random model may emit nothing on a few short utterances (quick mode: 12 x <= 40 frames), and a
         * comparison of empty transcripts proves little: then another draw of weights and inputs */
        int labels = 0;
        for (uint64_t draw = 0; draw < 4 && labels == 0; draw++) {
            char *dir = tu_tmpdir();
            gm_write_model(dir, &gen_models[i], g_seed + i + 7919 * draw);
            labels = check_model(dir, g_quick ? 40 : 150 + (int)i * 31, g_seed + 100 + i + 7919 * draw);
            tu_rmdir(dir);
        }
        assert_true(labels > 0);
    }
}

/* The decoding loop at batch sizes the other tests do not reach (they decode at most MAX_B at a time), where the
 * default switches loops: the utterances of a generated model repeated into batches of 17, 130 and 300, decoded
 * by the default, the WHILE graph and the grid loop (cu_dec_grid, with as many blocks as fit and with one per SM),
 * fp32 and fp16: every mode bitwise the WHILE graph's result in the same batch (tokens, frames, steps, label
 * probabilities); fp32 tokens identical to the CPU's and probabilities within PROB_TOL. (Not against a runner
 * of another max_batch: fp16 runners of up to 32 take the persistent recurrence.) */
static void test_large_batch(void **state)
{
    (void)state;
    static const int sizes[] = {17, 130, 300};
    enum { n_sizes = 3, n_modes = 14, maxB = 300 };
    static const char *modes[n_modes][4] = {{"RNNT_CUDA_DECODE", "while", NULL, NULL},
                                            {NULL, NULL, NULL, NULL},
                                            {"RNNT_CUDA_DECODE", "grid", NULL, NULL},
                                            {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_BLOCKS", "1"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "0"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "1"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "2"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_VST", "0"},
                                     {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_CNT", "1"},
                                     {"RNNT_CUDA_DEC_GRID_CNT", "1", NULL, NULL},
                                     {"RNNT_CUDA_DEC_GRID_CNT", "0", NULL, NULL},
                                     {"RNNT_CUDA_DEC_GRID_OCC", "1", NULL, NULL},
                                     {"RNNT_CUDA_DEC_GRID_OCC", "2", NULL, NULL},
                                     {"RNNT_CUDA_DEC_GRID_SLICES", "64", NULL, NULL}};
    const int n_models = g_quick ? 1 : 2;
    char err[512];
    for (int mi = 0; mi < n_models; mi++) {
        char *dir = tu_tmpdir();
        gm_write_model(dir, &gen_models[mi], g_seed + 31 + (uint64_t)mi);
        rnnt_model *m;
        if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
        uint64_t seed = g_seed + 57 + (uint64_t)mi;
        utts u;
        make_utts(m, g_quick ? 40 : 90, &seed, &u);
        rnnt_input *bin = calloc((size_t)maxB, sizeof *bin);
        rnnt_result *ref = calloc((size_t)n_sizes * maxB, sizeof *ref), *out = calloc((size_t)maxB, sizeof *out);
        assert_non_null(bin);
        assert_non_null(ref);
        assert_non_null(out);
        rnnt_result cpu[N_UTT];
        memset(cpu, 0, sizeof cpu);
        {
            rnnt_runner *rc = make_runner(m, RNNT_BACKEND_CPU, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
            int order[N_UTT];
            for (int i = 0; i < u.n; i++) order[i] = i;
            decode_order(rc, &u, order, MAX_B, cpu);
            rnnt_runner_free(rc);
        }
        for (int prec = 0; prec < 2; prec++) {
            rnnt_precision p = prec ? RNNT_PRECISION_FP16 : RNNT_PRECISION_FP32;
            for (int k = 0; k < n_modes; k++) {
                char *saved = modes[k][0] ? env_push(modes[k][0], modes[k][1]) : NULL;
                char *saved2 = modes[k][2] ? env_push(modes[k][2], modes[k][3]) : NULL;
                rnnt_runner *r = make_runner(m, RNNT_BACKEND_CUDA, p, maxB, u.max_frames);
                if (modes[k][2]) env_pop(modes[k][2], saved2);
                if (modes[k][0]) env_pop(modes[k][0], saved);
                for (int s = 0; s < n_sizes; s++) {
                    int nb = sizes[s];
                    rnnt_result *want = ref + (size_t)s * maxB;
                    for (int b = 0; b < nb; b++) bin[b] = u.in[(b * 7 + s) % u.n];
                    memset(k == 0 ? want : out, 0, (size_t)nb * sizeof *out);
                    if (rnnt_runner_decode(r, nb, bin, k == 0 ? want : out, NULL, err, sizeof err))
                        fail_msg("decode: %s", err);
                    for (int b = 0; b < nb; b++) {
                        int i = (b * 7 + s) % u.n;
                        if (k == 0) {
                            if (!prec && (!same_result(&want[b], &cpu[i]) ||
                                          (cpu[i].status == RNNT_OK && !(probs_diff(&want[b], &cpu[i]) <= PROB_TOL)))) {
                                describe("large batch vs CPU", gen_models[mi].name, i, &u, &want[b], &cpu[i]);
                                fail_msg("%s: fp32 WHILE graph, utterance %d in a batch of %d differs from the CPU",
                                         gen_models[mi].name, i, nb);
                            }
                            continue;
                        }
                        if (!same_result(&out[b], &want[b]) || probs_diff(&out[b], &want[b]) != 0) {
                            describe("large batch", gen_models[mi].name, i, &u, &out[b], &want[b]);
                            fail_msg("%s: %s %s%s%s: slot %d of a batch of %d differs from the WHILE graph's",
                                     gen_models[mi].name, prec ? "fp16" : "fp32", modes[k][0] ? modes[k][1] : "default",
                                     modes[k][2] ? " " : "", modes[k][2] ? modes[k][2] : "", b, nb);
                        }
                        rnnt_result_clear(&out[b]);
                    }
                }
                rnnt_runner_free(r);
            }
            clear_all(ref, n_sizes * maxB);
        }
        printf("%s: batches of 17, 130, 300: default, grid loop (all blocks, one per SM, units spread, weights not in shared memory, S weights in shared memory, f4 inputs staged element by element, per-slot counters instead of two grid barriers; the default with and without them, built for 1 and 2 blocks an SM) bitwise the WHILE graph in "
               "fp32 and fp16; fp32 identical to the CPU\n", gen_models[mi].name);
        clear_all(cpu, u.n);
        free(bin);
        free(ref);
        free(out);
        free_utts(&u);
        rnnt_model_free(m);
        tu_rmdir(dir);
    }
}

/* Runners of the largest batch (RNNT_MAX_BATCH, 2048: issue 16 §2's 512-2048), where the encoder's recurrent GEMMs
 * run in several calls per step and the grid loop holds more than 8 slots per block: the utterances of a generated
 * model with a 2-layer predictor repeated into batches of 2048 and 1037, decoded by the WHILE graph, the default and
 * the grid loop with the weights in shared memory (tile 2) in fp32 and fp16, each bitwise the WHILE graph's result in
 * the same runner; fp32 tokens identical to the CPU's and probabilities within PROB_TOL, also with the recurrent GEMM
 * in calls of 512 and 2048 rows (RNNT_CUDA_R_REC: another kernel, so only against the CPU). */
static void test_runner_max(void **state)
{
    (void)state;
    static const int sizes[] = {RNNT_MAX_BATCH, 1037};
    enum { n_sizes = 2, n_modes = 5, maxB = RNNT_MAX_BATCH };
    static const char *modes[n_modes][4] = {{"RNNT_CUDA_DECODE", "while", NULL, NULL},
                                            {NULL, NULL, NULL, NULL},
                                            {"RNNT_CUDA_DECODE", "grid", "RNNT_CUDA_DEC_GRID_TILE", "2"},
                                            {"RNNT_CUDA_R_REC", "512", NULL, NULL},
                                            {"RNNT_CUDA_R_REC", "2048", NULL, NULL}};
    char err[512];
    const gm_cfg *cfg = &gen_models[1]; /* 2 predictor layers, time stacking, odd sizes */
    char *dir = tu_tmpdir();
    gm_write_model(dir, cfg, g_seed + 83);
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    uint64_t seed = g_seed + 89;
    utts u;
    make_utts(m, g_quick ? 40 : 90, &seed, &u);
    rnnt_input *bin = calloc((size_t)maxB, sizeof *bin);
    rnnt_result *ref = calloc((size_t)n_sizes * maxB, sizeof *ref), *out = calloc((size_t)maxB, sizeof *out);
    assert_non_null(bin);
    assert_non_null(ref);
    assert_non_null(out);
    rnnt_result cpu[N_UTT];
    memset(cpu, 0, sizeof cpu);
    {
        rnnt_runner *rc = make_runner(m, RNNT_BACKEND_CPU, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
        int order[N_UTT];
        for (int i = 0; i < u.n; i++) order[i] = i;
        decode_order(rc, &u, order, MAX_B, cpu);
        rnnt_runner_free(rc);
    }
    for (int prec = 0; prec < 2; prec++) {
        rnnt_precision p = prec ? RNNT_PRECISION_FP16 : RNNT_PRECISION_FP32;
        for (int k = 0; k < n_modes; k++) {
            const int other_gemm = modes[k][0] && !strcmp(modes[k][0], "RNNT_CUDA_R_REC");
            if (other_gemm && prec) continue; /* fp16: other bits than the WHILE graph's runner, no reference */
            char *saved = modes[k][0] ? env_push(modes[k][0], modes[k][1]) : NULL;
            char *saved2 = modes[k][2] ? env_push(modes[k][2], modes[k][3]) : NULL;
            rnnt_runner *r = make_runner(m, RNNT_BACKEND_CUDA, p, maxB, u.max_frames);
            if (modes[k][2]) env_pop(modes[k][2], saved2);
            if (modes[k][0]) env_pop(modes[k][0], saved);
            for (int s = 0; s < n_sizes; s++) {
                int nb = sizes[s];
                rnnt_result *want = ref + (size_t)s * maxB;
                for (int b = 0; b < nb; b++) bin[b] = u.in[(b * 7 + s) % u.n];
                memset(k == 0 ? want : out, 0, (size_t)nb * sizeof *out);
                if (rnnt_runner_decode(r, nb, bin, k == 0 ? want : out, NULL, err, sizeof err))
                    fail_msg("decode: %s", err);
                for (int b = 0; b < nb; b++) {
                    int i = (b * 7 + s) % u.n;
                    const rnnt_result *got = k == 0 ? &want[b] : &out[b];
                    if (!prec && (k == 0 || other_gemm) &&
                        (!same_result(got, &cpu[i]) ||
                         (cpu[i].status == RNNT_OK && !(probs_diff(got, &cpu[i]) <= PROB_TOL)))) {
                        describe("runner of max batch vs CPU", cfg->name, i, &u, got, &cpu[i]);
                        fail_msg("%s: fp32 %s %s, utterance %d in a batch of %d differs from the CPU", cfg->name,
                                 modes[k][0] ? modes[k][0] : "default", modes[k][0] ? modes[k][1] : "", i, nb);
                    }
                    if (k > 0 && !other_gemm && (!same_result(&out[b], &want[b]) || probs_diff(&out[b], &want[b]) != 0)) {
                        describe("runner of max batch", cfg->name, i, &u, &out[b], &want[b]);
                        fail_msg("%s: %s %s: slot %d of a batch of %d differs from the WHILE graph's", cfg->name,
                                 prec ? "fp16" : "fp32", modes[k][0] ? modes[k][1] : "default", b, nb);
                    }
                    if (k > 0) rnnt_result_clear(&out[b]);
                }
            }
            rnnt_runner_free(r);
        }
        clear_all(ref, n_sizes * maxB);
    }
    printf("%s: runners of %d, batches of %d and 1037: default and grid loop (tile 2) bitwise the WHILE graph in fp32 and "
           "fp16; fp32 identical to the CPU, also with recurrent GEMMs of 512 and 2048 rows\n",
           cfg->name, RNNT_MAX_BATCH, RNNT_MAX_BATCH);
    clear_all(cpu, u.n);
    free(bin);
    free(ref);
    free(out);
    free_utts(&u);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

static void check_golden_tokens(const char *dir)
{
    char path[8300], name[64], err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    rnnt_st_file g;
    if (rnnt_st_open(path, &g, err, sizeof err)) fail_msg("%s", err);
    char *nu = rnnt_st_metadata(&g, "n_utts");
    assert_non_null(nu);
    int n = atoi(nu);
    free(nu);
    rnnt_runner *r = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP32, 1, 100000);
    int labels = 0;
    for (int b = 0; b < n; b++) {
        snprintf(name, sizeof name, "utt%d.features", b);
        const rnnt_st_tensor *t = rnnt_st_find(&g, name);
        assert_non_null(t);
        float *x = malloc((size_t)(t->numel + 1) * sizeof(float));
        if (rnnt_st_read_f32(&g, t, x, err, sizeof err)) fail_msg("%s", err);
        rnnt_input in = {x, (int)t->shape[0], 0};
        snprintf(name, sizeof name, "utt%d.tokens", b);
        const rnnt_st_tensor *tt = rnnt_st_find(&g, name);
        snprintf(name, sizeof name, "utt%d.frames", b);
        const rnnt_st_tensor *tf = rnnt_st_find(&g, name);
        assert_non_null(tt);
        assert_non_null(tf);
        int32_t *wt = malloc((size_t)(tt->numel + 1) * 4), *wf = malloc((size_t)(tf->numel + 1) * 4);
        if (rnnt_st_read_i32(&g, tt, wt, err, sizeof err) || rnnt_st_read_i32(&g, tf, wf, err, sizeof err))
            fail_msg("%s", err);
        rnnt_result res;
        memset(&res, 0, sizeof res);
        if (rnnt_runner_decode(r, 1, &in, &res, NULL, err, sizeof err)) fail_msg("%s", err);
        if (res.n_tokens != (int)tt->numel || memcmp(res.tokens, wt, 4 * (size_t)tt->numel) ||
            memcmp(res.frames, wf, 4 * (size_t)tt->numel))
            fail_msg("%s utt%d: CUDA fp32 gives %d tokens, the PyTorch reference %d (or they differ)", dir, b, res.n_tokens,
                     (int)tt->numel);
        labels += res.n_tokens;
        rnnt_result_clear(&res);
        free(x);
        free(wt);
        free(wf);
    }
    printf("%s: %d golden utterances, %d labels: CUDA fp32 tokens and frames equal the PyTorch reference's\n", dir, n,
           labels);
    rnnt_runner_free(r);
    rnnt_st_close(&g);
    rnnt_model_free(m);
}

static void test_golden(void **state)
{
    (void)state;
    char root[4096];
    snprintf(root, sizeof root, "%s/golden", tu_data_dir());
    DIR *d = opendir(root);
    if (!d) {
        printf("no golden models under %s\n", root);
        skip();
    }
    /* RNNT_TEST_GOLDEN=glob: only the golden models whose names match, so a slow tool can take one
     * model per process; quick mode shortens the utterances as test_generated does */
    const char *only = getenv("RNNT_TEST_GOLDEN");
    int max_t = g_quick ? 40 : 120;
    struct dirent *e;
    int cases = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (only && *only && fnmatch(only, e->d_name, 0)) continue;
        char dir[8192], probe[8300];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        snprintf(probe, sizeof probe, "%s/golden.safetensors", dir);
        struct stat sb;
        if (stat(probe, &sb)) continue;
        check_golden_tokens(dir);
        check_model(dir, max_t, g_seed + 7 + (uint64_t)cases);
        cases++;
    }
    closedir(d);
    if (!cases) skip();
}

static void test_extra_models(void **state)
{
    (void)state;
    const char *list = getenv("RNNT_GPU_MODELS");
    if (!list || !*list) skip();
    char *copy = strdup(list), *save = NULL;
    int k = 0;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
        check_model(dir, 600, g_seed + 1000 + (uint64_t)k++);
    free(copy);
}

static void test_fp16_agreement(void **state)
{
    (void)state;
    if (!g_fp16_total) skip();
    double share = (double)g_fp16_same / (double)g_fp16_total;
    printf("fp16 vs CPU over all models above: %ld/%ld utterances identical (%.1f%%); persistent fp16 %ld/%ld; fused-step "
           "fp16 %ld/%ld\n", g_fp16_same, g_fp16_total, 100.0 * share, g_persist_same, g_fp16_total, g_fused_same, g_fp16_total);
    printf("fp32 vs CPU over all models above: token probabilities within %.3g, word confidences within %.3g (tolerance %g)\n",
           g_prob_worst, g_conf_worst, PROB_TOL);
    /* Random models have small decision margins, so fp16 rounding flips some near-ties; a real bug
     * (wrong layout, wrong gate) changes almost every utterance. */
    assert_true(share >= 0.80);
    assert_true((double)g_persist_same / (double)g_fp16_total >= 0.80);
    assert_true((double)g_fused_same / (double)g_fp16_total >= 0.80);
}

static void test_numeric(void **state)
{
    (void)state;
    gm_cfg c = gen_models[0];
    c.name = "g-overflow";
    c.out_scale = 1.0f;
    char *dir = tu_tmpdir();
    gm_write_model(dir, &c, g_seed + 55);
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    uint64_t seed = g_seed + 56;
    utts u;
    make_utts(m, 60, &seed, &u);
    int order[N_UTT] = {0};
    for (int i = 0; i < u.n; i++) order[i] = i;
    rnnt_result cpu[N_UTT], gpu[N_UTT];
    memset(cpu, 0, sizeof cpu);
    memset(gpu, 0, sizeof gpu);
    rnnt_runner *rc = make_runner(m, RNNT_BACKEND_CPU, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
    rnnt_runner *rg = make_runner(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP32, MAX_B, u.max_frames);
    decode_order(rc, &u, order, MAX_B, cpu);
    decode_order(rg, &u, order, MAX_B, gpu);
    int failed = 0;
    for (int i = 0; i < u.n; i++) {
        if (cpu[i].status != gpu[i].status || cpu[i].decode_steps != gpu[i].decode_steps)
            fail_msg("utterance %d: CPU status %d after %d steps, CUDA %d after %d", i, cpu[i].status, cpu[i].decode_steps,
                     gpu[i].status, gpu[i].decode_steps);
        failed += gpu[i].status == RNNT_ERR_NUMERIC;
        if (gpu[i].status == RNNT_ERR_NUMERIC) assert_null(gpu[i].text);
    }
    assert_true(failed > 0);
    /* fp16 cannot hold these weights: a clear error at create, not wrong answers later */
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CUDA;
    p.precision = RNNT_PRECISION_FP16;
    p.max_batch = 4;
    p.max_frames = 100;
    rnnt_runner *r16;
    rnnt_status st = rnnt_runner_create(m, &p, &r16, err, sizeof err);
    assert_int_equal(st, RNNT_ERR_UNSUPPORTED);
    printf("overflowing joint: %d/%d utterances fail with NUMERIC on both backends; fp16 create: %s\n", failed, u.n, err);
    clear_all(cpu, u.n);
    clear_all(gpu, u.n);
    rnnt_runner_free(rc);
    rnnt_runner_free(rg);
    free_utts(&u);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

static void test_errors(void **state)
{
    (void)state;
    char *dir = tu_tmpdir();
    gm_write_model(dir, &gen_models[2], g_seed + 77);
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CUDA;
    rnnt_runner *r;
    p.device = 99;
    assert_int_equal(rnnt_runner_create(m, &p, &r, err, sizeof err), RNNT_ERR_UNSUPPORTED);
    printf("device 99: %s\n", err);
    p.device = 0;
    /* far beyond any GPU's memory: a clean NOMEM, nothing leaked, the next runner works (skipped in quick
     * mode: the sanitizers count the failed allocations as errors) */
    if (!g_quick) {
        p.max_batch = RNNT_MAX_BATCH;
        p.max_frames = 10000000;
        rnnt_status st = rnnt_runner_create(m, &p, &r, err, sizeof err);
        assert_int_equal(st, RNNT_ERR_NOMEM);
        printf("huge runner: %s\n", err);
    }
    p.max_batch = 2;
    p.max_frames = 50;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    uint64_t seed = g_seed + 78;
    float *x = gm_features(51, m->feature_dim, m->fe_mean, m->fe_std, &seed);
    rnnt_input in[3] = {{x, 10, 0}, {x, 20, 0}, {x, 30, 0}};
    rnnt_result res[3];
    memset(res, 0, sizeof res);
    assert_int_equal(rnnt_runner_decode(r, 3, in, res, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    in[1].frames = 51;
    assert_int_equal(rnnt_runner_decode(r, 2, in, res, NULL, err, sizeof err), RNNT_ERR_TOO_LARGE);
    in[1].frames = 50;
    if (rnnt_runner_decode(r, 2, in, res, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(res[1].encoder_frames, rnnt_model_encoder_frames(m, 50));
    assert_string_equal(rnnt_runner_backend_name(r), "cuda");
    printf("device: %s\n", rnnt_runner_device_name(r));
    clear_all(res, 3);
    rnnt_runner_free(r);
    free(x);
    rnnt_model_free(m);
    tu_rmdir(dir);
}

int main(void)
{
    if (!rnnt_cuda_available()) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed by its time limit still shows how far it got */
    const char *q = getenv("RNNT_TEST_QUICK");
    g_quick = q && *q && strcmp(q, "0");
    if (g_quick) g_nutt = 12;
    const char *s = getenv("RNNT_TEST_SEED");
    g_seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generated),  cmocka_unit_test(test_golden),  cmocka_unit_test(test_extra_models),
        cmocka_unit_test(test_fp16_agreement), cmocka_unit_test(test_numeric), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_large_batch), cmocka_unit_test(test_runner_max),
    };
    /* RNNT_TEST_ONLY=pattern: only the tests whose names match (cmocka's * and ? globs); lets a slow
     * tool such as racecheck take one test per run. */
    const char *only = getenv("RNNT_TEST_ONLY");
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
