/* backend_cpu.c — the CPU backend: batched encoder, then greedy multi-blank decoding of the whole batch
 * with a per-utterance frame index (FORMAT.md, stage 6). Each step evaluates the joint for every
 * utterance still running and advances the predictor only for those that emitted a label. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu_ops.h"

typedef struct {
    const struct rnnt_model *m;
    rnnt_runner_params p;
    float *ws;       /* grows to the largest batch seen, bounded by max_batch x max_frames */
    size_t ws_cap;
} cpu_state;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static rnnt_status cpu_create(const struct rnnt_model *m, const rnnt_runner_params *p, void **state, char *err, size_t errlen)
{
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    s->m = m;
    s->p = *p;
    *state = s;
    return RNNT_OK;
}

static void cpu_destroy(void *state)
{
    cpu_state *s = state;
    if (!s) return;
    free(s->ws);
    free(s);
}

static const char *cpu_device_name(void *state) { return "cpu"; }

#define CPU_WS_KEEP_BYTES ((size_t)16 << 20)

static float *ws_get(cpu_state *s, size_t floats)
{
    if (floats > s->ws_cap) {
        float *p = realloc(s->ws, floats * sizeof(float));
        if (!p) return NULL;
        s->ws = p;
        s->ws_cap = floats;
    }
    return s->ws;
}

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

