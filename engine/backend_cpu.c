/* backend_cpu.c — the CPU backend (rnnt_backend_ops, backend.h), in the stages of the CUDA backend
 * (kernels/cu_encoder.h, cu_decoder.h), shared by whole utterances and streams:
 *   workspace  whole_setup (whole utterances) / chunk_plan + chunk_layout (streams): one buffer that
 *              grows to the largest batch seen, carved per utterance; decoder states wired to results;
 *   encoder    whole utterances: rnnt_cpu_encode_batch (cpu_ops.c); a chunk of each stream:
 *              cpu_encode_chunk, which carries each layer's state and the frame/time-stacking
 *              remainders between calls; both run every layer through rnnt_cpu_lstm_layer_batch; then,
 *              for a model without big blanks, the joint's encoder projection of every frame;
 *   decoder    cpu_decode_frames: greedy multi-blank decoding (FORMAT.md, stage 6) of every utterance
 *              over the encoder frames that exist, from its rnnt_dec_state (stream.h). Each step
 *              advances the predictor of the utterances that emitted a label (dec_pred_step; its first
 *              layer's input product comes from a per-label table made once per runner), projects
 *              the frames it reaches for the first time when big blanks may skip frames (dec_enc_proj),
 *              evaluates the joint with argmax for every utterance still inside its frames, and applies
 *              the rule (dec_rule, multiblank.h);
 *   results    counts and frames_skipped into each rnnt_result (the runner makes the text).
 * Every product whose rows are frames or utterances runs through the row kernel (cpu_rows.h), so an
 * utterance's tokens depend neither on its batch nor on how its input was split into chunks.
 * Thread safety: a backend state (one per runner) is used by one thread at a time; the model is only
 * read, so runners on many threads share it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu_ops.h"
#include "stream.h"

typedef struct {
    const struct rnnt_model *m;
    rnnt_runner_params p;
    float *ws;       /* grows to the largest batch seen, bounded by max_batch x max_frames */
    size_t ws_cap;
    float *dws;      /* the decoder's step buffers */
    size_t dws_cap;
    float *pred_in;  /* [V + 1, 4H]: predictor layer 0's input product of each label's embedding, or NULL */
    unsigned char *pred_in_made; /* [V + 1]: row made yet (rows are made on a label's first step) */
} cpu_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The predictor's first layer sees only embeddings, one of V + 1 rows, so its input product
 * W_ih e(label) (4H x E MACs a step: 131k of the ~459k a label costs the shipped model) is made once
 * per label and runner and copied after: the row kernel's bits for a row depend only on that row, and
 * the step adds W_hh h, then the bias, onto it as before (rnnt_cpu_lstm_step_from_input), so the
 * tokens keep every bit. A table over this many bytes (a large vocabulary) is not kept. */
#define CPU_PRED_TABLE_MAX_BYTES ((size_t)16 << 20)

static rnnt_status cpu_create(const struct rnnt_model *m, const rnnt_runner_params *p, void **state, char *err, size_t errlen)
{
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    s->m = m;
    s->p = *p;
    size_t rows = (size_t)m->vocab + 1, G = 4 * (size_t)m->pred[0].hidden;
    if (rows * G * sizeof(float) <= CPU_PRED_TABLE_MAX_BYTES) {
        s->pred_in = malloc(rows * G * sizeof(float));
        s->pred_in_made = calloc(rows, 1);
        if (!s->pred_in || !s->pred_in_made) {
            free(s->pred_in);
            free(s->pred_in_made);
            free(s);
            return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
        }
    }
    *state = s;
    return RNNT_OK;
}

static void cpu_destroy(void *state)
{
    cpu_state *s = state;
    if (!s) return;
    free(s->ws);
    free(s->dws);
    free(s->pred_in);
    free(s->pred_in_made);
    free(s);
}

static const char *cpu_device_name(void *state) { return "cpu"; }

