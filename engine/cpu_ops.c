/* cpu_ops.c — see cpu_ops.h. */
#include "cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

float rnnt_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void rnnt_cpu_gemm_nt(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

/* 4 floats, lane by lane the same IEEE operations as the scalar code (the hard cell's main loop). */
typedef float v4 __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));

static inline v4 v4_set(float x) { return (v4){x, x, x, x}; }
static inline v4 v4_load(const float *p)
{
    v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void v4_store(float *p, v4 v) { memcpy(p, &v, sizeof v); }
/* x <= lo ? lo : (x >= hi ? hi : x) per lane, as rnnt_hardsigmoid / rnnt_hardtanh do: a NaN fails both
 * comparisons and stays. */
static inline v4 v4_clamp(v4 x, float lo, float hi)
{
    v4 vlo = v4_set(lo), vhi = v4_set(hi);
    v4i below = x <= vlo, above = x >= vhi, xi = (v4i)x;
    xi = (xi & ~below) | ((v4i)vlo & below);
    xi = (xi & ~above) | ((v4i)vhi & above);
    return (v4)xi;
}

void rnnt_cpu_lstm_pointwise(rnnt_lstm_act act, int M, int H, const float *pre, int ldpre, float *h, int ldh, float *c, int ldc)
{
    for (int r = 0; r < M; r++) {
        const float *a = pre + (size_t)r * ldpre;
        float *hr = h + (size_t)r * ldh, *cr = c + (size_t)r * ldc;
        if (act == RNNT_ACT_HARD) {
            int j = 0;
            for (; j + 4 <= H; j += 4) {
                v4 i = v4_clamp(v4_load(a + j) / v4_set(6.0f) + v4_set(0.5f), 0.0f, 1.0f);
                v4 f = v4_clamp(v4_load(a + H + j) / v4_set(6.0f) + v4_set(0.5f), 0.0f, 1.0f);
                v4 g = v4_clamp(v4_load(a + 2 * H + j), -1.0f, 1.0f);
                v4 o = v4_clamp(v4_load(a + 3 * H + j) / v4_set(6.0f) + v4_set(0.5f), 0.0f, 1.0f);
                v4 cn = f * v4_load(cr + j) + i * g;
                v4_store(cr + j, cn);
                v4_store(hr + j, o * v4_clamp(cn, -1.0f, 1.0f));
            }
            for (; j < H; j++) {
                float i = rnnt_hardsigmoid(a[j]), f = rnnt_hardsigmoid(a[H + j]), g = rnnt_hardtanh(a[2 * H + j]),
                      o = rnnt_hardsigmoid(a[3 * H + j]);
                float cn = f * cr[j] + i * g;
                cr[j] = cn;
                hr[j] = o * rnnt_hardtanh(cn);
            }
        } else {
            for (int j = 0; j < H; j++) {
                float i = rnnt_sigmoidf(a[j]), f = rnnt_sigmoidf(a[H + j]), g = tanhf(a[2 * H + j]), o = rnnt_sigmoidf(a[3 * H + j]);
                cr[j] = f * cr[j] + i * g;
                hr[j] = o * tanhf(cr[j]);
            }
        }
    }
}

size_t rnnt_cpu_lstm_step_scratch(const rnnt_lstm_layer *L, int M) { return (size_t)M * 4 * L->hidden; }

void rnnt_cpu_lstm_input_product(const rnnt_lstm_layer *L, int M, const float *x, int ldx, float *pre)
{
    rnnt_cpu_gemm_nt_rows(M, 4 * L->hidden, L->input, x, ldx, L->w_ih, L->input, 0.0f, pre, 4 * L->hidden);
}

void rnnt_cpu_lstm_step_from_input(const rnnt_lstm_layer *L, rnnt_lstm_act act, int M, float *pre, float *h, float *c)
{
    int H = L->hidden, G = 4 * H;
    rnnt_cpu_gemm_nt_rows(M, G, H, h, H, L->w_hh, H, 1.0f, pre, G);
    for (int r = 0; r < M; r++)
        for (int j = 0; j < G; j++) pre[(size_t)r * G + j] += L->bias[j];
    rnnt_cpu_lstm_pointwise(act, M, H, pre, G, h, H, c, H);
}

void rnnt_cpu_lstm_step(const rnnt_lstm_layer *L, rnnt_lstm_act act, int M, const float *x, int ldx, float *h, float *c, float *scratch)
{
    rnnt_cpu_lstm_input_product(L, M, x, ldx, scratch);
    rnnt_cpu_lstm_step_from_input(L, act, M, scratch, h, c);
}

void rnnt_cpu_frontend(const struct rnnt_model *m, const float *feats, int T, float *out)
{
    int F = m->feature_dim, T1 = rnnt_stacked_len(T, m->stacking);
    for (int t = 0; t < T; t++)
        for (int f = 0; f < F; f++) {
            float v = feats[(size_t)t * F + f];
            out[(size_t)t * F + f] = m->fe_mean ? (v - m->fe_mean[f]) / m->fe_std[f] : v;
        }
    memset(out + (size_t)T * F, 0, sizeof(float) * ((size_t)T1 * m->stacking - (size_t)T) * F);
}

/* ---- the batched encoder ------------------------------------------------------------------- */

#define MAX_ENC_LAYERS 32

/* Lengths of one utterance at every layer: T[0] = after frame stacking, T[l] = input rows of layer l. */
static void layer_lengths(const struct rnnt_model *m, int frames, int *T)
{
    T[0] = rnnt_stacked_len(frames, m->stacking);
    for (int l = 1; l <= m->n_enc; l++) T[l] = rnnt_stacked_len(T[l - 1], m->enc[l - 1].time_stack);
}

/* ---- one encoder layer, shared by the whole-utterance encoder and the streams ------------------- */

/* Every product here is rnnt_cpu_gemm_nt_rows: a row's result is the same whether it is projected
 * with the rest of its utterance, alone, or in a chunk of any size (OpenBLAS is not: on this project's
 * machine a 1- or 3-row sgemm gives other bits for a row than the 250-row one), so a stream fed in any
 * chunks computes exactly what the whole utterance does. */
size_t rnnt_cpu_lstm_layer_batch_work(const rnnt_lstm_layer *L, int n)
{
    /* h (R), c (H), gates (4H), o * phi(c) before the projection (H), the order */
    return (size_t)n * (rnnt_lstm_out(L) + 6 * (size_t)L->hidden) + (size_t)n;
}

void rnnt_cpu_layer_norm(int M, int N, const float *x, int ldx, const float *w, const float *b, float *y, int ldy)
{
    for (int r = 0; r < M; r++) {
        const float *xr = x + (size_t)r * ldx;
        float *yr = y + (size_t)r * ldy;
        double sum = 0.0;
        for (int j = 0; j < N; j++) sum += xr[j];
        float mean = (float)(sum / N);
        double ss = 0.0;
        for (int j = 0; j < N; j++) {
            float d = xr[j] - mean;
            ss += (double)d * d;
        }
        float rstd = (float)(1.0 / sqrt(ss / N + (double)RNNT_LAYER_NORM_EPS));
        for (int j = 0; j < N; j++) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
    }
}

void rnnt_cpu_lstm_layer_batch(const rnnt_lstm_layer *L, rnnt_lstm_act act, int n, const int *rows, const float *const *x,
                               float *const *y, float *const *h, float *const *c, float *const *pre, float *work)
{
    int H = L->hidden, G = 4 * H, R = rnnt_lstm_out(L), Tmax = 0;
    float *hc = work, *cc = hc + (size_t)n * R, *gates = cc + (size_t)n * H, *mc = gates + (size_t)n * G;
    int *order = (int *)(mc + (size_t)n * H);
    /* Input projection of all of each utterance's rows at once, bias folded in. Utterances whose rows
     * follow each other in memory (x and pre both) go in one call: the weights pass through the cache
     * once for all of them (streams' chunks are short), and a row's result is the same either way. */
    for (int b = 0, e; b < n; b = e) {
        int run = rows[b];
        for (e = b + 1; e < n && x[e] == x[e - 1] + (size_t)rows[e - 1] * L->input && pre[e] == pre[e - 1] + (size_t)rows[e - 1] * G; e++)
            run += rows[e];
        rnnt_cpu_gemm_nt_rows(run, G, L->input, x[b], L->input, L->w_ih, L->input, 0.0f, pre[b], G);
        for (int t = 0; t < run; t++)
            for (int j = 0; j < G; j++) pre[b][(size_t)t * G + j] += L->bias[j];
    }
    for (int b = 0; b < n; b++)
        if (rows[b] > Tmax) Tmax = rows[b];
    /* Longest first, so the utterances still running at step t are a prefix of `order`; their states
     * side by side in hc/cc (an utterance that stops keeps its final state in its row). */
    for (int b = 0; b < n; b++) order[b] = b;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && rows[order[j]] > rows[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int r = 0; r < n; r++) {
        memcpy(hc + (size_t)r * R, h[order[r]], sizeof(float) * R);
        memcpy(cc + (size_t)r * H, c[order[r]], sizeof(float) * H);
    }
    for (int t = 0; t < Tmax; t++) {
        int active = 0;
        while (active < n && rows[order[active]] > t) active++;
        rnnt_cpu_gemm_nt_rows(active, G, R, hc, R, L->w_hh, R, 0.0f, gates, G);
        for (int r = 0; r < active; r++) {
            const float *p = pre[order[r]] + (size_t)t * G;
            float *g = gates + (size_t)r * G;
            for (int j = 0; j < G; j++) g[j] += p[j];
        }
        if (L->w_hr) { /* projection LSTM: h = W_hr (o * phi(c)) */
            rnnt_cpu_lstm_pointwise(act, active, H, gates, G, mc, H, cc, H);
            rnnt_cpu_gemm_nt_rows(active, R, H, mc, H, L->w_hr, H, 0.0f, hc, R);
        } else {
            rnnt_cpu_lstm_pointwise(act, active, H, gates, G, hc, H, cc, H);
        }
        for (int r = 0; r < active; r++) memcpy(y[order[r]] + (size_t)t * R, hc + (size_t)r * R, sizeof(float) * R);
    }
    for (int r = 0; r < n; r++) {
        memcpy(h[order[r]], hc + (size_t)r * R, sizeof(float) * R);
        memcpy(c[order[r]], cc + (size_t)r * H, sizeof(float) * H);
    }
    /* The LayerNorm of the layer's output (not of the state the recurrence carries), row by row: a
     * row's result does not depend on how the frames were split into calls. */
    if (L->ln_w)
        for (int b = 0; b < n; b++) rnnt_cpu_layer_norm(rows[b], R, y[b], R, L->ln_w, L->ln_b, y[b], R);
}

/* The scratch layout, shared by the size function and the encoder: per utterance the stacked input,
 * each layer's (zero-padded) output but the last (which goes to out[b]) and one gate pre-activation
 * buffer; then the batch's recurrent state (zero: every utterance starts from it) and the layer's work
 * area. With base == NULL only the size is computed. */
typedef struct {
    float *x0, *pre, *y[MAX_ENC_LAYERS];
} utt_bufs;

static float *carve(float *base, size_t *off, size_t count)
{
    float *p = base ? base + *off : NULL;
    *off += (count + 15) & ~(size_t)15; /* 64-byte aligned pieces */
    return p;
}

static size_t layout(const struct rnnt_model *m, int n, const int *frames, float *base, utt_bufs *u, float **h, float **c, float **work)
{
    size_t off = 0, work_floats = 0;
    int Hmax = 0;
    for (int l = 0; l < m->n_enc; l++) {
        if (m->enc[l].hidden > Hmax) Hmax = m->enc[l].hidden; /* h needs R <= H, c needs H */
        size_t w = rnnt_cpu_lstm_layer_batch_work(&m->enc[l], n);
        if (w > work_floats) work_floats = w;
    }
    for (int b = 0; b < n; b++) {
        int T[MAX_ENC_LAYERS + 1];
        layer_lengths(m, frames[b], T);
        size_t pre_floats = 0;
        float *p = carve(base, &off, (size_t)T[0] * m->stacking * m->feature_dim);
        if (u) u[b].x0 = p;
        for (int l = 0; l < m->n_enc; l++) {
            const rnnt_lstm_layer *L = &m->enc[l];
            if ((size_t)T[l] * 4 * L->hidden > pre_floats) pre_floats = (size_t)T[l] * 4 * L->hidden;
            if (l < m->n_enc - 1) {
                p = carve(base, &off, (size_t)T[l + 1] * L->time_stack * rnnt_lstm_out(L));
                if (u) u[b].y[l] = p;
            }
        }
        p = carve(base, &off, pre_floats);
        if (u) u[b].pre = p;
    }
    float *ph = carve(base, &off, (size_t)n * Hmax), *pc = carve(base, &off, (size_t)n * Hmax), *pw = carve(base, &off, work_floats);
    if (h) *h = ph;
    if (c) *c = pc;
    if (work) *work = pw;
    return off;
}

size_t rnnt_cpu_encoder_scratch_batch(const struct rnnt_model *m, int n, const int *frames)
{
    return layout(m, n, frames, NULL, NULL, NULL, NULL, NULL);
}

void rnnt_cpu_encode_batch(const struct rnnt_model *m, int n, const rnnt_input *in, float *const *out, float *scratch, rnnt_layer_hook hook,
                           void *user)
{
    const int nn = n > 0 ? n : 1;
    int frames[nn];
    frames[0] = 0;
    for (int b = 0; b < n; b++) frames[b] = in[b].frames;
    utt_bufs u[nn];
    memset(u, 0, sizeof u);
    float *h, *c, *work;
    int Hmax = 0;
    for (int l = 0; l < m->n_enc; l++)
        if (m->enc[l].hidden > Hmax) Hmax = m->enc[l].hidden;
    layout(m, n, frames, scratch, u, &h, &c, &work);
    for (int b = 0; b < n; b++) rnnt_cpu_frontend(m, in[b].features, in[b].frames, u[b].x0);

    for (int l = 0; l < m->n_enc; l++) {
        const rnnt_lstm_layer *L = &m->enc[l];
        int H = rnnt_lstm_out(L), T[nn];
        const float *x[nn];
        float *y[nn], *hb[nn], *cb[nn], *pre[nn];
        for (int b = 0; b < n; b++) {
            int Tl[MAX_ENC_LAYERS + 1];
            layer_lengths(m, frames[b], Tl);
            T[b] = Tl[l];
            x[b] = l == 0 ? u[b].x0 : u[b].y[l - 1];
            y[b] = l == m->n_enc - 1 ? out[b] : u[b].y[l];
            hb[b] = h + (size_t)b * Hmax;
            cb[b] = c + (size_t)b * Hmax;
            pre[b] = u[b].pre;
        }
        memset(h, 0, sizeof(float) * (size_t)n * Hmax);
        memset(c, 0, sizeof(float) * (size_t)n * Hmax);
        rnnt_cpu_lstm_layer_batch(L, m->act, n, T, x, y, hb, cb, pre, work);
        for (int b = 0; b < n; b++) {
            if (hook) hook(user, l, b, T[b], H, y[b]);
            /* Zero rows up to a multiple of time_stack: the stacked view of the next layer reads them. */
            if (l < m->n_enc - 1) {
                size_t padded = (size_t)rnnt_stacked_len(T[b], L->time_stack) * L->time_stack;
                memset(y[b] + (size_t)T[b] * H, 0, sizeof(float) * (padded - (size_t)T[b]) * H);
            }
        }
    }
}

size_t rnnt_cpu_encoder_scratch(const struct rnnt_model *m, int T) { return rnnt_cpu_encoder_scratch_batch(m, 1, &T); }

typedef struct {
    const float **layer_out;
} single_hook;

static void keep_layer(void *user, int layer, int utt, int T, int H, const float *y)
{
    single_hook *s = user;
    if (s->layer_out) s->layer_out[layer] = y;
}

int rnnt_cpu_encode(const struct rnnt_model *m, const float *feats, int T, float *out, float *scratch, const float **layer_out)
{
    rnnt_input in = {feats, T, 0};
    single_hook s = {layer_out};
    rnnt_cpu_encode_batch(m, 1, &in, &out, scratch, keep_layer, &s);
    return rnnt_model_encoder_frames(m, T);
}

size_t rnnt_cpu_lstm_sequence_scratch(const rnnt_lstm_layer *L, int T)
{
    return (size_t)T * 4 * L->hidden + 2 * (size_t)L->hidden + rnnt_cpu_lstm_layer_batch_work(L, 1) + 16;
}

void rnnt_cpu_lstm_sequence(const rnnt_lstm_layer *L, rnnt_lstm_act act, int T, const float *x, float *y, float *scratch)
{
    /* One utterance of rnnt_cpu_lstm_layer_batch: the same arithmetic as rnnt_cpu_encode_batch. */
    float *pre = scratch, *h = pre + (size_t)T * 4 * L->hidden, *c = h + L->hidden, *work = c + L->hidden;
    memset(h, 0, sizeof(float) * 2 * (size_t)L->hidden);
    rnnt_cpu_lstm_layer_batch(L, act, 1, &T, &x, &y, &h, &c, &pre, work);
}

/* ---- joint --------------------------------------------------------------------------------- */

void rnnt_cpu_joint_enc_proj(const struct rnnt_model *m, int T, const float *f, float *fp)
{
    int J = m->joint_dim, He = rnnt_lstm_out(&m->enc[m->n_enc - 1]);
    rnnt_cpu_gemm_nt_rows(T, J, He, f, He, m->joint_enc_w, He, 0.0f, fp, J); /* per row: chunk invariant */
    for (int t = 0; t < T; t++)
        for (int j = 0; j < J; j++) fp[(size_t)t * J + j] += m->joint_enc_b[j];
}

void rnnt_cpu_joint_pred_proj(const struct rnnt_model *m, int M, const float *g, float *gp)
{
    int J = m->joint_dim, Hp = m->pred[m->n_pred - 1].hidden;
    rnnt_cpu_gemm_nt_rows(M, J, Hp, g, Hp, m->joint_pred_w, Hp, 0.0f, gp, J);
    for (int r = 0; r < M; r++)
        for (int j = 0; j < J; j++) gp[(size_t)r * J + j] += m->joint_pred_b[j];
}

void rnnt_cpu_joint_logits(const struct rnnt_model *m, const float *fp_row, const float *gp_row, float *logits, float *hidden)
{
    int J = m->joint_dim;
    for (int j = 0; j < J; j++) {
        float v = fp_row[j] + gp_row[j];
        hidden[j] = m->joint_act == RNNT_JOINT_RELU ? (v > 0.0f ? v : (v != v ? v : 0.0f)) : tanhf(v);
    }
    memcpy(logits, m->joint_out_b, sizeof(float) * m->n_out);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, m->n_out, J, 1.0f, m->joint_out_w, J, hidden, 1, 1.0f, logits, 1);
}

