/* test_golden.c — the C engine against the PyTorch reference, stage by stage, on every golden model
 * under tests/data/golden/ (written by models/make_golden.sh): frontend, each encoder layer, the
 * encoder output, the predictor after each label, joint logits at the (t, u) the decoder visited —
 * each within 1e-5 relative (fp32 against the reference's fp64) — and the decoded tokens and frames,
 * exactly, through the runner. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_ops.h"
#include "safetensors.h"
#include "test_util.h"

#define TOL 1e-5

static float *get_f32(rnnt_st_file *g, const char *name, int64_t *rows, int64_t *cols)
{
    const rnnt_st_tensor *t = rnnt_st_find(g, name);
    if (!t) fail_msg("golden tensor %s missing", name);
    float *d = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *d);
    char err[256];
    if (rnnt_st_read_f32(g, t, d, err, sizeof err)) fail_msg("%s", err);
    if (rows) *rows = t->shape[0];
    if (cols) *cols = t->ndim > 1 ? t->shape[1] : 1;
    return d;
}

static int32_t *get_i32(rnnt_st_file *g, const char *name, int64_t *n)
{
    const rnnt_st_tensor *t = rnnt_st_find(g, name);
    if (!t) fail_msg("golden tensor %s missing", name);
    int32_t *d = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *d);
    char err[256];
    if (rnnt_st_read_i32(g, t, d, err, sizeof err)) fail_msg("%s", err);
    *n = t->numel;
    return d;
}

static void expect_close(const char *what, const float *got, const float *want, size_t n)
{
    if (!n) return;
    double e = tu_rel_err(got, want, n);
    if (!(e <= TOL)) fail_msg("%s: relative error %.3g > %.0e", what, e, TOL);
}

static int probs_checked; /* labels whose probability was checked against the reference */