static float *grow(float **buf, size_t *cap, size_t floats)
{
    if (floats > *cap) {
        float *p = realloc(*buf, floats * sizeof(float));
        if (!p) return NULL;
        *buf = p;
        *cap = floats;
    }
    return *buf;
}

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

/* Pieces of a workspace, 64-byte aligned; with base == NULL only the size is counted. */
static float *carve(float *base, size_t *off, size_t count)
{
    float *p = base ? base + *off : NULL;
    *off += align16(count);
    return p;
}

static int pred_hidden_max(const struct rnnt_model *m)
{
    int H = 0;
    for (int l = 0; l < m->n_pred; l++)
        if (m->pred[l].hidden > H) H = m->pred[l].hidden;
    return H;
}

/* ---- decoder stage --------------------------------------------------------------------------- */

/* The step buffers for n utterances: embedding/input rows, compact predictor states, projections,
 * the encoder rows gathered for their joint projection and its output, and the LSTM step's and the
 * joint's scratch. */
static size_t dec_layout(const struct rnnt_model *m, int n, float *base, float **x_rows, size_t *XA, float **h_rows, float **c_rows,
                         float **gp_rows, float **ef_rows, float **ep_rows, float **scratch)
{
    int E = m->embed_dim, Hp = pred_hidden_max(m), J = m->joint_dim, He = rnnt_lstm_out(&m->enc[m->n_enc - 1]);
    size_t off = 0, HpA = rnnt_dec_pred_stride(m), xa = align16((size_t)(E > Hp ? E : Hp));
    size_t step = 0;
    for (int l = 0; l < m->n_pred; l++) {
        size_t w = rnnt_cpu_lstm_step_scratch(&m->pred[l], n);
        if (w > step) step = w;
    }
    if ((size_t)J + (size_t)m->n_out > step) step = (size_t)J + (size_t)m->n_out;
    float *p = carve(base, &off, (size_t)n * xa);
    if (x_rows) {
        *x_rows = p;
        *XA = xa;
    }
    p = carve(base, &off, (size_t)m->n_pred * n * HpA);
    if (h_rows) *h_rows = p;
    p = carve(base, &off, (size_t)m->n_pred * n * HpA);
    if (c_rows) *c_rows = p;
    p = carve(base, &off, (size_t)n * J);
    if (gp_rows) *gp_rows = p;
    p = carve(base, &off, (size_t)n * He);
    if (ef_rows) *ef_rows = p;
    p = carve(base, &off, (size_t)n * J);
    if (ep_rows) *ep_rows = p;
    p = carve(base, &off, step);
    if (scratch) *scratch = p;
    return off;
}

/* The predictor step of the utterances that emitted a label (or start), rows upd[0..n_upd): gather
 * their embedding rows and states, step every layer, scatter the states back, then the joint's
 * predictor projection of their new output into d->gp; their label is consumed (-1). The CUDA twin is
 * cu_pred_layer + cu_pred_proj. */
