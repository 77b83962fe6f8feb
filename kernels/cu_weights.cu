/* cu_weights.cu — upload of a model's weights: a host image of the whole arena is built tensor by
 * tensor (converted, padded, re-laid out), checked finite, then copied in one transfer. */
#include "cu_weights.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

struct image {
    unsigned char *host; /* NULL on the sizing pass */
    size_t used;
    cu_dtype dt;
    int bad;             /* a value that is not finite after conversion */
    char bad_name[64];
};

/* Reserve n elements of dtype (or fp32 when f32) 256-byte aligned; returns the offset. */
size_t img_take(image *im, size_t n, int f32)
{
    size_t off = cu_round_up(im->used, 256);
    im->used = off + n * (f32 ? 4 : cu_dtype_size(im->dt));
    return off;
}

void img_put(image *im, size_t off, size_t i, float v, int f32, const char *name)
{
    if (!im->host) return;
    if (f32 || im->dt == CU_F32) {
        ((float *)(im->host + off))[i] = v;
        if (!isfinite(v) && !im->bad) {
            im->bad = 1;
            snprintf(im->bad_name, sizeof im->bad_name, "%s", name);
        }
    } else {
        __half h = __float2half_rn(v);
        ((__half *)(im->host + off))[i] = h;
        if (!isfinite(__half2float(h)) && !im->bad) {
            im->bad = 1;
            snprintf(im->bad_name, sizeof im->bad_name, "%s", name);
        }
    }
}

/* A [rows][in_cols] fp32 matrix into [rows][ld] where input column c goes to column map(c). The
 * destination is zeroed first (the pad columns must be zero: they meet pad activations). */
struct colmap {
    int slots, slot_w, slot_ld; /* column c = s*slot_w + j -> s*slot_ld + j */
};

size_t img_matrix(image *im, const float *src, int rows, int in_cols, int ld, colmap cm,
                  const char *name)
{
    size_t off = img_take(im, (size_t)rows * ld, 0);
    if (!im->host) return off;
    memset(im->host + off, 0, (size_t)rows * ld * cu_dtype_size(im->dt));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < in_cols; c++) {
            int s = c / cm.slot_w, j = c % cm.slot_w;
            img_put(im, off, (size_t)r * ld + (size_t)s * cm.slot_ld + j, src[(size_t)r * in_cols + c], 0,
                    name);
        }
    return off;
}

size_t img_vec32(image *im, const float *a, const float *b, int n, const char *name)
{
    size_t off = img_take(im, (size_t)n, 1);
    if (!im->host) return off;
    for (int i = 0; i < n; i++) img_put(im, off, (size_t)i, a[i] + (b ? b[i] : 0.0f), 1, name);
    return off;
}

struct lstm_off {
    size_t w_ih, w_hh, bias, w_hr, ln_w, ln_b;
};

lstm_off img_lstm(image *im, const rnnt_lstm_layer *L, int in_w, colmap cm, int hp, int ow, const char *name)
{
    lstm_off o;
    memset(&o, 0, sizeof o);
    int R = rnnt_lstm_out(L);
    colmap plain = {1, R, ow};
    o.w_ih = img_matrix(im, L->w_ih, 4 * L->hidden, L->input, in_w, cm, name);
    o.w_hh = img_matrix(im, L->w_hh, 4 * L->hidden, R, ow, plain, name);
    o.bias = img_vec32(im, L->bias, NULL, 4 * L->hidden, name);
    if (L->w_hr) {
        colmap ch = {1, L->hidden, hp};
        o.w_hr = img_matrix(im, L->w_hr, R, L->hidden, hp, ch, name);
    }
    if (L->ln_w) {
        o.ln_w = img_vec32(im, L->ln_w, NULL, R, name);
        o.ln_b = img_vec32(im, L->ln_b, NULL, R, name);
    }
    return o;
}

struct offsets {
    size_t mean, sd, emb, jenc_w, jpred_w, jbias, jout_w, jout_b;
    lstm_off *enc, *pred;
};