static rnnt_status cpu_decode(void *state, int n, const rnnt_input *in, rnnt_result *out, rnnt_timing *timing, char *err, size_t errlen)
{
    cpu_state *s = state;
    const struct rnnt_model *m = s->m;
    const int J = m->joint_dim, He = m->enc[m->n_enc - 1].hidden, E = m->embed_dim;
    int Hpmax = 0;
    for (int l = 0; l < m->n_pred; l++)
        if (m->pred[l].hidden > Hpmax) Hpmax = m->pred[l].hidden;
    double t0 = now_s(), t_enc = 0, t_pred = 0, t_joint = 0;

    /* Workspace: encoder scratch | per utterance f, fp | predictor state h,c per layer, gp | step buffers. */
    int frames[n], T[n];
    size_t enc_floats = 0;
    for (int b = 0; b < n; b++) {
        frames[b] = in[b].frames;
        T[b] = rnnt_model_encoder_frames(m, in[b].frames);
        enc_floats += align16((size_t)T[b] * He) + align16((size_t)T[b] * J);
    }
    size_t scratch_floats = rnnt_cpu_encoder_scratch_batch(m, n, frames);
    size_t state_floats = 2 * (size_t)m->n_pred * n * align16((size_t)Hpmax) + (size_t)n * align16((size_t)J);
    size_t step_floats = (size_t)n * align16((size_t)(E > Hpmax ? E : Hpmax)) * 2 + (size_t)n * align16((size_t)J) +
                         2 * (size_t)m->n_pred * n * align16((size_t)Hpmax) + (size_t)n * 4 * Hpmax +
                         (size_t)m->joint_dim + (size_t)m->n_out + 64;
    float *ws = ws_get(s, scratch_floats + enc_floats + state_floats + step_floats);
    if (!ws) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "cannot allocate the CPU workspace for %d utterances", n);
    float *scratch = ws, *p = ws + scratch_floats;
    float *f[n], *fp[n];
    for (int b = 0; b < n; b++) {
        f[b] = p;
        p += align16((size_t)T[b] * He);
        fp[b] = p;
        p += align16((size_t)T[b] * J);
    }
    /* Predictor state of utterance b, layer l: h at hs + (l*n + b)*HpA. */
    size_t HpA = align16((size_t)Hpmax);
    float *hs = p, *cs = p + (size_t)m->n_pred * n * HpA;
    p = cs + (size_t)m->n_pred * n * HpA;
    float *gp = p; /* [n, J] current predictor projection per utterance */
    p += (size_t)n * align16((size_t)J);
    /* Step buffers (compact rows of the utterances being updated). */
    size_t XA = align16((size_t)(E > Hpmax ? E : Hpmax));
    float *x_rows = p;
    p += 2 * (size_t)n * XA;
    float *gp_rows = p;
    p += (size_t)n * align16((size_t)J);
    float *h_rows = p, *c_rows = p + (size_t)m->n_pred * n * HpA;
    p += 2 * (size_t)m->n_pred * n * HpA;
    float *step_scratch = p; /* lstm step + pred proj + joint scratch */

    /* 1. Encoder, then the joint's encoder projection of every frame. */
    rnnt_cpu_encode_batch(m, n, in, f, scratch, NULL, NULL);
    double t1 = now_s();
    t_enc = t1 - t0;
    for (int b = 0; b < n; b++) rnnt_cpu_joint_enc_proj(m, T[b], f[b], fp[b]);
    t_joint += now_s() - t1;

    /* 2. Predictor from the start symbol, for all utterances. */
    int t[n], here[n], rows[n], labels[n], k[n];
    const float *frow[n], *grow[n];
    memset(hs, 0, sizeof(float) * 2 * (size_t)m->n_pred * n * HpA);
    for (int b = 0; b < n; b++) {
        t[b] = 0;
        here[b] = 0;
        out[b].n_tokens = 0;
        out[b].encoder_frames = T[b];
        out[b].frames_skipped = 0;
        out[b].decode_steps = 0;
        out[b].status = RNNT_OK;
        rows[b] = b;
        labels[b] = m->vocab; /* the start symbol */
    }
    int n_rows = n;
    for (;;) {
        /* Advance the predictor for `rows` fed with `labels`: gather, step every layer, scatter. */
        if (n_rows) {
            double tp = now_s();
            for (int r = 0; r < n_rows; r++) memcpy(x_rows + (size_t)r * XA, m->embedding + (size_t)labels[r] * E, sizeof(float) * E);
            const float *x = x_rows;
            int ldx = (int)XA;
            for (int l = 0; l < m->n_pred; l++) {
                const rnnt_lstm_layer *L = &m->pred[l];
                int H = L->hidden;
                float *hr = h_rows + (size_t)l * n * HpA, *cr = c_rows + (size_t)l * n * HpA;
                for (int r = 0; r < n_rows; r++) {
                    memcpy(hr + (size_t)r * H, hs + ((size_t)l * n + rows[r]) * HpA, sizeof(float) * H);
                    memcpy(cr + (size_t)r * H, cs + ((size_t)l * n + rows[r]) * HpA, sizeof(float) * H);
                }
                /* The step reads x with stride ldx and h/c compact with stride H. */
                rnnt_cpu_lstm_step(L, m->act, n_rows, x, ldx, hr, cr, step_scratch);
                for (int r = 0; r < n_rows; r++) {
                    memcpy(hs + ((size_t)l * n + rows[r]) * HpA, hr + (size_t)r * H, sizeof(float) * H);
                    memcpy(cs + ((size_t)l * n + rows[r]) * HpA, cr + (size_t)r * H, sizeof(float) * H);
                }
                x = hr;
                ldx = H;
            }
            double tj = now_s();
            t_pred += tj - tp;
            rnnt_cpu_joint_pred_proj(m, n_rows, x, gp_rows);
            for (int r = 0; r < n_rows; r++) memcpy(gp + (size_t)rows[r] * align16((size_t)J), gp_rows + (size_t)r * J, sizeof(float) * J);
            t_joint += now_s() - tj;
        }
        /* One joint evaluation for every utterance still inside its frames. */
        int act[n], n_act = 0;
        for (int b = 0; b < n; b++)
            if (t[b] < T[b] && out[b].status == RNNT_OK) {
                act[n_act] = b;
                frow[n_act] = fp[b] + (size_t)t[b] * J;
                grow[n_act] = gp + (size_t)b * align16((size_t)J);
                n_act++;
            }
        if (!n_act) break;
        double tj = now_s();
        rnnt_cpu_joint_argmax(m, n_act, frow, grow, k, step_scratch);
        t_joint += now_s() - tj;
        n_rows = 0;
        for (int i = 0; i < n_act; i++) {
            int b = act[i], kb = k[i];
            rnnt_result *res = &out[b];
            res->decode_steps++;
            if (kb < 0) {
                res->status = RNNT_ERR_NUMERIC;
                continue;
            }
            if (kb < m->vocab) {
                res->tokens[res->n_tokens] = kb;
                res->frames[res->n_tokens] = t[b];
                res->n_tokens++;
                if (++here[b] == m->max_symbols) {
                    t[b]++;
                    here[b] = 0;
                }
                if (t[b] < T[b]) {
                    rows[n_rows] = b;
                    labels[n_rows] = kb;
                    n_rows++;
                }
            } else {
                int d = kb == m->blank ? 1 : rnnt_big_blank_duration(m, kb);
                int stop = t[b] + d < T[b] ? t[b] + d : T[b];
                res->frames_skipped += stop - t[b] - 1;
                t[b] += d;
                here[b] = 0;
            }
        }
    }
    if (timing) {
        timing->encoder_s = t_enc;
        timing->predictor_s = t_pred;
        timing->joint_s = t_joint;
        timing->total_s = now_s() - t0;
        timing->decode_s = timing->total_s - t_enc - t_pred - t_joint;
    }
    return RNNT_OK;
}

/* rnnt_runner_trim: a workspace beyond CPU_WS_KEEP_BYTES (grown for a batch of long utterances) goes
 * back to the system; kept, every worker would hold the largest batch it ever ran for good (~230 MB
 * for 16 x 60 s on the shipped model). Called when the worker goes idle, not after every batch:
 * mapping 100+ MB again costs page faults worth ~10% of such a batch. */
void rnnt_cpu_trim(void *state)
{
    cpu_state *s = state;
    if (s->ws_cap * sizeof(float) > CPU_WS_KEEP_BYTES) {
        free(s->ws);
        s->ws = NULL;
        s->ws_cap = 0;
    }
}

const rnnt_backend_ops rnnt_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .device_name = cpu_device_name,
    .decode = cpu_decode,
};