static void dec_pred_step(cpu_state *s, int n, rnnt_dec_state *const *d, const int *upd, int n_upd, float *x_rows, size_t XA,
                          float *h_rows, float *c_rows, float *gp_rows, float *scratch, double *t_pred, double *t_joint)
{
    const struct rnnt_model *m = s->m;
    const int J = m->joint_dim, E = m->embed_dim;
    const size_t HpA = rnnt_dec_pred_stride(m), G0 = 4 * (size_t)m->pred[0].hidden;
    double tp = now_s();
    if (s->pred_in) { /* layer 0's input product from the per-label table (cpu_create) */
        for (int r = 0; r < n_upd; r++) {
            int lab = d[upd[r]]->label;
            float *row = s->pred_in + (size_t)lab * G0;
            if (!s->pred_in_made[lab]) {
                rnnt_cpu_lstm_input_product(&m->pred[0], 1, m->embedding + (size_t)lab * E, E, row);
                s->pred_in_made[lab] = 1;
            }
            memcpy(scratch + (size_t)r * G0, row, sizeof(float) * G0);
        }
    } else {
        for (int r = 0; r < n_upd; r++)
            memcpy(x_rows + (size_t)r * XA, m->embedding + (size_t)d[upd[r]]->label * E, sizeof(float) * E);
    }
    const float *x = x_rows;
    int ldx = (int)XA;
    for (int l = 0; l < m->n_pred; l++) {
        const rnnt_lstm_layer *L = &m->pred[l];
        int H = L->hidden;
        float *hr = h_rows + (size_t)l * n * HpA, *cr = c_rows + (size_t)l * n * HpA;
        for (int r = 0; r < n_upd; r++) {
            memcpy(hr + (size_t)r * H, d[upd[r]]->pred_h + (size_t)l * HpA, sizeof(float) * H);
            memcpy(cr + (size_t)r * H, d[upd[r]]->pred_c + (size_t)l * HpA, sizeof(float) * H);
        }
        /* The step reads x with stride ldx and h/c compact with stride H. */
        if (l == 0 && s->pred_in) rnnt_cpu_lstm_step_from_input(L, m->act, n_upd, scratch, hr, cr);
        else rnnt_cpu_lstm_step(L, m->act, n_upd, x, ldx, hr, cr, scratch);
        for (int r = 0; r < n_upd; r++) {
            memcpy(d[upd[r]]->pred_h + (size_t)l * HpA, hr + (size_t)r * H, sizeof(float) * H);
            memcpy(d[upd[r]]->pred_c + (size_t)l * HpA, cr + (size_t)r * H, sizeof(float) * H);
        }
        x = hr;
        ldx = H;
    }
    double tj = now_s();
    *t_pred += tj - tp;
    rnnt_cpu_joint_pred_proj(m, n_upd, x, gp_rows);
    for (int r = 0; r < n_upd; r++) {
        memcpy(d[upd[r]]->gp, gp_rows + (size_t)r * J, sizeof(float) * J);
        d[upd[r]]->label = -1;
    }
    *t_joint += now_s() - tj;
}

/* The greedy multi-blank rule (FORMAT.md stage 6; multiblank.h) for one utterance after a joint
 * evaluation chose output k (< 0: non-finite) with probability pk: emit a label and stay (up to
 * max_symbols per frame), or move on by the blank's or a big blank's frames. The CUDA twin is
 * dec_rule_slot (kernels/cu_device.cuh). */
static void dec_rule(const struct rnnt_model *m, rnnt_dec_state *ds, int k, float pk)
{
    ds->steps++;
    if (k < 0) {
        ds->status = RNNT_ERR_NUMERIC;
        return;
    }
    int dur = rnnt_mb_advance(k, m->vocab, m->blank, m->durations);
    if (dur == 0) { /* a label */
        ds->tokens[ds->n_tokens] = k;
        ds->frames[ds->n_tokens] = ds->t;
        if (ds->probs) ds->probs[ds->n_tokens] = pk;
        ds->n_tokens++;
        ds->label = k;
        if (++ds->here == m->max_symbols) {
            ds->t++;
            ds->here = 0;
        }
        return;
    }
    /* The part of a skip past the frames that exist is taken off once T_enc is final
     * (rnnt_dec_frames_skipped): a stream does not know it yet. */
    ds->skipped += dur - 1;
    ds->t += dur;
    ds->here = 0;
}

/* Big blanks skip frames (42% of the 22,730 frames of 300 test-unseen files, shipped model), and the
 * joint's encoder projection of a frame (He x J MACs, 288 x 256: nine times the output layer's
 * J x n_out) is needed only where the decoder stands: for a batch of utterances with big blanks it is
 * made there, on a frame's first visit, the rows of the utterances that reached a new frame gathered.
 * A model without big blanks visits every frame, and one utterance alone would project one row at a
 * time (~3.5 us a row here against ~2.5 us in the row kernel's blocks of 4: the skipped 42% only pay
 * that back): both project every frame up front. */