/* One pass over every tensor; the sizing pass (im->host == NULL) and the filling pass share it. */
void build(const struct rnnt_model *m, cu_weights *w, image *im, offsets *o)
{
    char name[64];
    im->used = 0;
    if (m->fe_mean) {
        o->mean = img_vec32(im, m->fe_mean, NULL, m->feature_dim, "frontend.mean");
        o->sd = img_vec32(im, m->fe_std, NULL, m->feature_dim, "frontend.std");
    }
    for (int l = 0; l < m->n_enc; l++) {
        const rnnt_lstm_layer *L = &m->enc[l];
        colmap cm;
        if (l == 0)
            cm = {m->stacking, m->feature_dim, w->fp};
        else
            cm = {m->enc[l - 1].time_stack, w->enc[l - 1].out, w->enc[l - 1].ow};
        snprintf(name, sizeof name, "encoder.lstm.%d", l);
        o->enc[l] = img_lstm(im, L, w->enc[l].in_w, cm, w->enc[l].hp, w->enc[l].ow, name);
    }
    colmap ce = {1, m->embed_dim, w->ep};
    o->emb = img_matrix(im, m->embedding, m->vocab + 1, m->embed_dim, w->ep, ce, "predictor.embedding");
    for (int l = 0; l < m->n_pred; l++) {
        const rnnt_lstm_layer *L = &m->pred[l];
        colmap cm;
        if (l == 0)
            cm = {1, m->embed_dim, w->ep};
        else
            cm = {1, m->pred[l - 1].hidden, w->pred[l - 1].hp};
        snprintf(name, sizeof name, "predictor.lstm.%d", l);
        o->pred[l] = img_lstm(im, L, w->pred[l].in_w, cm, w->pred[l].hp, w->pred[l].ow, name);
    }
    colmap cenc = {1, w->he, w->hep}, cpred = {1, w->hp_pred, w->hpp}, cout = {1, m->joint_dim, w->jp};
    o->jenc_w = img_matrix(im, m->joint_enc_w, m->joint_dim, w->he, w->hep, cenc, "joint.enc.weight");
    o->jpred_w = img_matrix(im, m->joint_pred_w, m->joint_dim, w->hp_pred, w->hpp, cpred, "joint.pred.weight");
    o->jbias = img_vec32(im, m->joint_enc_b, m->joint_pred_b, m->joint_dim, "joint.bias");
    o->jout_w = img_matrix(im, m->joint_out_w, m->n_out, m->joint_dim, w->jp, cout, "joint.out.weight");
    o->jout_b = img_vec32(im, m->joint_out_b, NULL, m->n_out, "joint.out.bias");
}

void set_layer(cu_lstm_w *d, const rnnt_lstm_layer *L, int in_w)
{
    d->input = L->input;
    d->in_w = in_w;
    d->hidden = L->hidden;
    d->hp = cu_round_up_i(L->hidden, CU_PAD);
    d->g4 = cu_round_up_i(4 * L->hidden, CU_PAD);
    d->time_stack = L->time_stack > 0 ? L->time_stack : 1;
    d->proj = L->proj;
    d->out = rnnt_lstm_out(L);
    d->ow = L->proj ? cu_round_up_i(L->proj, CU_PAD) : d->hp;
}

} // namespace

