/* test_cuda_decoder.cu — the greedy multi-blank decoding loop alone (kernels/cu_decoder.h), on a synthetic encoder
 * output: random predictor and joint weights at awkward sizes (predictor hidden sizes not multiples of 64, one and two
 * layers, vocabularies of 29 and 37, big blanks [2, 4, 8], [2, 4], [3] and none, hard and soft LSTMs, relu and tanh
 * joints) and a random joint encoder projection (fproj) for each of a pool of utterances of odd and different lengths
 * (0 and 1 frames among them, one with a NaN in a frame), uploaded straight to the device. No encoder and no cuBLAS
 * run: the weights go up by one copy (cu_weights_upload) and the loop's first predictor step is our own kernel
 * (cu_pred_layer), so compute-sanitizer's racecheck sees nothing but the decoder's kernels.
 *
 * Batches of 1, 3, 17 and 130 utterances (and 300 outside quick mode), each rounded up to 8 slots as the runner does,
 * go through every loop variant the decoder can select (the table `kVariants`: the WHILE graph, unrolled or not, with
 * its predictor kernels taking 1, 4 or 8 rows at once, the host-polled loop, profiled or not, the default choice, the
 * fused loop by group, the cluster loop by blocks, warps and slots, the cooperative grid loop with its f4 staging
 * (VST), per-slot counters (CNT) and 1- or 2-blocks-an-SM build (OCC) on and off, its slices (each owning its utterances
 * and syncing only among itself: as many as fit, one, three), its other work splits and one block
 * an SM), set through the decoder's API, and each is checked:
 *   - bitwise equal to the reference variant (RNNT_TEST_REF, default `while`, the WHILE graph) in the same batch:
 *     tokens, frames, steps, frames skipped, status, final frame, label probabilities (fp16: the probabilities of the
 *     fused and cluster loops within 1e-3, cu_decoder.h promising the same tokens only);
 *   - in fp32, equal to a plain CPU decode of the same inputs built from the CPU engine's own predictor and joint code
 *     (engine/cpu_ops.h: rnnt_cpu_lstm_step, rnnt_cpu_joint_pred_proj, rnnt_cpu_joint_argmax_prob) and the rule of
 *     engine/multiblank.h: the same tokens, frames, steps, skipped frames, status and final frame, probabilities within
 *     1e-4. The sums run in other orders on the two sides, so an utterance whose CPU decode passed a decision closer
 *     than 1e-4 (relative) between its two best outputs may part ways there: such a near tie is printed and tolerated
 *     (at most 3 utterances per variant, model and precision); any other difference fails;
 *   - batch-invariant: an utterance's result in one batch size is bitwise its result in every other;
 *   - that the variant really ran (no fallback note from the decoder) and, for the VST/CNT switches, that the grid
 *     loop's f4 layout fits, without which those switches would change nothing.
 * Exits 77 without a GPU. RNNT_TEST_SEED replays; RNNT_TEST_QUICK=1 runs two models, batches up to 130 and utterances
 * of up to 23 frames (for the sanitizers); RNNT_TEST_ONLY=glob picks models (test_p1_big3_hard ...);
 * RNNT_TEST_VARIANTS=name,... picks variants (`test_cuda_decoder --list` prints them); RNNT_TEST_REF=name|none the
 * reference (none: each variant against the CPU in fp32 and against itself across batches only, so that under a
 * sanitizer only that variant's kernels run); RNNT_TEST_PRECISION=fp32|fp16 one precision; RNNT_TEST_SIZES=1,3,...
 * other batch sizes; RNNT_CUDA_MAPPED=0 results through a device buffer and one copy (for racecheck) as the runner. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

extern "C" {
#include <cmocka.h>
}

#include "cpu_ops.h"
#include "cu_dec_fused.h"
#include "cu_decoder.h"
#include "cu_weights.h"
#include "multiblank.h"
extern "C" {
#include "test_util.h"
}

static uint64_t g_seed;
static int g_quick;       /* RNNT_TEST_QUICK=1 */
static int g_mapped = 1;  /* RNNT_CUDA_MAPPED=0: results through a device buffer */
static int g_prec[2] = {1, 1}; /* fp16, fp32 (cu_dtype order) */
static std::vector<int> g_sizes;

#include "cu_test_check.h"

/* ------------------------------------------------------------------ the loop variants */

/* One way the decoder can run the loop: its mode and the settings of cu_decoder.h's setters (unroll and group 0: the
 * decoder's defaults; cluster blocks, warps, slots; grid blocks an SM, tile, vst, cnt, occ as their setters take them,
 * -1 = by batch size as by default), and the predictor kernels' rows at once (the runner's RNNT_CUDA_PRED_ROWS). */
typedef struct {
    const char *name;
    cu_dec_mode mode;
    int unroll, group;
    int cluster, warps, slots;
    int bps, tile, vst, cnt, occ;
    int rows; /* rows the per-step predictor kernels take at once (cu_pred_set_rows_at_once; 0: the default) */
    int slices; /* the grid loop's slices as cu_decoder_set_grid_slices takes them (0: one loop, grid barriers; -1 the default) */
    int pair;   /* its two emitter groups a pass (cu_decoder_set_grid_pair; 0 off, -1 the default) */
} dec_variant;