static int dec_lazy_proj(const struct rnnt_model *m, int n) { return m->n_big > 0 && n > 1; }

/* The joint's encoder projection of the frame each utterance act[0..n_act) stands on, if not made
 * yet (proj_t[b]: the frame last projected): one row through the row kernel, or the rows of several
 * utterances gathered into ef_rows (a row's bits do not depend on the rows beside it), so fp holds
 * what the up-front projection would have put there, bit for bit. */
static void dec_enc_proj(const struct rnnt_model *m, int n_act, const int *act, rnnt_dec_state *const *d, const float *const *f,
                         float *const *fp, const int *base, int *proj_t, float *ef_rows, float *ep_rows)
{
    const int J = m->joint_dim, He = rnnt_lstm_out(&m->enc[m->n_enc - 1]);
    int need[n_act > 0 ? n_act : 1], n_need = 0;
    for (int i = 0; i < n_act; i++)
        if (proj_t[act[i]] != d[act[i]]->t) need[n_need++] = act[i];
    if (n_need == 1) {
        int b = need[0];
        size_t r = (size_t)(d[b]->t - base[b]);
        rnnt_cpu_joint_enc_proj(m, 1, f[b] + r * He, fp[b] + r * J);
    } else if (n_need > 1) {
        for (int i = 0; i < n_need; i++) {
            int b = need[i];
            memcpy(ef_rows + (size_t)i * He, f[b] + (size_t)(d[b]->t - base[b]) * He, sizeof(float) * He);
        }
        rnnt_cpu_joint_enc_proj(m, n_need, ef_rows, ep_rows);
        for (int i = 0; i < n_need; i++) {
            int b = need[i];
            memcpy(fp[b] + (size_t)(d[b]->t - base[b]) * J, ep_rows + (size_t)i * J, sizeof(float) * J);
        }
    }
    for (int i = 0; i < n_need; i++) proj_t[need[i]] = d[need[i]]->t;
}

/* Decode n utterances over the encoder frames that exist: utterance b's frames [base[b], avail[b])
 * are the encoder's output rows at f[b] (frame t at f[b] + (t - base[b]) * He) and their joint
 * encoder projections at fp[b] (frame t at fp[b] + (t - base[b]) * J), made up front by the caller
 * or, with dec_lazy_proj, here on a frame's first visit. Runs until
 * every utterance stands at or past avail[b] or has failed; d[b]->tokens must have room for
 * (avail[b] - d[b]->t) * max_symbols more labels. Each step: the predictor of the utterances that
 * emitted (dec_pred_step), one joint evaluation with argmax for every utterance still inside its
 * frames (rnnt_cpu_joint_argmax_prob), the rule (dec_rule): cu_decoder's loop body, on the host. */