static int check_case(const char *dir)
{
    char path[8192], err[512], name[8192];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    rnnt_st_file g;
    if (rnnt_st_open(path, &g, err, sizeof err)) fail_msg("%s", err);
    char *nu = rnnt_st_metadata(&g, "n_utts");
    assert_non_null(nu);
    int n = atoi(nu);
    free(nu);
    assert_true(n > 0);
    const int J = m->joint_dim, He = rnnt_lstm_out(&m->enc[m->n_enc - 1]), Hp = m->pred[m->n_pred - 1].hidden;
    rnnt_input *in = calloc((size_t)n, sizeof *in);
    float **feats = calloc((size_t)n, sizeof *feats);
    int32_t **want_tok = calloc((size_t)n, sizeof *want_tok), **want_frm = calloc((size_t)n, sizeof *want_frm);
    int64_t *n_tok = calloc((size_t)n, sizeof *n_tok);
    /* The reference's joint logits at the visited (t, u), kept to check each label's probability. */
    int32_t **g_tu = calloc((size_t)n, sizeof *g_tu);
    float **g_logits = calloc((size_t)n, sizeof *g_logits);
    int64_t *g_rows = calloc((size_t)n, sizeof *g_rows);
    int labels = 0;
    for (int b = 0; b < n; b++) {
        int64_t T, F;
        snprintf(name, sizeof name, "utt%d.features", b);
        feats[b] = get_f32(&g, name, &T, &F);
        assert_int_equal(F, m->feature_dim);
        in[b] = (rnnt_input){feats[b], (int)T, 0};
        int Tenc = rnnt_model_encoder_frames(m, (int)T);

        /* frontend */
        int T1 = rnnt_stacked_len((int)T, m->stacking);
        float *x1 = malloc(((size_t)T1 * m->stacking * m->feature_dim + 1) * sizeof(float));
        rnnt_cpu_frontend(m, feats[b], (int)T, x1);
        int64_t r1, c1;
        snprintf(name, sizeof name, "utt%d.frontend", b);
        float *w1 = get_f32(&g, name, &r1, &c1);
        assert_int_equal(r1, T1);
        snprintf(name, sizeof name, "%s utt%d frontend", dir, b);
        expect_close(name, x1, w1, (size_t)T1 * c1);
        free(x1);
        free(w1);

        /* encoder, layer by layer */
        float *scratch = malloc((rnnt_cpu_encoder_scratch(m, (int)T) + 1) * sizeof(float));
        float *f = malloc(((size_t)Tenc * He + 1) * sizeof(float));
        const float *layer_out[32] = {0};
        assert_int_equal(rnnt_cpu_encode(m, feats[b], (int)T, f, scratch, layer_out), Tenc);
        for (int l = 0; l < m->n_enc; l++) {
            int64_t rl, cl;
            snprintf(name, sizeof name, "utt%d.encoder.layer%d", b, l);
            float *wl = get_f32(&g, name, &rl, &cl);
            assert_int_equal(cl, rnnt_lstm_out(&m->enc[l]));
            snprintf(name, sizeof name, "%s utt%d encoder layer %d", dir, b, l);
            expect_close(name, layer_out[l], wl, (size_t)rl * cl);
            free(wl);
        }
        int64_t re, ce;
        snprintf(name, sizeof name, "utt%d.encoder", b);
        float *we = get_f32(&g, name, &re, &ce);
        assert_int_equal(re, Tenc);
        snprintf(name, sizeof name, "%s utt%d encoder", dir, b);
        expect_close(name, f, we, (size_t)Tenc * He);
        free(we);

        /* predictor after the start symbol and after each golden label */
        snprintf(name, sizeof name, "utt%d.tokens", b);
        want_tok[b] = get_i32(&g, name, &n_tok[b]);
        snprintf(name, sizeof name, "utt%d.frames", b);
        int64_t nf;
        want_frm[b] = get_i32(&g, name, &nf);
        assert_int_equal(nf, n_tok[b]);
        labels += (int)n_tok[b];
        int U = (int)n_tok[b];
        float *gout = malloc(((size_t)(U + 1) * Hp) * sizeof(float));
        float *hs[16], *cs[16];
        size_t sc = 0;
        for (int l = 0; l < m->n_pred; l++) {
            hs[l] = calloc((size_t)m->pred[l].hidden, sizeof(float));
            cs[l] = calloc((size_t)m->pred[l].hidden, sizeof(float));
            size_t s = rnnt_cpu_lstm_step_scratch(&m->pred[l], 1);
            if (s > sc) sc = s;
        }
        float *step = malloc(sc * sizeof(float));
        for (int u = 0; u <= U; u++) {
            int label = u == 0 ? m->vocab : want_tok[b][u - 1];
            const float *x = m->embedding + (size_t)label * m->embed_dim;
            int ldx = m->embed_dim;
            for (int l = 0; l < m->n_pred; l++) {
                rnnt_cpu_lstm_step(&m->pred[l], m->act, 1, x, ldx, hs[l], cs[l], step);
                x = hs[l];
                ldx = m->pred[l].hidden;
            }
            memcpy(gout + (size_t)u * Hp, x, sizeof(float) * Hp);
        }
        int64_t rp, cp;
        snprintf(name, sizeof name, "utt%d.predictor", b);
        float *wp = get_f32(&g, name, &rp, &cp);
        assert_int_equal(rp, U + 1);
        snprintf(name, sizeof name, "%s utt%d predictor", dir, b);
        expect_close(name, gout, wp, (size_t)(U + 1) * Hp);
        free(wp);

        /* joint logits at the visited (t, u) */
        int64_t ntu, rl, cl;
        snprintf(name, sizeof name, "utt%d.joint.tu", b);
        int32_t *tu = get_i32(&g, name, &ntu);
        snprintf(name, sizeof name, "utt%d.joint.logits", b);
        float *wl = get_f32(&g, name, &rl, &cl);
        assert_int_equal(cl, m->n_out);
        assert_int_equal(rl * 2, ntu);
        float *fp = malloc(((size_t)Tenc * J + 1) * sizeof(float)), *gp = malloc((size_t)(U + 1) * J * sizeof(float));
        rnnt_cpu_joint_enc_proj(m, Tenc, f, fp);
        rnnt_cpu_joint_pred_proj(m, U + 1, gout, gp);
        float *logits = malloc((size_t)m->n_out * sizeof(float)), *hidden = malloc((size_t)J * sizeof(float));
        for (int64_t i = 0; i < rl; i++) {
            int t = tu[2 * i], u = tu[2 * i + 1];
            assert_true(t >= 0 && t < Tenc && u >= 0 && u <= U);
            rnnt_cpu_joint_logits(m, fp + (size_t)t * J, gp + (size_t)u * J, logits, hidden);
            snprintf(name, sizeof name, "%s utt%d joint (t=%d, u=%d)", dir, b, t, u);
            expect_close(name, logits, wl + i * m->n_out, (size_t)m->n_out);
        }
        free(logits);
        free(hidden);
        free(fp);
        free(gp);
        g_tu[b] = tu;
        g_logits[b] = wl;
        g_rows[b] = rl;
        for (int l = 0; l < m->n_pred; l++) {
            free(hs[l]);
            free(cs[l]);
        }
        free(step);
        free(gout);
        free(scratch);
        free(f);
    }

    /* The decoded tokens and frames, exactly, through the runner: all utterances as one batch. */
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CPU;
    p.max_batch = n;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) fail_msg("%s", err);
    rnnt_result *res = calloc((size_t)n, sizeof *res);
    if (rnnt_runner_decode(r, n, in, res, NULL, err, sizeof err)) fail_msg("%s", err);
    for (int b = 0; b < n; b++) {
        assert_int_equal(res[b].status, RNNT_OK);
        if (res[b].n_tokens != n_tok[b]) fail_msg("%s utt%d: %d tokens, reference has %lld", dir, b, res[b].n_tokens, (long long)n_tok[b]);
        for (int i = 0; i < res[b].n_tokens; i++)
            if (res[b].tokens[i] != want_tok[b][i] || res[b].frames[i] != want_frm[b][i])
                fail_msg("%s utt%d token %d: (%d @ %d), reference (%d @ %d)", dir, b, i, res[b].tokens[i], res[b].frames[i], want_tok[b][i],
                         want_frm[b][i]);
        /* Each label's probability: the reference's softmax (in double) at the (t, u) it was emitted
         * at, where the golden file kept that step. */
        assert_non_null(res[b].probs);
        for (int i = 0; i < res[b].n_tokens; i++)
            for (int64_t k = 0; k < g_rows[b]; k++) {
                if (g_tu[b][2 * k] != res[b].frames[i] || g_tu[b][2 * k + 1] != i) continue;
                const float *z = g_logits[b] + k * m->n_out;
                double zmax = z[0], sum = 0.0;
                for (int o = 1; o < m->n_out; o++) zmax = z[o] > zmax ? z[o] : zmax;
                for (int o = 0; o < m->n_out; o++) sum += exp((double)z[o] - zmax);
                double want = exp((double)z[res[b].tokens[i]] - zmax) / sum;
                if (!(fabs(res[b].probs[i] - want) <= 1e-5 + 1e-4 * want))
                    fail_msg("%s utt%d token %d: probability %.7g, reference %.7g", dir, b, i, res[b].probs[i], want);
                probs_checked++;
            }
        free(g_tu[b]);
        free(g_logits[b]);
        rnnt_result_clear(&res[b]);
        free(feats[b]);
        free(want_tok[b]);
        free(want_frm[b]);
    }
    free(res);
    free(in);
    free(feats);
    free(want_tok);
    free(want_frm);
    free(n_tok);
    free(g_tu);
    free(g_logits);
    free(g_rows);
    rnnt_runner_free(r);
    rnnt_st_close(&g);
    rnnt_model_free(m);
    return labels;
}

static void test_goldens(void **state)
{
    char root[4096];
    snprintf(root, sizeof root, "%s/golden", tu_data_dir());
    DIR *d = opendir(root);
    if (!d) fail_msg("no golden directory %s", root);
    struct dirent *e;
    int cases = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[4096 + 256];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        char probe[4400];
        snprintf(probe, sizeof probe, "%s/golden.safetensors", dir);
        FILE *f = fopen(probe, "rb");
        if (!f) continue;
        fclose(f);
        int before = probs_checked;
        int labels = check_case(dir);
        printf("golden %s: %d labels decoded identically, %d label probabilities checked\n", e->d_name, labels,
               probs_checked - before);
        assert_true(labels > 0);
        cases++;
    }
    closedir(d);
    assert_true(probs_checked > 0);
    assert_true(cases >= 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_goldens)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