void rnnt_cpu_joint_argmax(const struct rnnt_model *m, int M, const float *const *fp_rows, const float *const *gp_rows, int *argmax,
                           float *scratch)
{
    rnnt_cpu_joint_argmax_prob(m, M, fp_rows, gp_rows, argmax, NULL, scratch);
}

void rnnt_cpu_joint_argmax_prob(const struct rnnt_model *m, int M, const float *const *fp_rows, const float *const *gp_rows,
                                int *argmax, float *prob, float *scratch)
{
    float *hidden = scratch, *logits = scratch + m->joint_dim;
    for (int r = 0; r < M; r++) {
        rnnt_cpu_joint_logits(m, fp_rows[r], gp_rows[r], logits, hidden);
        int best = 0;
        for (int k = 0; k < m->n_out; k++) {
            if (!isfinite(logits[k])) {
                best = -1;
                break;
            }
            if (logits[k] > logits[best]) best = k;
        }
        argmax[r] = best;
        if (prob && best >= 0) {
            /* In double: the sum of up to n_out terms each <= 1, so p is exact to float rounding. */
            double sum = 0.0;
            for (int k = 0; k < m->n_out; k++) sum += exp((double)logits[k] - (double)logits[best]);
            prob[r] = (float)(1.0 / sum);
        }
    }
}