static rnnt_status cpu_decode_frames(cpu_state *s, int n, rnnt_dec_state *const *d, const float *const *f, float *const *fp,
                                     const int *base, const int *avail, double *t_pred, double *t_joint, char *err, size_t errlen)
{
    const struct rnnt_model *m = s->m;
    const int J = m->joint_dim, lazy = dec_lazy_proj(m, n);
    float *x_rows, *h_rows, *c_rows, *gp_rows, *ef_rows, *ep_rows, *scratch;
    size_t XA;
    if (!grow(&s->dws, &s->dws_cap, dec_layout(m, n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)))
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "cannot allocate the decoder's buffers for %d utterances", n);
    dec_layout(m, n, s->dws, &x_rows, &XA, &h_rows, &c_rows, &gp_rows, &ef_rows, &ep_rows, &scratch);
    int act[n], upd[n], k[n], proj_t[n];
    float pk[n];
    for (int b = 0; b < n; b++) proj_t[b] = -1;
    const float *frow[n], *gp_of[n];
    for (;;) {
        int n_act = 0, n_upd = 0;
        for (int b = 0; b < n; b++)
            if (d[b]->status == RNNT_OK && d[b]->t < avail[b]) {
                act[n_act++] = b;
                if (d[b]->label >= 0) upd[n_upd++] = b;
            }
        if (!n_act) break;
        if (n_upd) dec_pred_step(s, n, d, upd, n_upd, x_rows, XA, h_rows, c_rows, gp_rows, scratch, t_pred, t_joint);
        double tj = now_s();
        if (lazy) dec_enc_proj(m, n_act, act, d, f, fp, base, proj_t, ef_rows, ep_rows);
        for (int i = 0; i < n_act; i++) {
            int b = act[i];
            frow[i] = fp[b] + (size_t)(d[b]->t - base[b]) * J;
            gp_of[i] = d[b]->gp;
        }
        rnnt_cpu_joint_argmax_prob(m, n_act, frow, gp_of, k, pk, scratch);
        *t_joint += now_s() - tj;
        for (int i = 0; i < n_act; i++) dec_rule(m, d[act[i]], k[i], pk[i]);
    }
    return RNNT_OK;
}

/* ---- whole utterances: workspace, encoder, decoder start, decoding, results ------------------- */

/* The whole-utterance workspace: the encoder's scratch, then per utterance its encoder output f[b]
 * ([T_b, He]) and joint projection fp[b] ([T_b, J]), then the decoder states (zeroed), wired into
 * dec[b] / d[b] with the results' token arrays (cu_dec_init's twin). */
static rnnt_status whole_setup(cpu_state *s, int n, const rnnt_input *in, rnnt_result *out, const int *T, float **scratch, float **f,
                               float **fp, rnnt_dec_state *dec, rnnt_dec_state **d, char *err, size_t errlen)
{
    const struct rnnt_model *m = s->m;
    const int J = m->joint_dim, He = rnnt_lstm_out(&m->enc[m->n_enc - 1]);
    const size_t HpA = rnnt_dec_pred_stride(m);
    int frames[n];
    size_t enc_floats = 0;
    for (int b = 0; b < n; b++) {
        frames[b] = in[b].frames;
        enc_floats += align16((size_t)T[b] * He) + align16((size_t)T[b] * J);
    }
    size_t scratch_floats = rnnt_cpu_encoder_scratch_batch(m, n, frames);
    size_t state_floats = (size_t)n * (2 * (size_t)m->n_pred * HpA + align16((size_t)J));
    float *ws = grow(&s->ws, &s->ws_cap, scratch_floats + enc_floats + state_floats);
    if (!ws) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "cannot allocate the CPU workspace for %d utterances", n);
    float *p = ws + scratch_floats;
    *scratch = ws;
    for (int b = 0; b < n; b++) {
        f[b] = p;
        p += align16((size_t)T[b] * He);
        fp[b] = p;
        p += align16((size_t)T[b] * J);
    }
    memset(p, 0, sizeof(float) * state_floats);
    for (int b = 0; b < n; b++) {
        dec[b] = (rnnt_dec_state){.label = m->vocab, .status = RNNT_OK, .tokens = out[b].tokens, .frames = out[b].frames,
                                   .probs = out[b].probs};
        dec[b].pred_h = p;
        p += (size_t)m->n_pred * HpA;
        dec[b].pred_c = p;
        p += (size_t)m->n_pred * HpA;
        dec[b].gp = p;
        p += align16((size_t)J);
        d[b] = &dec[b];
    }
    return RNNT_OK;
}