rnnt_status cu_weights_upload(const struct rnnt_model *m, cu_dtype dt, cu_weights *w, char *err,
                              size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (m->n_enc < 1 || m->n_pred < 1)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: model without encoder or predictor layers");
    w->dt = dt;
    w->act = m->act;
    w->joint_act = m->joint_act;
    w->F = m->feature_dim;
    w->fp = cu_round_up_i(m->feature_dim, CU_PAD);
    w->k = m->stacking;
    w->n_enc = m->n_enc;
    w->n_pred = m->n_pred;
    w->enc = (cu_lstm_w *)calloc((size_t)m->n_enc, sizeof *w->enc);
    w->pred = (cu_lstm_w *)calloc((size_t)m->n_pred, sizeof *w->pred);
    offsets o;
    memset(&o, 0, sizeof o);
    o.enc = (lstm_off *)calloc((size_t)m->n_enc, sizeof *o.enc);
    o.pred = (lstm_off *)calloc((size_t)m->n_pred, sizeof *o.pred);
    if (!w->enc || !w->pred || !o.enc || !o.pred) {
        free(o.enc);
        free(o.pred);
        cu_weights_free(w);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory for the weight layout");
    }
    w->subsampling = m->stacking;
    for (int l = 0; l < m->n_enc; l++) {
        int in_w = l == 0 ? m->stacking * w->fp : w->enc[l - 1].time_stack * w->enc[l - 1].ow;
        set_layer(&w->enc[l], &m->enc[l], in_w);
        w->subsampling *= w->enc[l].time_stack;
    }
    w->E = m->embed_dim;
    w->ep = cu_round_up_i(m->embed_dim, CU_PAD);
    for (int l = 0; l < m->n_pred; l++)
        set_layer(&w->pred[l], &m->pred[l], l == 0 ? w->ep : w->pred[l - 1].hp);
    w->J = m->joint_dim;
    w->jp = cu_round_up_i(m->joint_dim, CU_PAD);
    w->he = w->enc[m->n_enc - 1].out;
    w->hep = w->enc[m->n_enc - 1].ow;
    w->hp_pred = m->pred[m->n_pred - 1].hidden;
    w->hpp = w->pred[m->n_pred - 1].hp;
    w->V = m->vocab;
    w->n_out = m->n_out;
    w->blank = m->blank;
    w->n_big = m->n_big;
    w->max_symbols = m->max_symbols;
    for (int i = 0; i < m->n_big && i < RNNT_MAX_BIG_BLANKS; i++) w->durations[i] = m->durations[i];

    image im;
    memset(&im, 0, sizeof im);
    im.dt = dt;
    build(m, w, &im, &o);
    size_t bytes = cu_round_up(im.used, 256);
    im.host = (unsigned char *)calloc(1, bytes);
    if (!im.host) {
        free(o.enc);
        free(o.pred);
        cu_weights_free(w);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory for %zu bytes of weights", bytes);
    }
    build(m, w, &im, &o);
    rnnt_status st = RNNT_OK;
    if (im.bad) {
        st = cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED,
                        "cuda: weight %s does not fit in %s; use precision fp32", im.bad_name,
                        dt == CU_F16 ? "fp16" : "fp32");
    } else {
        cudaError_t e = cudaMalloc(&w->arena, bytes);
        if (e == cudaSuccess) e = cudaMemcpy(w->arena, im.host, bytes, cudaMemcpyHostToDevice);
        /* from pageable memory cudaMemcpy may return before the DMA ends, on the legacy stream that the
         * runners' non-blocking streams do not wait for: finish it here */
        if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
        if (e != cudaSuccess)
            st = cu_set_err(err, errlen, cu_status_of(e), "cuda: uploading %zu bytes of weights: %s", bytes,
                            cudaGetErrorString(e));
    }
    free(im.host);
    if (st == RNNT_OK) {
        unsigned char *a = (unsigned char *)w->arena;
        w->bytes = bytes;
        if (m->fe_mean) {
            w->mean = (const float *)(a + o.mean);
            w->sd = (const float *)(a + o.sd);
        }
        for (int l = 0; l < m->n_enc; l++) {
            w->enc[l].w_ih = a + o.enc[l].w_ih;
            w->enc[l].w_hh = a + o.enc[l].w_hh;
            w->enc[l].bias = (float *)(a + o.enc[l].bias);
            w->enc[l].w_hr = m->enc[l].w_hr ? a + o.enc[l].w_hr : NULL;
            w->enc[l].ln_w = m->enc[l].ln_w ? (float *)(a + o.enc[l].ln_w) : NULL;
            w->enc[l].ln_b = m->enc[l].ln_w ? (float *)(a + o.enc[l].ln_b) : NULL;
        }
        for (int l = 0; l < m->n_pred; l++) {
            w->pred[l].w_ih = a + o.pred[l].w_ih;
            w->pred[l].w_hh = a + o.pred[l].w_hh;
            w->pred[l].bias = (float *)(a + o.pred[l].bias);
        }
        w->emb = a + o.emb;
        w->jenc_w = a + o.jenc_w;
        w->jpred_w = a + o.jpred_w;
        w->jbias = (float *)(a + o.jbias);
        w->jout_w = a + o.jout_w;
        w->jout_b = (float *)(a + o.jout_b);
    }
    free(o.enc);
    free(o.pred);
    if (st != RNNT_OK) cu_weights_free(w);
    return st;
}

void cu_weights_free(cu_weights *w)
{
    if (w->arena) cudaFree(w->arena);
    free(w->enc);
    free(w->pred);
    memset(w, 0, sizeof *w);
}