static const dec_variant kVariants[] = {
    {"while", CU_DEC_WHILE, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"while-u1", CU_DEC_WHILE, 1, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"while-rows1", CU_DEC_WHILE, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 1, 0, 0},
    {"while-rows8", CU_DEC_WHILE, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 8, 0, 0},
    {"host", CU_DEC_HOST, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"profile", CU_DEC_PROFILE, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"auto", CU_DEC_AUTO, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, -1, -1},
    {"fused", CU_DEC_FUSED, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"fused-g1", CU_DEC_FUSED, 0, 1, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"fused-g8", CU_DEC_FUSED, 0, 8, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"cluster8", CU_DEC_CLUSTER, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"cluster8-g3", CU_DEC_CLUSTER, 0, 0, 8, 8, 3, 0, 3, 1, -1, -1, 0, 0, 0},
    {"cluster8-w16", CU_DEC_CLUSTER, 0, 0, 8, 16, 0, 0, 3, 1, -1, -1, 0, 0, 0},
    {"cluster16", CU_DEC_CLUSTER, 0, 0, 16, 16, 1, 0, 3, 1, -1, -1, 0, 0, 0},
    {"grid", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, -1, -1},
    {"grid-vst0-occ1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 0, 0, 1, 0, 0, 0},
    {"grid-vst0-occ2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 0, 0, 2, 0, 0, 0},
    {"grid-cnt0-occ1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 0, 1, 0, 0, 0},
    {"grid-cnt0-occ2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 0, 2, 0, 0, 0},
    {"grid-cnt1-occ1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 1, 1, 0, 0, 0},
    {"grid-cnt1-occ2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 1, 2, 0, 0, 0},
    {"grid-1bps", CU_DEC_GRID, 0, 0, 8, 8, 0, 1, 3, 1, -1, -1, 0, 0, 0},
    {"grid-tile0", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 0, 1, -1, -1, 0, 0, 0},
    {"grid-tile1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 1, 1, -1, -1, 0, 0, 0},
    {"grid-tile2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 2, 1, -1, -1, 0, 0, 0},
    /* slices (issue 16 §3, session 7): as many as fit, a single one (its own barrier, not grid.sync), 3 (uneven) */
    {"grid-sl-cnt0-occ1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 0, 1, 0, CU_DEC_GRID_MAX_SLICES, 0},
    {"grid-sl-cnt0-occ2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 0, 2, 0, CU_DEC_GRID_MAX_SLICES, 0},
    {"grid-sl-cnt1-occ1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 1, 1, 0, CU_DEC_GRID_MAX_SLICES, 0},
    {"grid-sl-cnt1-occ2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 1, 2, 0, CU_DEC_GRID_MAX_SLICES, 0},
    {"grid-sl1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, -1, -1, 0, 1, 0},
    {"grid-sl3-tile1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 1, 1, -1, -1, 0, 3, 0},
    /* two groups of 4 emitters a pass in the layers' f4 dot products (RNNT_CUDA_DEC_GRID_PAIR, lab) */
    {"grid-pair-occ1", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 0, 1, 0, 0, 1},
    {"grid-pair-occ2", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 1, 1, 2, 0, 0, 1},
    {"grid-pair-sl-vst0", CU_DEC_GRID, 0, 0, 8, 8, 0, 0, 3, 0, 0, -1, 0, CU_DEC_GRID_MAX_SLICES, 1},
};
enum { kNumVariants = (int)(sizeof kVariants / sizeof kVariants[0]) };

static int g_ref;               /* index in kVariants, -1: none */
static int g_sel[kNumVariants]; /* selected by RNNT_TEST_VARIANTS (all by default) */

static int variant_index(const char *name, size_t len)
{
    for (int v = 0; v < kNumVariants; v++)
        if (strlen(kVariants[v].name) == len && !strncmp(kVariants[v].name, name, len)) return v;
    return -1;
}

/* ------------------------------------------------------------------ the synthetic model */

typedef struct {
    const char *name;
    int E, n_pred, H[2], J, V, n_big, dur[3], max_symbols;
    int soft, tanh_joint;
    int full_only; /* not in quick mode */
} dm_cfg;

/* Sizes no kernel is tuned for: hidden 45 / 70 / 77 / 100 / 63 / 130 (none a multiple of 64, some of no 8), joint 38
 * / 45 / 57 / 99, vocabularies 29 and 37; each fits every variant (the cluster loop's weights in shared memory, the
 * grid loop's f4 layout), which the test checks before it runs them. */
static const dm_cfg kModels[] = {
    {"p1-big3-hard", 13, 1, {77, 0}, 45, 29, 3, {2, 4, 8}, 3, 0, 0, 0},
    {"p2-none-soft", 9, 2, {45, 70}, 38, 37, 0, {0, 0, 0}, 4, 1, 1, 0},
    {"p2-big2-hard", 16, 2, {100, 63}, 57, 37, 2, {2, 4, 0}, 2, 0, 1, 1},
    {"p1-wide-soft", 24, 1, {130, 0}, 99, 29, 1, {3, 0, 0}, 5, 1, 0, 1},
};

/* A struct rnnt_model with what the decoder, cu_weights_upload and the CPU twin read; the encoder is one tiny layer
 * that only cu_weights_upload sees (the joint's encoder side is fproj, made here). joint.enc.bias is zero, so the
 * device's joint bias (enc + pred, cu_weights.h) is exactly the CPU's joint.pred.bias and fproj is the CPU's joint
 * encoder projection row for row. Not copyable (m points into it). */
struct dmodel {
    rnnt_model m;
    rnnt_lstm_layer enc, pred[2];
    std::vector<std::vector<float>> store;
    float *jout_b;              /* m.joint_out_b, rewritten by the calibration */
    std::vector<float> jout_b0; /* its random part */
    dmodel() { memset(&m, 0, sizeof m); }
    dmodel(const dmodel &) = delete;
    dmodel &operator=(const dmodel &) = delete;
    float *arr(size_t n)
    {
        store.emplace_back(n + 1, 0.0f);
        return store.back().data();
    }
};

static float *rand_arr(dmodel *d, size_t n, float bound, uint64_t *seed)
{
    float *a = d->arr(n);
    for (size_t i = 0; i < n; i++) a[i] = bound * tu_randu(seed);
    return a;
}

/* Input weights larger than PyTorch's default, as tests/gpu/gpu_models.c does, so that the predictor's state follows
 * its labels. */
static void rand_lstm(dmodel *d, rnnt_lstm_layer *L, int I, int H, uint64_t *seed)
{
    memset(L, 0, sizeof *L);
    L->input = I;
    L->hidden = H;
    L->time_stack = 1;
    L->w_ih = rand_arr(d, (size_t)4 * H * I, 2.5f / sqrtf((float)I), seed);
    L->w_hh = rand_arr(d, (size_t)4 * H * H, 1.0f / sqrtf((float)H), seed);
    float *b = rand_arr(d, (size_t)4 * H, 2.0f / sqrtf((float)H), seed);
    L->b_ih = b;
    L->b_hh = d->arr((size_t)4 * H); /* zeros: bias = b_ih + b_hh folded */
    L->bias = b;
}

static void model_build(dmodel *d, const dm_cfg *c, uint64_t seed)
{
    rnnt_model *m = &d->m;
    snprintf(m->name, sizeof m->name, "%s", c->name);
    m->feature_dim = 4;
    m->stacking = 1;
    m->act = c->soft ? RNNT_ACT_SOFT : RNNT_ACT_HARD;
    m->joint_act = c->tanh_joint ? RNNT_JOINT_TANH : RNNT_JOINT_RELU;
    const int He = 8;
    rand_lstm(d, &d->enc, 4, He, &seed);
    m->n_enc = 1;
    m->enc = &d->enc;
    m->embed_dim = c->E;
    m->embedding = rand_arr(d, (size_t)(c->V + 1) * c->E, 1.7f, &seed);
    m->n_pred = c->n_pred;
    for (int l = 0; l < c->n_pred; l++) rand_lstm(d, &d->pred[l], l ? c->H[l - 1] : c->E, c->H[l], &seed);
    m->pred = d->pred;
    const int Hp = c->H[c->n_pred - 1], J = c->J;
    m->joint_dim = J;
    m->joint_enc_w = rand_arr(d, (size_t)J * He, 1.0f, &seed);
    m->joint_enc_b = d->arr((size_t)J);
    m->joint_pred_w = rand_arr(d, (size_t)J * Hp, 2.0f / sqrtf((float)Hp), &seed);
    m->joint_pred_b = rand_arr(d, (size_t)J, 0.3f, &seed);
    m->vocab = c->V;
    m->n_big = c->n_big;
    for (int i = 0; i < c->n_big; i++) m->durations[i] = c->dur[i];
    m->n_out = c->V + c->n_big + 1;
    m->blank = c->V + c->n_big;
    m->max_symbols = c->max_symbols;
    m->joint_out_w = rand_arr(d, (size_t)m->n_out * J, 3.0f / sqrtf((float)J), &seed);
    d->jout_b = rand_arr(d, (size_t)m->n_out, 0.5f, &seed);
    d->jout_b0.assign(d->jout_b, d->jout_b + m->n_out);
    m->joint_out_b = d->jout_b;
}

/* The blank outputs' biases: their random part plus off (the big blanks 0.5 below the blank). */
static void model_blank_offset(dmodel *d, float off)
{
    const rnnt_model *m = &d->m;
    for (int k = 0; k < m->n_out; k++)
        d->jout_b[k] = d->jout_b0[k] + (k >= m->vocab ? off - (k < m->blank ? 0.5f : 0.0f) : 0.0f);
}

/* ------------------------------------------------------------------ results and the CPU twin */

struct slot_res {
    int n_tok = 0, steps = 0, skipped = 0, status = 0, t_final = 0;
    std::vector<int> tok, frm;
    std::vector<float> prob;
};

/* The predictor's step on label k (V: the start symbol) and the joint's predictor projection, by the CPU engine's
 * functions (the CPU backend's dec_pred_step does the same products for a row). h, c: [n_pred][ha]. */
static void cpu_pred_step(const rnnt_model *m, int k, float *h, float *c, int ha, float *scratch, float *gp)
{
    const float *x = m->embedding + (size_t)k * m->embed_dim;
    int ldx = m->embed_dim;
    for (int l = 0; l < m->n_pred; l++) {
        rnnt_cpu_lstm_step(&m->pred[l], m->act, 1, x, ldx, h + (size_t)l * ha, c + (size_t)l * ha, scratch);
        x = h + (size_t)l * ha;
        ldx = m->pred[l].hidden;
    }
    rnnt_cpu_joint_pred_proj(m, 1, x, gp);
}

/* Greedy multi-blank decoding of one utterance of T frames whose joint encoder projection is fp ([T][J]) on the CPU,
 * with the counters of the device's rule (cu_device.cuh dec_rule_slot: a non-finite joint output ends the utterance
 * with status 1 at t = T; a skip past the end does not count the frames beyond it). Returns the smallest relative
 * margin between the two best joint outputs over its decisions (a measure of how close it came to a tie). */
static double cpu_decode(const rnnt_model *m, const float *fp, int T, slot_res *r)
{
    *r = slot_res();
    const int J = m->joint_dim, V = m->vocab;
    int ha = 1;
    for (int l = 0; l < m->n_pred; l++) ha = m->pred[l].hidden > ha ? m->pred[l].hidden : ha;
    std::vector<float> h((size_t)m->n_pred * ha), c((size_t)m->n_pred * ha), scratch((size_t)4 * ha), gp(J),
        js((size_t)J + m->n_out), logits(m->n_out), hidden(J);
    double worst = INFINITY;
    cpu_pred_step(m, V, h.data(), c.data(), ha, scratch.data(), gp.data());
    int t = 0, labels = 0;
    while (t < T) {
        const float *frow = fp + (size_t)t * J, *grow = gp.data();
        int k;
        float p;
        rnnt_cpu_joint_argmax_prob(m, 1, &frow, &grow, &k, &p, js.data());
        r->steps++;
        if (k < 0) {
            r->status = 1;
            t = T;
            break;
        }
        rnnt_cpu_joint_logits(m, frow, grow, logits.data(), hidden.data());
        float second = -INFINITY;
        for (int o = 0; o < m->n_out; o++)
            if (o != k && logits[o] > second) second = logits[o];
        double mg = ((double)logits[k] - second) / (1.0 + fabs((double)logits[k]));
        if (mg < worst) worst = mg;
        if (k < V) {
            r->tok.push_back(k);
            r->frm.push_back(t);
            r->prob.push_back(p);
            r->n_tok++;
            if (++labels == m->max_symbols) {
                t++;
                labels = 0;
            }
            if (t < T) cpu_pred_step(m, k, h.data(), c.data(), ha, scratch.data(), gp.data());
        } else {
            int d = rnnt_mb_advance(k, V, m->blank, m->durations);
            r->skipped += d - 1 - rnnt_mb_past_end(t + d, T);
            t += d;
            labels = 0;
        }
    }
    r->t_final = t;
    return worst;
}

/* Share of decoding steps that emit a label, on the CPU twin, over a few random utterances. */
static double label_share(const rnnt_model *m, float fscale, uint64_t seed)
{
    long labels = 0, steps = 0;
    for (int u = 0; u < 8; u++) {
        int T = 30 + (int)(tu_rand_next(&seed) % 20);
        std::vector<float> fp((size_t)T * m->joint_dim);
        for (float &x : fp) x = fscale * tu_randu(&seed);
        slot_res r;
        cpu_decode(m, fp.data(), T, &r);
        labels += r.n_tok;
        steps += r.steps;
    }
    return steps ? (double)labels / (double)steps : 0.0;
}

/* Random joints favour the labels or never emit, and such a model tests little: bisect the blank outputs' bias
 * offset until 15-45% of the steps emit a label (the share falls as the offset grows), as gm_write_model does. */
static double calibrate(dmodel *d, float fscale, uint64_t seed)
{
    float lo = -30.0f, hi = 30.0f, off = 0.0f;
    double sh = 0;
    for (int it = 0; it < 20; it++) {
        model_blank_offset(d, off);
        sh = label_share(&d->m, fscale, seed);
        if (sh > 0.45)
            lo = off;
        else if (sh < 0.15)
            hi = off;
        else
            break;
        off = 0.5f * (lo + hi);
    }
    return sh;
}

/* 0 when a and b agree (probabilities: bitwise when ptol < 0, else within ptol, and the largest difference into
 * *pworst), else 1 with the first difference in msg. */
static int res_diff(const slot_res &a, const slot_res &b, double ptol, double *pworst, char *msg, size_t len)
{
    if (a.status != b.status || a.n_tok != b.n_tok || a.steps != b.steps || a.skipped != b.skipped ||
        a.t_final != b.t_final) {
        snprintf(msg, len, "status %d / %d, tokens %d / %d, steps %d / %d, skipped %d / %d, final frame %d / %d",
                 a.status, b.status, a.n_tok, b.n_tok, a.steps, b.steps, a.skipped, b.skipped, a.t_final, b.t_final);
        for (int i = 0; i < a.n_tok && i < b.n_tok; i++)
            if (a.tok[i] != b.tok[i] || a.frm[i] != b.frm[i]) {
                size_t n = strlen(msg);
                snprintf(msg + n, len - n, "; first difference at token %d: %d@%d / %d@%d", i, a.tok[i], a.frm[i],
                         b.tok[i], b.frm[i]);
                break;
            }
        return 1;
    }
    for (int i = 0; i < a.n_tok; i++)
        if (a.tok[i] != b.tok[i] || a.frm[i] != b.frm[i]) {
            snprintf(msg, len, "token %d: %d at frame %d / %d at frame %d", i, a.tok[i], a.frm[i], b.tok[i], b.frm[i]);
            return 1;
        }
    for (int i = 0; i < a.n_tok; i++) {
        if (ptol < 0) {
            if (memcmp(&a.prob[i], &b.prob[i], sizeof(float))) {
                snprintf(msg, len, "token %d: probability %.9g / %.9g", i, a.prob[i], b.prob[i]);
                return 1;
            }
            continue;
        }
        double d = fabs((double)a.prob[i] - b.prob[i]);
        if (!(d <= ptol)) {
            snprintf(msg, len, "token %d: probability %.9g / %.9g (tolerance %g)", i, a.prob[i], b.prob[i], ptol);
            return 1;
        }
        if (pworst && d > *pworst) *pworst = d;
    }
    return 0;
}

/* ------------------------------------------------------------------ one batch on the device */

/* The synthetic encoder output of one batch, as the runner hands it to the decoder: fproj [nbs][tstride][jp] fp32
 * (pad columns zero; rows past an utterance's end and every row of the padding slots NaN, so a frame the loop must
 * not read would show), t_enc [nbs] (0 for the padding slots), the frame stride. */
struct batch_dev {
    int B, nbs, tstride;
    float *fproj;
    int *t_enc, *fstride;
};

static void batch_upload(const rnnt_model *m, const std::vector<int> &T, const std::vector<std::vector<float>> &fp,
                         const int *order, int B, batch_dev *bd)
{
    const int J = m->joint_dim, jp = cu_round_up_i(J, CU_PAD);
    bd->B = B;
    bd->nbs = cu_round_up_i(B, 8);
    bd->tstride = 1;
    for (int b = 0; b < B; b++) bd->tstride = T[order[b]] > bd->tstride ? T[order[b]] : bd->tstride;
    size_t n = (size_t)bd->nbs * bd->tstride * jp;
    std::vector<float> img(n, NAN);
    std::vector<int> te(bd->nbs, 0);
    for (int b = 0; b < B; b++) {
        int u = order[b];
        te[b] = T[u];
        for (int t = 0; t < T[u]; t++) {
            float *row = img.data() + ((size_t)b * bd->tstride + t) * jp;
            memcpy(row, fp[u].data() + (size_t)t * J, (size_t)J * sizeof(float));
            for (int j = J; j < jp; j++) row[j] = 0.0f;
        }
    }
    CK(cudaMalloc((void **)&bd->fproj, n * sizeof(float)));
    CK(cudaMalloc((void **)&bd->t_enc, (size_t)bd->nbs * sizeof(int)));
    CK(cudaMalloc((void **)&bd->fstride, sizeof(int)));
    CK(cudaMemcpy(bd->fproj, img.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bd->t_enc, te.data(), (size_t)bd->nbs * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(bd->fstride, &bd->tstride, sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize()); /* pageable copies on the legacy stream: done before the decoder's stream reads */
}

static void batch_free(batch_dev *bd)
{
    CK(cudaFree(bd->fproj));
    CK(cudaFree(bd->t_enc));
    CK(cudaFree(bd->fstride));
}

/* The sizes of cu_decoder.cu's fused_net for these weights (what the plans read), for the checks that a variant
 * runs what it names. */
static void net_sizes(const cu_weights *w, int bcap, cu_dec_fused_net *net)
{
    memset(net, 0, sizeof *net);
    net->n_pred = w->n_pred;
    for (int l = 0; l < w->n_pred; l++) {
        const cu_lstm_w *L = &w->pred[l];
        cu_dec_fused_layer *F = &net->L[l];
        F->I = l == 0 ? w->E : w->pred[l - 1].hidden;
        F->ld_ih = L->in_w;
        F->H = L->hidden;
        F->ld_hh = L->hp;
        F->hpar = (size_t)bcap * L->hp;
        F->ldh = L->hp;
        F->ldc = L->hp;
    }
    net->ld_emb = w->ep;
    net->ldwp = w->hpp;
    net->J = w->J;
    net->ldg = w->jp;
    net->ldw = w->jp;
    net->n_out = w->n_out;
    net->ldf = w->jp;
}

/* Fails unless variant v runs as named on this batch: its plan fits (the decoder would fall back to the WHILE graph
 * with a note otherwise, which run_variant checks too) and, for the grid loop's f4 switches, the f4 layout fits. */
static void check_plan(const dec_variant *v, const cu_weights *w, int nbs, int B)
{
    cu_dec_fused_net net;
    net_sizes(w, nbs, &net);
    const char *why = NULL;
    if (v->mode == CU_DEC_GRID) {
        cu_dec_grid_plan pl;
        const int sl = v->slices < 0 ? B >= CU_DEC_GRID_SLICES_AUTO_MIN && CU_DEC_GRID_SLICES_AUTO_MIN > 0 : v->slices > 0;
        const int occ2 = v->occ < 0 ? B > (sl ? CU_DEC_GRID_SL_OCC1_AUTO_MAX : CU_DEC_GRID_OCC1_AUTO_MAX) : v->occ == 2;
        if (!cu_dec_grid_plan_make(&net, w->dt, w->act, w->joint_act, nbs, v->bps, v->tile >= 2 ? v->tile - 1 : 0, occ2,
                                   &pl, &why))
            fail_msg("variant %s, %d slots: the grid loop cannot run: %s", v->name, nbs, why ? why : "?");
        if (v->tile == 3 && !pl.f4)
            fail_msg("variant %s, %d slots: the grid loop's f4 layout does not fit (%zu bytes): VST/CNT untested", v->name,
                     nbs, pl.smem);
        if (v->tile && !cu_dec_grid_tiles_fit(&net, &pl))
            fail_msg("variant %s: more unit groups than the grid loop's %d blocks", v->name, pl.blocks);
        if (v->slices > 0 && cu_dec_grid_slices_fit(&net, &pl, nbs, v->slices) < 1)
            fail_msg("variant %s, %d slots: no slice of the grid loop fits: untested", v->name, nbs);
    } else if (v->mode == CU_DEC_CLUSTER) {
        cu_dec_cluster_plan pl;
        if (!cu_dec_cluster_plan_make(&net, w->dt, w->V, nbs, v->cluster, v->warps, v->slots, &pl, &why))
            fail_msg("variant %s, %d slots: the cluster loop cannot run: %s", v->name, nbs, why ? why : "?");
    } else if (v->mode == CU_DEC_FUSED) {
        if (cu_dec_fused_group(&net, v->group ? v->group : CU_DEC_GROUP_DEFAULT) < 1)
            fail_msg("variant %s: the fused loop does not fit this model", v->name);
    }
}

/* Decodes the batch with variant v on a fresh decoder (its settings through the API, as the runner's environment
 * switches set them) and returns slots b < B. */
static void run_variant(const dec_variant *v, const cu_weights *w, cudaStream_t s, const batch_dev *bd,
                        std::vector<slot_res> *out)
{
    check_plan(v, w, bd->nbs, bd->B);
    cu_decoder *d = NULL;
    RK(cu_decoder_create(w, s, bd->nbs, bd->tstride, g_mapped, &d, err, errlen));
    if (v->unroll) cu_decoder_set_unroll(d, v->unroll);
    if (v->group) cu_decoder_set_group(d, v->group);
    cu_decoder_set_cluster(d, v->cluster, v->warps, v->slots);
    cu_decoder_set_grid(d, v->bps, v->tile);
    cu_decoder_set_grid_staging(d, v->vst, v->cnt, v->occ);
    cu_decoder_set_grid_slices(d, v->slices);
    cu_decoder_set_grid_pair(d, v->pair);
    cu_pred_set_rows_at_once(v->rows ? v->rows : CU_PRED_ROWS_DEFAULT);
    cu_dec_profile prof;
    memset(&prof, 0, sizeof prof);
    RK(cu_decoder_run(d, v->mode, bd->nbs, bd->B, bd->t_enc, bd->fstride, bd->fproj, &prof, err, errlen));
    CK(cudaStreamSynchronize(s));
    cu_pred_set_rows_at_once(CU_PRED_ROWS_DEFAULT);
    if (v->mode == CU_DEC_PROFILE && !(prof.iterations > 0 && prof.joint_ms > 0 && prof.pred_ms > 0))
        fail_msg("variant %s: the profiled loop measured nothing (%d steps)", v->name, prof.iterations);
    CK(cudaGetLastError());
    const char *note = NULL;
    cu_dec_mode forced = cu_decoder_mode(d, &note);
    if (v->mode != CU_DEC_AUTO && (note || (v->mode == CU_DEC_WHILE && forced != CU_DEC_WHILE)))
        fail_msg("variant %s, %d slots: the decoder ran another loop: %s", v->name, bd->nbs, note ? note : "host loop");
    out->assign(bd->B, slot_res());
    for (int b = 0; b < bd->B; b++) {
        cu_dec_result r = cu_decoder_result(d, b);
        slot_res &o = (*out)[b];
        o.n_tok = r.n_tok;
        o.steps = r.steps;
        o.skipped = r.skipped;
        o.status = r.status;
        o.t_final = r.t_final;
        int n = r.n_tok < bd->tstride * w->max_symbols ? r.n_tok : bd->tstride * w->max_symbols;
        o.tok.assign(r.tokens, r.tokens + n);
        o.frm.assign(r.frames, r.frames + n);
        o.prob.assign(r.probs, r.probs + n);
    }
    cu_decoder_free(d);
}

/* ------------------------------------------------------------------ the check */

#define TIE_TOL 1e-4  /* relative margin below which fp32 sums in another order may pick the other output */
#define PROB_TOL 1e-4 /* fp32 label probabilities against the CPU's (test_cuda_engine.c's bound) */
#define MAX_TIES 3 /* utterances per variant, model and precision */

/* Utterance order of a batch of B from the pool: the special utterances 0-3 (the longest, 0 frames, 1 frame, the
 * NaN frame) first where they fit, the rest at random, then the first B shuffled. */
static std::vector<int> batch_order(int n_pool, int B, uint64_t *seed)
{
    std::vector<int> o(n_pool);
    for (int i = 0; i < n_pool; i++) o[i] = i;
    for (int i = n_pool - 1; i > 0; i--) {
        int j = (int)(tu_rand_next(seed) % (uint64_t)(i + 1)), t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
    for (int sp = 0; sp < 4 && sp < n_pool; sp++)
        for (int i = 0; i < n_pool; i++)
            if (o[i] == sp) {
                o[i] = o[sp];
                o[sp] = sp;
                break;
            }
    for (int i = B - 1; i > 0; i--) {
        int j = (int)(tu_rand_next(seed) % (uint64_t)(i + 1)), t = o[i];
        o[i] = o[j];
        o[j] = t;
    }
    return o;
}

struct var_stats {
    int batches = 0, utts = 0, vs_ref = 0, vs_cpu = 0, ties = 0, invariant = 0, labels = 0, steps = 0, skipped = 0,
        nonfinite = 0;
    double pworst_cpu = 0, pworst_ref = 0;
};

static void check_model(const dm_cfg *c, uint64_t mseed)
{
    if (c->full_only && g_quick) {
        printf("%s: not in quick mode\n", c->name);
        return;
    }
    uint64_t seed = g_seed + mseed;
    dmodel *dm = new dmodel;
    model_build(dm, c, seed);
    const rnnt_model *m = &dm->m;
    const float fscale = 2.0f;
    double share = calibrate(dm, fscale, seed ^ 0x5151);
    /* the pool: 0 the longest, 1 no frames, 2 one frame, 3 a NaN in its middle frame, the others at random */
    const int n_pool = g_quick ? 130 : 300, tmax = g_quick ? 23 : 97, J = m->joint_dim;
    int max_b = 0;
    for (int B : g_sizes) max_b = B > max_b ? B : max_b;
    const int n_utt = n_pool > max_b ? n_pool : max_b;
    std::vector<int> T(n_utt);
    std::vector<std::vector<float>> fp(n_utt);
    for (int i = 0; i < n_utt; i++) {
        T[i] = i == 0 ? tmax : i == 1 ? 0 : i == 2 ? 1 : i == 3 ? 9 + tmax / 3 : 1 + (int)(tu_rand_next(&seed) % (uint64_t)tmax);
        fp[i].resize((size_t)T[i] * J + 1);
        for (size_t k = 0; k < (size_t)T[i] * J; k++) fp[i][k] = fscale * tu_randu(&seed);
    }
    fp[3][(size_t)(T[3] / 2) * J + J / 3] = NAN;
    std::vector<slot_res> cpu(n_utt);
    std::vector<double> margin(n_utt);
    long cpu_labels = 0, cpu_steps = 0;
    for (int i = 0; i < n_utt; i++) {
        margin[i] = cpu_decode(m, fp[i].data(), T[i], &cpu[i]);
        cpu_labels += cpu[i].n_tok;
        cpu_steps += cpu[i].steps;
    }
    if (cpu_labels == 0) fail_msg("%s: the CPU twin emits no label: a comparison would prove little", c->name);
    printf("%s: %d utterances of 0-%d frames (label share %.2f after calibration; CPU twin: %ld labels in %ld steps; "
           "utterance 3 status %d)\n",
           c->name, n_utt, tmax, share, cpu_labels, cpu_steps, cpu[3].status);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int dti = 1; dti >= 0; dti--) { /* fp32 first */
        if (!g_prec[dti]) continue;
        const cu_dtype dt = (cu_dtype)dti;
        const char *dn = dt == CU_F32 ? "fp32" : "fp16";
        cu_weights w;
        RK(cu_weights_upload(m, dt, &w, err, errlen));
        std::vector<var_stats> vs(kNumVariants);
        std::vector<std::vector<slot_res>> seen(kNumVariants, std::vector<slot_res>(n_utt));
        std::vector<std::vector<char>> have(kNumVariants, std::vector<char>(n_utt, 0)), tied = have;
        uint64_t oseed = seed + 17;
        for (int B : g_sizes) {
            std::vector<int> order = batch_order(n_utt, B, &oseed);
            batch_dev bd;
            batch_upload(m, T, fp, order.data(), B, &bd);
            std::vector<slot_res> ref, got;
            if (g_ref >= 0) run_variant(&kVariants[g_ref], &w, s, &bd, &ref);
            for (int v = 0; v < kNumVariants; v++) {
                if (!g_sel[v] && v != g_ref) continue;
                const dec_variant *var = &kVariants[v];
                if (v == g_ref)
                    got = ref;
                else
                    run_variant(var, &w, s, &bd, &got);
                var_stats &st = vs[v];
                st.batches++;
                /* fp16: the fused and cluster loops promise the tokens, not the probabilities' bits (cu_decoder.h) */
                const cu_dec_mode rm = g_ref >= 0 ? kVariants[g_ref].mode : var->mode;
                const int loose16 = dt == CU_F16 && (var->mode == CU_DEC_FUSED || var->mode == CU_DEC_CLUSTER ||
                                                     var->mode == CU_DEC_AUTO || rm == CU_DEC_FUSED ||
                                                     rm == CU_DEC_CLUSTER || rm == CU_DEC_AUTO);
                for (int b = 0; b < B; b++) {
                    const int u = order[b];
                    const slot_res &r = got[b];
                    char msg[512];
                    st.utts++;
                    st.labels += r.n_tok;
                    st.steps += r.steps;
                    st.skipped += r.skipped;
                    st.nonfinite += r.status == 1;
                    if (r.status == 2) fail_msg("%s %s %s: utterance %d overran the loop's bound", c->name, dn, var->name, u);
                    if (g_ref >= 0 && v != g_ref) {
                        if (res_diff(r, ref[b], loose16 ? 1e-3 : -1.0, &st.pworst_ref, msg, sizeof msg))
                            fail_msg("%s %s %s, batch of %d, slot %d (utterance %d, %d frames): differs from %s: %s (got / "
                                     "reference)",
                                     c->name, dn, var->name, B, b, u, T[u], kVariants[g_ref].name, msg);
                        st.vs_ref++;
                    }
                    if (dt == CU_F32) {
                        if (res_diff(r, cpu[u], PROB_TOL, &st.pworst_cpu, msg, sizeof msg)) {
                            if (!tied[v][u]) st.ties++;
                            tied[v][u] = 1;
                            if (!(margin[u] < TIE_TOL) || st.ties > MAX_TIES)
                                fail_msg("%s fp32 %s, batch of %d, slot %d (utterance %d, %d frames): differs from the CPU "
                                         "twin: %s (GPU / CPU; the CPU's closest decision margin %.3g)",
                                         c->name, var->name, B, b, u, T[u], msg, margin[u]);
                            printf("%s fp32 %s, batch of %d: utterance %d parts from the CPU twin at a near tie (margin "
                                   "%.3g): %s\n",
                                   c->name, var->name, B, u, margin[u], msg);
                        } else {
                            st.vs_cpu++;
                        }
                    }
                    /* batch invariance; across the default's loops (auto: cluster below 17, grid above) in fp16 the
                     * probabilities are not promised */
                    if (have[v][u]) {
                        if (res_diff(r, seen[v][u], dt == CU_F16 && var->mode == CU_DEC_AUTO ? 1e-3 : -1.0, NULL, msg,
                                     sizeof msg))
                            fail_msg("%s %s %s: utterance %d differs between batches (now %d): %s (now / before)", c->name,
                                     dn, var->name, u, B, msg);
                        st.invariant++;
                    } else {
                        seen[v][u] = r;
                        have[v][u] = 1;
                    }
                }
            }
            batch_free(&bd);
        }
        char sizes[128];
        int p = 0;
        for (size_t i = 0; i < g_sizes.size(); i++) p += snprintf(sizes + p, sizeof sizes - p, "%s%d", i ? "," : "", g_sizes[i]);
        for (int v = 0; v < kNumVariants; v++) {
            if (!g_sel[v] && v != g_ref) continue;
            const var_stats &st = vs[v];
            char vref[160] = "";
            if (g_ref >= 0 && v != g_ref) {
                char pw[48] = ""; /* fp16's looser probabilities, when any differed */
                if (st.pworst_ref > 0) snprintf(pw, sizeof pw, ", probabilities within %.2g", st.pworst_ref);
                snprintf(vref, sizeof vref, "%d bitwise the reference (%s%s), ", st.vs_ref, kVariants[g_ref].name, pw);
            }
            char vcpu[160] = "";
            if (dt == CU_F32)
                snprintf(vcpu, sizeof vcpu, "%d equal to the CPU twin (probabilities within %.2g, %d near ties), ",
                         st.vs_cpu, st.pworst_cpu, st.ties);
            printf("%s %s %s: batches %s: %d utterances, %d labels, %d steps, %d frames skipped, %d non-finite; %s%s%d "
                   "batch-invariant repeats%s\n",
                   c->name, dn, kVariants[v].name, sizes, st.utts, st.labels, st.steps, st.skipped, st.nonfinite, vref, vcpu,
                   st.invariant, v == g_ref ? " (the reference)" : "");
        }
        cu_weights_free(&w);
    }
    CK(cudaStreamDestroy(s));
    delete dm;
}

static void test_p1_big3_hard(void **state)
{
    (void)state;
    check_model(&kModels[0], 101);
}
static void test_p2_none_soft(void **state)
{
    (void)state;
    check_model(&kModels[1], 202);
}
static void test_p2_big2_hard(void **state)
{
    (void)state;
    check_model(&kModels[2], 303);
}
static void test_p1_wide_soft(void **state)
{
    (void)state;
    check_model(&kModels[3], 404);
}

/* Settings from the environment; 0, or 1 with a message on stderr for a bad one. */
static int read_env(void)
{
    const char *q = getenv("RNNT_TEST_QUICK");
    g_quick = q && *q && strcmp(q, "0");
    const char *mp = getenv("RNNT_CUDA_MAPPED");
    g_mapped = !(mp && strcmp(mp, "0") == 0);
    const char *pr = getenv("RNNT_TEST_PRECISION");
    if (pr && *pr) {
        if (strcmp(pr, "fp32") && strcmp(pr, "fp16")) {
            fprintf(stderr, "RNNT_TEST_PRECISION=%s: want fp32 or fp16\n", pr);
            return 1;
        }
        g_prec[CU_F32] = !strcmp(pr, "fp32");
        g_prec[CU_F16] = !strcmp(pr, "fp16");
    }
    const char *sz = getenv("RNNT_TEST_SIZES");
    if (sz && *sz) {
        for (const char *p = sz; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 1 || v > 2048 || (*end && *end != ',')) {
                fprintf(stderr, "RNNT_TEST_SIZES=%s: want batch sizes 1-2048, comma-separated\n", sz);
                return 1;
            }
            g_sizes.push_back((int)v);
            p = *end ? end + 1 : end;
        }
    } else {
        g_sizes = {1, 3, 17, 130};
        if (!g_quick) g_sizes.push_back(300);
    }
    const char *vs = getenv("RNNT_TEST_VARIANTS");
    for (int v = 0; v < kNumVariants; v++) g_sel[v] = !(vs && *vs);
    if (vs && *vs)
        for (const char *p = vs; *p;) {
            size_t n = strcspn(p, ",");
            int v = variant_index(p, n);
            if (v < 0) {
                fprintf(stderr, "RNNT_TEST_VARIANTS: no variant '%.*s' (test_cuda_decoder --list)\n", (int)n, p);
                return 1;
            }
            g_sel[v] = 1;
            p += n + (p[n] == ',');
        }
    const char *rf = getenv("RNNT_TEST_REF");
    g_ref = 0; /* while */
    if (rf && *rf) {
        g_ref = strcmp(rf, "none") ? variant_index(rf, strlen(rf)) : -1;
        if (g_ref < 0 && strcmp(rf, "none")) {
            fprintf(stderr, "RNNT_TEST_REF=%s: no such variant (test_cuda_decoder --list), or none\n", rf);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--list")) { /* the variants, one a line (for tests/gpu/device-race-decoder.sh) */
        for (int v = 0; v < kNumVariants; v++) printf("%s\n", kVariants[v].name);
        return 0;
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* a run killed by its time limit still shows how far it got */
    if (read_env()) return 2;
    const char *s = getenv("RNNT_TEST_SEED");
    g_seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu%s, reference %s, results %s\n", (unsigned long long)g_seed, g_quick ? " (quick)" : "",
           g_ref >= 0 ? kVariants[g_ref].name : "none", g_mapped ? "mapped" : "through a device buffer");
    cu_pred_set_rows_at_once(CU_PRED_ROWS_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p1_big3_hard),
        cmocka_unit_test(test_p2_none_soft),
        cmocka_unit_test(test_p2_big2_hard),
        cmocka_unit_test(test_p1_wide_soft),
    };
    /* RNNT_TEST_ONLY=pattern: only the tests whose names match (cmocka's globs), as test_cuda_engine */
    const char *only = getenv("RNNT_TEST_ONLY");
    if (only && *only) cmocka_set_test_filter(only);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