static rnnt_status cpu_decode(void *state, int n, const rnnt_input *in, rnnt_result *out, rnnt_timing *timing, char *err, size_t errlen)
{
    cpu_state *s = state;
    const struct rnnt_model *m = s->m;
    double t0 = now_s(), t_pred = 0, t_joint = 0;
    if (n < 1) return RNNT_OK; /* the runner never asks for that; tells the compiler the arrays below get filled */
    int T[n], base[n];
    for (int b = 0; b < n; b++) {
        T[b] = rnnt_model_encoder_frames(m, in[b].frames);
        base[b] = 0;
    }
    float *scratch = NULL, *f[n], *fp[n];
    rnnt_dec_state dec[n], *d[n];
    rnnt_status st = whole_setup(s, n, in, out, T, &scratch, f, fp, dec, d, err, errlen);
    if (st) return st;

    /* 1. Encoder (cu_encoder_run), then the joint's encoder projection of every frame
     * (cu_encoder_joint_proj) unless the decoder makes it where it stands (dec_lazy_proj). */
    rnnt_cpu_encode_batch(m, n, in, f, scratch, NULL, NULL);
    double t1 = now_s();
    if (!dec_lazy_proj(m, n))
        for (int b = 0; b < n; b++) rnnt_cpu_joint_enc_proj(m, T[b], f[b], fp[b]);
    t_joint += now_s() - t1;

    /* 2. Decoding over all frames (cu_decoder_run), then the results (cu_dec_pack). */
    st = cpu_decode_frames(s, n, d, (const float *const *)f, fp, base, T, &t_pred, &t_joint, err, errlen);
    if (st) return st;
    for (int b = 0; b < n; b++) {
        out[b].status = dec[b].status;
        out[b].n_tokens = dec[b].n_tokens;
        out[b].encoder_frames = T[b];
        out[b].frames_skipped = rnnt_dec_frames_skipped(&dec[b], T[b]);
        out[b].decode_steps = dec[b].steps;
    }
    if (timing) {
        timing->encoder_s = t1 - t0;
        timing->predictor_s = t_pred;
        timing->joint_s = t_joint;
        timing->total_s = now_s() - t0;
        timing->decode_s = timing->total_s - timing->encoder_s - t_pred - t_joint;
    }
    return RNNT_OK;
}

/* ---- streams --------------------------------------------------------------------------------- */

/* What one stream's chunk is at every level: rows[0] stacked input rows, rows[l] input rows of layer
 * l, rows[n_enc] new encoder frames; take input frames consumed; flush: the end of input is in this
 * chunk (the last partial groups are zero-padded, as the whole utterance pads them). */
typedef struct {
    int take, flush, rows[RNNT_STREAM_MAX_LAYERS + 1];
    float *x[RNNT_STREAM_MAX_LAYERS]; /* layer l's input rows, [rows[l], I_l] */
    float *pre[RNNT_STREAM_MAX_LAYERS]; /* layer l's gate pre-activations, [rows[l], 4 H_l] */
    float *y[RNNT_STREAM_MAX_LAYERS]; /* a time-stacked layer's output after its remainder */
    float *f, *fp;                    /* encoder output and its joint projection, [rows[n_enc], .] */
} chunk_plan;

static void plan_chunk(const struct rnnt_model *m, const struct rnnt_stream *st, int max_frames, chunk_plan *c)
{
    memset(c, 0, sizeof *c);
    rnnt_stream_plan_chunk(m, st, max_frames, &c->take, &c->flush, c->rows);
}

/* The chunk workspace of n streams. Each layer's input rows, pre-activations and the encoder output
 * and its projection lie stream after stream without gaps, so the projections of all streams run as
 * one product (rnnt_cpu_lstm_layer_batch); each time-stacked layer's output per stream (its remainder
 * from the last chunk first, zero-padded to whole groups at the end of input); the layer work area. */
static size_t chunk_layout(const struct rnnt_model *m, int n, struct rnnt_stream *const *st, chunk_plan *c, float *base, float **work)
{
    size_t off = 0, work_floats = 0, pre_floats = 0;
    for (int l = 0; l <= m->n_enc; l++) {
        size_t sum = 0;
        for (int b = 0; b < n; b++) sum += (size_t)c[b].rows[l];
        if (l == m->n_enc) {
            float *f = carve(base, &off, sum * rnnt_lstm_out(&m->enc[l - 1])), *fp = carve(base, &off, sum * m->joint_dim);
            for (int b = 0; b < n && base; b++) {
                c[b].f = f, c[b].fp = fp;
                f += (size_t)c[b].rows[l] * rnnt_lstm_out(&m->enc[l - 1]);
                fp += (size_t)c[b].rows[l] * m->joint_dim;
            }
            break;
        }
        const rnnt_lstm_layer *L = &m->enc[l];
        size_t w = rnnt_cpu_lstm_layer_batch_work(L, n);
        if (w > work_floats) work_floats = w;
        if (sum * 4 * L->hidden > pre_floats) pre_floats = sum * 4 * L->hidden;
        float *x = carve(base, &off, sum * L->input);
        for (int b = 0; b < n && base; b++) {
            c[b].x[l] = x;
            x += (size_t)c[b].rows[l] * L->input;
        }
        if (l < m->n_enc - 1)
            for (int b = 0; b < n; b++) {
                size_t have = (size_t)st[b]->rem_rows[l] + c[b].rows[l], whole = (size_t)c[b].rows[l + 1] * L->time_stack;
                c[b].y[l] = carve(base, &off, (have > whole ? have : whole) * rnnt_lstm_out(L));
            }
    }
    float *pre = carve(base, &off, pre_floats);
    for (int l = 0; l < m->n_enc && base; l++)
        for (int b = 0, at = 0; b < n; b++) {
            c[b].pre[l] = pre + (size_t)at * 4 * m->enc[l].hidden;
            at += c[b].rows[l];
        }
    float *w = carve(base, &off, work_floats);
    if (work) *work = w;
    return off;
}

/* The encoder over each stream's chunk, layer by layer, continuing from each layer's state. */
static void cpu_encode_chunk(const struct rnnt_model *m, int n, struct rnnt_stream *const *st, chunk_plan *c, float *work)
{
    const int nn = n > 0 ? n : 1;
    for (int b = 0; b < n; b++) {
        rnnt_cpu_frontend(m, st[b]->feats, c[b].take, c[b].x[0]); /* normalised, zero-padded to whole stacks */
        rnnt_stream_drop_frames(st[b], c[b].take);
    }
    for (int l = 0; l < m->n_enc; l++) {
        const rnnt_lstm_layer *L = &m->enc[l];
        const int H = rnnt_lstm_out(L), last = l == m->n_enc - 1;
        int rows[nn];
        const float *x[nn];
        float *y[nn], *h[nn], *cs[nn], *pre[nn];
        for (int b = 0; b < n; b++) {
            rows[b] = c[b].rows[l];
            x[b] = c[b].x[l];
            /* A time-stacked layer writes after its remainder, so whole groups are contiguous rows. */
            if (!last) memcpy(c[b].y[l], st[b]->rem[l], sizeof(float) * (size_t)st[b]->rem_rows[l] * H);
            y[b] = last ? c[b].f : c[b].y[l] + (size_t)st[b]->rem_rows[l] * H;
            h[b] = st[b]->enc_h[l];
            cs[b] = st[b]->enc_c[l];
            pre[b] = c[b].pre[l];
        }
        rnnt_cpu_lstm_layer_batch(L, m->act, n, rows, x, y, h, cs, pre, work);
        if (last) break;
        for (int b = 0; b < n; b++) {
            int have = st[b]->rem_rows[l] + rows[b], whole = c[b].rows[l + 1] * L->time_stack;
            if (have < whole) /* the end of input: the last group is zero-padded */
                memset(c[b].y[l] + (size_t)have * H, 0, sizeof(float) * (size_t)(whole - have) * H);
            /* Whole groups are the next layer's input rows; the rest waits for the next chunk. */
            memcpy(c[b].x[l + 1], c[b].y[l], sizeof(float) * (size_t)whole * H);
            st[b]->rem_rows[l] = rnnt_stream_rem_after(m, st[b], c[b].rows, l);
            memcpy(st[b]->rem[l], c[b].y[l] + (size_t)whole * H, sizeof(float) * (size_t)st[b]->rem_rows[l] * H);
        }
    }
}

static rnnt_status cpu_advance(void *state, int n, struct rnnt_stream *const *st, rnnt_timing *timing, char *err, size_t errlen)
{
    cpu_state *s = state;
    const struct rnnt_model *m = s->m;
    double t0 = now_s(), t_pred = 0, t_joint = 0;
    if (n < 1) return RNNT_OK;
    chunk_plan c[n];
    for (int b = 0; b < n; b++) plan_chunk(m, st[b], s->p.max_frames, &c[b]);
    /* Everything that can fail comes before any stream changes. */
    float *work;
    if (!grow(&s->ws, &s->ws_cap, chunk_layout(m, n, st, c, NULL, NULL)))
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "cannot allocate the CPU workspace for %d streams", n);
    chunk_layout(m, n, st, c, s->ws, &work);
    for (int b = 0; b < n; b++)
        if (rnnt_stream_reserve_tokens(st[b], (size_t)c[b].rows[m->n_enc] * m->max_symbols + 1))
            return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for stream %d's tokens", b);
    if (!grow(&s->dws, &s->dws_cap, dec_layout(m, n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)))
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "cannot allocate the decoder's buffers for %d streams", n);

    cpu_encode_chunk(m, n, st, c, work);
    double t1 = now_s();
    /* The joint's encoder projection of every stream's new frames at once (they lie back to back),
     * unless the decoder makes it where it stands (dec_lazy_proj). */
    int R = 0;
    for (int b = 0; b < n; b++) R += c[b].rows[m->n_enc];
    if (!dec_lazy_proj(m, n)) rnnt_cpu_joint_enc_proj(m, R, c[0].f, c[0].fp);
    rnnt_dec_state *d[n];
    const float *f[n];
    float *fp[n];
    int base[n], avail[n];
    for (int b = 0; b < n; b++) {
        d[b] = &st[b]->dec;
        f[b] = c[b].f;
        fp[b] = c[b].fp;
        base[b] = st[b]->enc_frames;
        st[b]->enc_frames += c[b].rows[m->n_enc];
        avail[b] = st[b]->enc_frames;
        if (c[b].flush) st[b]->flushed = 1;
    }
    t_joint += now_s() - t1;
    rnnt_status rc = cpu_decode_frames(s, n, d, f, fp, base, avail, &t_pred, &t_joint, err, errlen);
    if (timing) {
        timing->encoder_s = t1 - t0;
        timing->predictor_s = t_pred;
        timing->joint_s = t_joint;
        timing->total_s = now_s() - t0;
        timing->decode_s = timing->total_s - timing->encoder_s - t_pred - t_joint;
    }
    return rc;
}

#define CPU_WS_KEEP_BYTES ((size_t)16 << 20)

/* rnnt_runner_trim: a workspace beyond CPU_WS_KEEP_BYTES (grown for a batch of long utterances) goes
 * back to the system; kept, every worker would hold the largest batch it ever ran for good (~230 MB
 * for 16 x 60 s on the shipped model). Called when the worker goes idle, not after every batch:
 * mapping 100+ MB again costs page faults worth ~10% of such a batch. */
static void trim_buf(float **buf, size_t *cap)
{
    if (*cap * sizeof(float) > CPU_WS_KEEP_BYTES) {
        free(*buf);
        *buf = NULL;
        *cap = 0;
    }
}

void rnnt_cpu_trim(void *state)
{
    cpu_state *s = state;
    trim_buf(&s->ws, &s->ws_cap);
    trim_buf(&s->dws, &s->dws_cap);
}

const rnnt_backend_ops rnnt_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .device_name = cpu_device_name,
    .decode = cpu_decode,
    .advance = cpu_advance,
};
