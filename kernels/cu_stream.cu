/* cu_stream.cu — streams on the GPU: the slot pool, the gather/scatter kernels, and one advance (see
 * cu_stream.h). The encoder and decoder arithmetic is the whole-utterance path's: cu_gemm_rows with the
 * encoder's chunks, cu_lstm_pointwise, cu_pred_layer / cu_pred_proj and the decode rule of
 * cu_device.cuh; the joint here also gives the emitted label's softmax probability (as the CPU's
 * rnnt_cpu_joint_argmax_prob: the argmax of the same logits, p = 1 / sum_o exp(z_o - z_max) in double). */
#include "cu_stream.h"

#include <cub/block/block_scan.cuh>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cu_device.cuh"
#include "cu_gemm.h"
#include "cu_kernels.h"
#include "stream.h"

namespace {

constexpr int kMaxL = RNNT_STREAM_MAX_LAYERS;
constexpr int kScanThreads = 256;
constexpr int kUnroll = 4; /* decoding steps between two looks at the active count */

/* Where a slot's fields lie in its record (bytes from the record's start). */
struct slot_layout {
    size_t enc_h[kMaxL], enc_c[kMaxL], rem[kMaxL], pred_h[kMaxL], pred_c[kMaxL], gp, ints, bytes;
};
/* The record's ints: the predictor steps done (e, its parity picks the h buffer), the label the
 * predictor takes before the next joint evaluation (-1: none), the decoder's frame past the frames so
 * far, labels emitted on that frame, status (0 ok, 1 non-finite joint output). */
enum { SI_E = 0, SI_PEND, SI_TCARRY, SI_LABELS, SI_STATUS, SI_COUNT };

/* Per batch row (device meta, bcap ints each): the slot (-1 padding), whether the slot is fresh, the
 * input frames' offset and count, the rows of every layer (n_enc + 1 arrays) and each layer's
 * remainder rows before this chunk (n_enc arrays). */
struct meta_view {
    int *slot, *fresh, *off, *take, *rows[kMaxL + 1], *remr[kMaxL];
};

/* ---------------------------------------------------------------- kernels */

template <typename S>
__global__ void k_enc_gather(int hp, const int *__restrict__ slot, const int *__restrict__ fresh, const char *pool,
                             size_t rec, size_t o_h, size_t o_c, S *__restrict__ hs, float *__restrict__ c)
{
    int b = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= hp) return;
    int s = slot[b];
    S hv = (S)0.0f;
    float cv = 0.0f;
    if (s >= 0 && !fresh[b]) {
        hv = ((const S *)(pool + (size_t)s * rec + o_h))[j];
        cv = ((const float *)(pool + (size_t)s * rec + o_c))[j];
    }
    hs[(size_t)b * hp + j] = hv;
    c[(size_t)b * hp + j] = cv;
}

template <typename S>
__global__ void k_enc_scatter(int hp, const int *__restrict__ slot, char *pool, size_t rec, size_t o_h, size_t o_c,
                              const S *__restrict__ hs, const float *__restrict__ c)
{
    int b = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    int s = slot[b];
    if (j >= hp || s < 0) return;
    ((S *)(pool + (size_t)s * rec + o_h))[j] = hs[(size_t)b * hp + j];
    ((float *)(pool + (size_t)s * rec + o_c))[j] = c[(size_t)b * hp + j];
}

/* The next layer's input of a time-stacked layer (s rows of hp make one row): row r of stream b's
 * sequence is its remainder row r (r < remr), else its new output row r - remr, else zero (the end of
 * input pads the last group); only whole groups (rows_next * s rows) are taken, the rest is zero. */
template <typename S>
__global__ void k_restack_x(int hp, int s, int Tl, int Tn, const int *__restrict__ slot, const int *__restrict__ rows_l,
                            const int *__restrict__ rows_n, const int *__restrict__ remr, const char *pool, size_t rec,
                            size_t o_rem, const S *__restrict__ y, S *__restrict__ x)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y, b = blockIdx.z;
    if (j >= hp) return;
    S v = (S)0.0f;
    int rr = slot[b] >= 0 ? remr[b] : 0;
    if (r < rows_n[b] * s) {
        if (r < rr)
            v = ((const S *)(pool + (size_t)slot[b] * rec + o_rem))[(size_t)r * hp + j];
        else if (r - rr < rows_l[b])
            v = y[((size_t)b * Tl + r - rr) * hp + j];
    }
    x[((size_t)b * Tn * s + r) * hp + j] = v;
}

/* The rows after the whole groups wait in the slot for the next chunk (after k_restack_x, which reads
 * the old remainder: the two never run at once). A remainder row that stays where it is is not
 * rewritten. */
template <typename S>
__global__ void k_restack_rem(int hp, int s, int Tl, const int *__restrict__ slot, const int *__restrict__ rows_l,
                              const int *__restrict__ rows_n, const int *__restrict__ remr, char *pool, size_t rec,
                              size_t o_rem, const S *__restrict__ y)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y, b = blockIdx.z;
    if (j >= hp || slot[b] < 0) return;
    int rr = remr[b], have = rr + rows_l[b], whole = rows_n[b] * s;
    if (r >= have - whole) return;
    int q = whole + r; /* row of the sequence that becomes remainder row r */
    if (q < rr) return; /* whole == 0: it stays */
    ((S *)(pool + (size_t)slot[b] * rec + o_rem))[(size_t)r * hp + j] = y[((size_t)b * Tl + q - rr) * hp + j];
}

__device__ __forceinline__ const int *slot_ints(const char *pool, size_t rec, size_t o_int, int s)
{
    return (const int *)(pool + (size_t)s * rec + o_int);
}

/* The decoder's batch state from the slots (one block): the frame relative to this chunk, the frames a
 * big blank skipped into it, the emitters (slots with a pending label and frames to decode). */
__global__ void __launch_bounds__(kScanThreads) k_dec_gather(int nb, int V, const int *__restrict__ slot,
                                                             const int *__restrict__ fresh, const int *__restrict__ t_enc,
                                                             const char *pool, size_t rec, size_t o_int,
                                                             cu_dec_state st)
{
    typedef cub::BlockScan<int, kScanThreads> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    int base = 0, active = 0;
    for (int b0 = 0; b0 < nb; b0 += kScanThreads) {
        int b = b0 + threadIdx.x, emits = 0, live = 0;
        if (b < nb) {
            int s = slot[b], T = t_enc[b];
            int e = 1, pend = V, tc = 0, lab = 0, status = 0;
            if (s >= 0 && !fresh[b]) {
                const int *si = slot_ints(pool, rec, o_int, s);
                e = si[SI_E];
                pend = si[SI_PEND];
                tc = si[SI_TCARRY];
                lab = si[SI_LABELS];
                status = si[SI_STATUS];
            }
            st.t[b] = tc;
            st.labels[b] = lab;
            st.t_enc[b] = T;
            st.n_tok[b] = 0;
            st.e[b] = e;
            st.status[b] = status;
            st.steps[b] = 0;
            st.skipped[b] = min(tc, T); /* frames of this chunk a big blank of the last one skipped */
            st.k[b] = pend >= 0 ? pend : V;
            live = s >= 0 && status == 0 && tc < T;
            st.done[b] = !live;
            emits = live && pend >= 0;
        }
        int pos, total;
        scan_t(tmp).ExclusiveSum(emits, pos, total);
        if (emits) st.emit[base + pos] = b;
        base += total;
        active += __syncthreads_count(live);
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        st.counts[0] = base;
        st.counts[1] = active;
        st.counts[2] = 0;
        st.counts[3] = 0;
    }
}

/* The label the predictor still has to take after this chunk: the last label emitted when decoding
 * ended on it (the predictor steps only for slots that go on), else none; a slot that did not decode
 * keeps what it had. */
__device__ __forceinline__ int pend_after(const cu_dec_state &st, int b, int V, int fresh, const int *si)
{
    if (st.steps[b] == 0) return fresh ? V : si[SI_PEND];
    int k = st.k[b];
    return st.status[b] == 0 && k >= 0 && k < V ? k : -1;
}

/* Predictor state of layer l (and, with gp != NULL, the joint's predictor projection) between the slot
 * and the batch row; the current h is the one at parity (e - pending) & 1 (a pending label's step reads
 * parity (e - 1) & 1 and writes e & 1, as cu_pred_layer does). to_slot: scatter (after decoding). */
template <typename S>
__global__ void k_pred_state(int hp, int jp, int V, int to_slot, const int *__restrict__ slot, const int *__restrict__ fresh,
                             char *pool, size_t rec, size_t o_int, size_t o_h, size_t o_c, size_t o_gp, cu_dec_state st,
                             S *h, size_t hpar, float *c, float *gp)
{
    int b = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    int s = slot[b];
    if (s < 0) return;
    char *r = pool + (size_t)s * rec;
    const int *si = (const int *)(r + o_int);
    int fr = fresh[b], e, pend;
    if (to_slot) {
        e = st.e[b];
        pend = pend_after(st, b, V, fr, si);
    } else {
        e = fr ? 1 : si[SI_E];
        pend = fr ? V : si[SI_PEND];
    }
    int par = (e - (pend >= 0 ? 1 : 0)) & 1;
    S *hb = h + par * hpar + (size_t)b * hp;
    if (j < hp) {
        if (to_slot) {
            ((S *)(r + o_h))[j] = hb[j];
            ((float *)(r + o_c))[j] = c[(size_t)b * hp + j];
        } else {
            hb[j] = fr ? (S)0.0f : ((const S *)(r + o_h))[j];
            c[(size_t)b * hp + j] = fr ? 0.0f : ((const float *)(r + o_c))[j];
        }
    }
    if (gp && j < jp) {
        if (to_slot)
            ((float *)(r + o_gp))[j] = gp[(size_t)b * jp + j];
        else
            gp[(size_t)b * jp + j] = fr ? 0.0f : ((const float *)(r + o_gp))[j];
    }
}

/* The slot's ints after decoding (after every k_pred_state scatter, which reads the old ones). */
__global__ void k_dec_scatter(int nb, int V, const int *__restrict__ slot, const int *__restrict__ fresh, char *pool,
                              size_t rec, size_t o_int, cu_dec_state st)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nb || slot[b] < 0) return;
    int *si = (int *)(pool + (size_t)slot[b] * rec + o_int);
    int pend = pend_after(st, b, V, fresh[b], si);
    si[SI_E] = st.e[b];
    si[SI_PEND] = pend;
    si[SI_TCARRY] = st.t[b] - st.t_enc[b] > 0 ? st.t[b] - st.t_enc[b] : 0;
    si[SI_LABELS] = st.labels[b];
    si[SI_STATUS] = st.status[b]; /* 1 non-finite, 2 the step bound overrun: the slot stays stopped */
}

/* Joint + argmax + the argmax's softmax probability for the slots that are not done: the logits of
 * k_joint_argmax (the same joint_logit per output), the first largest, -1 when any is not finite. */
template <typename S, bool RELU>
__global__ void k_joint_prob(int J, int n_out, const float *__restrict__ fproj, int ldf, int fstride,
                             const float *__restrict__ gp, int ldg, const S *__restrict__ wout, int ldw,
                             const float *__restrict__ bout, const int *__restrict__ tix, const int *__restrict__ done,
                             int *__restrict__ kout, float *__restrict__ pout)
{
    extern __shared__ float sh[]; /* J hidden, then n_out logits */
    float *hid = sh, *z = sh + J;
    int b = blockIdx.x;
    if (done[b]) return;
    const float *f = fproj + ((size_t)b * fstride + tix[b]) * ldf;
    const float *g = gp + (size_t)b * ldg;
    for (int j = threadIdx.x; j < J; j += blockDim.x) hid[j] = joint_act<RELU>(__fadd_rn(f[j], g[j]));
    __syncthreads();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int o = warp; o < n_out; o += kWarps) {
        float v = joint_logit(wout + (size_t)o * ldw, hid, J, lane, bout[o]);
        if (lane == 0) z[o] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int best = 0;
        for (int o = 0; o < n_out; o++) {
            if (!isfinite(z[o])) {
                best = -1;
                break;
            }
            if (z[o] > z[best]) best = o;
        }
        float p = 0.0f;
        if (best >= 0) {
            double sum = 0.0;
            for (int o = 0; o < n_out; o++) sum += exp((double)z[o] - (double)z[best]);
            p = (float)(1.0 / sum);
        }
        kout[b] = best;
        pout[b] = p;
    }
}

/* The decode rule (cu_device.cuh's dec_rule_slot, as k_dec_update) plus the probability of an emitted
 * label; rebuilds the emitter list and counts the active slots. One block. */
__global__ void __launch_bounds__(kScanThreads) k_stream_update(int nb, cu_dec_rule rule, cu_dec_state st,
                                                                const float *__restrict__ pk, float *__restrict__ probs)
{
    dec_update_block<kScanThreads>(nb, rule, st, pk, probs);
}

/* Row b's results: [n_tok, steps, skipped, status, t, 0, 0, 0, tokens[cap], frames[cap], probs[cap]]. */
__global__ void k_stream_pack(cu_dec_state st, const float *__restrict__ probs, int *out)
{
    int b = blockIdx.x;
    int *o = out + (size_t)b * (8 + 3 * st.cap);
    int n = min(st.n_tok[b], st.cap);
    if (threadIdx.x == 0) {
        o[0] = st.n_tok[b];
        o[1] = st.steps[b];
        o[2] = st.skipped[b];
        o[3] = st.status[b];
        o[4] = st.t[b];
        o[5] = o[6] = o[7] = 0;
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        o[8 + i] = st.tokens[(size_t)b * st.cap + i];
        o[8 + st.cap + i] = st.frames[(size_t)b * st.cap + i];
        o[8 + 2 * st.cap + i] = __float_as_int(probs[(size_t)b * st.cap + i]);
    }
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t al(size_t x) { return cu_round_up(x, 256); }

/* What one stream's chunk is at every level (as the CPU backend's plan): input frames taken, whether
 * the end of input is in it, rows[0] stacked input rows, rows[l] input rows of layer l, rows[n_enc] new
 * encoder frames. */
struct plan {
    int take, flush, rows[kMaxL + 1];
};

} // namespace

/* ---------------------------------------------------------------- the pool and the batch buffers */

struct cu_streams {
    const struct rnnt_model *m;
    const cu_weights *w;
    const void *ops;
    cudaStream_t s;
    cublasHandle_t blas;
    cu_streams_params p;
    int bcap, take_cap, tcap[kMaxL + 1], cap; /* cap: labels per row per chunk */
    cu_dec_rule rule;
    /* pool: records of lay.bytes, pool_cap of them; free slots on a stack; refs = runner + slots held */
    pthread_mutex_t mu;
    slot_layout lay;
    char *pool;
    int pool_cap, pool_next, *free_list, n_free, used, refs, released; /* released: the runner let go */
    /* batch buffers (one device arena) and the pinned staging of meta + raw features and results */
    void *arena;
    int *meta_dev, *h_meta;
    float *raw_dev, *h_raw;
    size_t meta_ints, raw_floats;
    void *x0, *buf[3], *xproj, *hs;
    float *hproj, *c, *fproj, *gp, *pk, *probs;
    void *ph[kMaxL];
    float *pc[kMaxL];
    cu_dec_state st;
    int *out_dev, *h_out, *h_active;
    size_t out_ints;
    cudaEvent_t ev[4];
    cudaEvent_t ev_wait; /* blocking-sync event: a worker waiting for the GPU sleeps instead of spinning
                            (a daemon runs many stream workers beside the transport and the frontend) */
    plan *pl;          /* [max_batch] */
    int *fresh_slot;   /* [max_batch] */
};

static void pool_destroy(cu_streams *c)
{
    cudaSetDevice(c->p.device);
    if (c->s) cudaStreamSynchronize(c->s);
    if (c->pool) cudaFree(c->pool);
    if (c->arena) cudaFree(c->arena);
    if (c->h_meta) cudaFreeHost(c->h_meta);
    if (c->h_out) cudaFreeHost(c->h_out);
    for (int i = 0; i < 4; i++)
        if (c->ev[i]) cudaEventDestroy(c->ev[i]);
    if (c->ev_wait) cudaEventDestroy(c->ev_wait);
    free(c->free_list);
    free(c->pl);
    free(c->fresh_slot);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* A stream's slot goes back (rnnt_stream_free, any thread). */
static void slot_release(void *owner, int slot)
{
    cu_streams *c = (cu_streams *)owner;
    pthread_mutex_lock(&c->mu);
    c->free_list[c->n_free++] = slot;
    c->used--;
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last) pool_destroy(c);
}

void cu_streams_free(cu_streams *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->released = 1;
    c->s = NULL; /* the runner's stream goes with the runner (which synchronised it) */
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last) pool_destroy(c);
}

void cu_streams_slots(cu_streams *c, int *used, int *cap)
{
    pthread_mutex_lock(&c->mu);
    *used = c->used;
    *cap = c->pool_cap;
    pthread_mutex_unlock(&c->mu);
}

/* Room for `need` slots: a larger pool, the old records copied (the runner's thread only). */
static rnnt_status pool_grow(cu_streams *c, int need, char *err, size_t errlen)
{
    pthread_mutex_lock(&c->mu);
    int cap = c->pool_cap;
    pthread_mutex_unlock(&c->mu);
    if (need <= cap) return RNNT_OK;
    int ncap = cap ? cap : 64;
    while (ncap < need) ncap *= 2;
    char *np = NULL;
    cudaError_t ce = cudaMalloc(&np, (size_t)ncap * c->lay.bytes);
    int *nf = ce == cudaSuccess ? (int *)malloc((size_t)ncap * sizeof(int)) : NULL;
    if (ce != cudaSuccess || !nf) {
        if (np) cudaFree(np);
        cudaGetLastError();
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: no room for %d stream states of %zu bytes", ncap, c->lay.bytes);
    }
    if (c->pool) {
        ce = cudaMemcpyAsync(np, c->pool, (size_t)cap * c->lay.bytes, cudaMemcpyDeviceToDevice, c->s);
        if (ce == cudaSuccess) ce = cudaStreamSynchronize(c->s);
        if (ce != cudaSuccess) {
            cudaFree(np);
            free(nf);
            return cu_set_err(err, errlen, cu_status_of(ce), "cuda: moving the stream states: %s", cudaGetErrorString(ce));
        }
    }
    pthread_mutex_lock(&c->mu);
    if (c->n_free) memcpy(nf, c->free_list, (size_t)c->n_free * sizeof(int));
    free(c->free_list);
    c->free_list = nf;
    char *old = c->pool;
    c->pool = np;
    c->pool_cap = ncap;
    pthread_mutex_unlock(&c->mu);
    if (old) cudaFree(old);
    return RNNT_OK;
}

static rnnt_status slot_acquire(cu_streams *c, int *slot, char *err, size_t errlen)
{
    pthread_mutex_lock(&c->mu);
    if (c->n_free) {
        *slot = c->free_list[--c->n_free];
    } else if (c->pool_next < c->pool_cap) {
        *slot = c->pool_next++;
    } else {
        int need = c->pool_cap + 1;
        pthread_mutex_unlock(&c->mu);
        RNNT_TRY(pool_grow(c, need, err, errlen));
        pthread_mutex_lock(&c->mu);
        *slot = c->pool_next++;
    }
    c->used++;
    c->refs++;
    pthread_mutex_unlock(&c->mu);
    return RNNT_OK;
}

rnnt_status cu_streams_create(const struct rnnt_model *m, const cu_weights *w, cudaStream_t s, cublasHandle_t blas,
                              const cu_streams_params *p, const void *ops, cu_streams **out, char *err, size_t errlen)
{
    *out = NULL;
    if (w->n_enc > kMaxL || w->n_pred > kMaxL)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: streams take at most %d layers", kMaxL);
    if ((size_t)(w->J + w->n_out) * sizeof(float) > 48 * 1024)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: streams take joint dim + outputs <= 12288");
    for (int l = 0; l < w->n_enc; l++)
        if (w->enc[l].proj || w->enc[l].ln_w)
            return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED,
                              "cuda: streams do not take projection LSTMs or LayerNorm (encoder layer %d); whole utterances do", l);
    cu_streams *c = (cu_streams *)calloc(1, sizeof *c);
    if (!c) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    pthread_mutex_init(&c->mu, NULL);
    c->refs = 1;
    c->m = m;
    c->w = w;
    c->ops = ops;
    c->s = s;
    c->blas = blas;
    c->p = *p;
    c->bcap = cu_round_up_i(p->max_batch, 8);
    c->pl = (plan *)calloc((size_t)p->max_batch, sizeof(plan));
    c->fresh_slot = (int *)calloc((size_t)p->max_batch, sizeof(int));
    if (!c->pl || !c->fresh_slot) {
        pool_destroy(c);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    }
    const int k = w->k;
    c->take_cap = p->max_frames > k ? p->max_frames : k;
    /* Rows per layer of one chunk at most: the stacked input, then each layer's remainder plus its new
     * rows, grouped (padded at the end of input). */
    c->tcap[0] = cu_div_up(c->take_cap, k);
    for (int l = 0; l < w->n_enc; l++) {
        int s_l = l < w->n_enc - 1 ? w->enc[l].time_stack : 1;
        c->tcap[l + 1] = cu_div_up(s_l - 1 + c->tcap[l], s_l);
    }
    c->cap = c->tcap[w->n_enc] * w->max_symbols + 1;
    c->rule.V = w->V;
    c->rule.blank = w->blank;
    c->rule.n_big = w->n_big;
    c->rule.max_symbols = w->max_symbols;
    c->rule.max_iters = (c->tcap[w->n_enc] + 1) * (w->max_symbols + 1) + 8;
    for (int i = 0; i < w->n_big; i++) c->rule.durations[i] = w->durations[i];

    /* The slot record. */
    size_t esz = cu_dtype_size(w->dt), o = 0;
    slot_layout *L = &c->lay;
    for (int l = 0; l < w->n_enc; l++) {
        const cu_lstm_w *E = &w->enc[l];
        L->enc_h[l] = o, o = cu_round_up(o + E->hp * esz, 16);
        L->enc_c[l] = o, o = cu_round_up(o + E->hp * 4, 16);
        L->rem[l] = o, o = cu_round_up(o + (size_t)(l < w->n_enc - 1 ? E->time_stack - 1 : 0) * E->hp * esz, 16);
    }
    for (int l = 0; l < w->n_pred; l++) {
        L->pred_h[l] = o, o = cu_round_up(o + w->pred[l].hp * esz, 16);
        L->pred_c[l] = o, o = cu_round_up(o + w->pred[l].hp * 4, 16);
    }
    L->gp = o, o = cu_round_up(o + (size_t)w->jp * 4, 16);
    L->ints = o, o = cu_round_up(o + SI_COUNT * 4, 16);
    L->bytes = o;

    /* Batch buffers: every chunked GEMM operand has room for its rows rounded up to its chunk. */
    size_t B = (size_t)c->bcap, rin = (size_t)p->r_in, rrec = cu_round_up(B, (size_t)p->r_rec);
    size_t x0_el = cu_round_up(B * c->tcap[0], rin) * (size_t)w->enc[0].in_w, buf_el = 0, xp_el = 0;
    int hpmax = 0, g4max = 0;
    for (int l = 0; l < w->n_enc; l++) {
        const cu_lstm_w *E = &w->enc[l];
        size_t in_el = cu_round_up(B * c->tcap[l], rin) * (size_t)E->in_w;
        size_t out_el = cu_round_up(B * c->tcap[l], rin) * (size_t)E->hp;
        buf_el = in_el > buf_el ? in_el : buf_el;
        buf_el = out_el > buf_el ? out_el : buf_el;
        size_t xp = cu_round_up(B * c->tcap[l], rin) * (size_t)E->g4;
        xp_el = xp > xp_el ? xp : xp_el;
        hpmax = E->hp > hpmax ? E->hp : hpmax;
        g4max = E->g4 > g4max ? E->g4 : g4max;
    }
    size_t fp_el = cu_round_up(B * c->tcap[w->n_enc], rin) * (size_t)w->jp;
    c->meta_ints = B * (4 + 2 * (size_t)w->n_enc + 1);
    c->raw_floats = (size_t)p->max_batch * c->take_cap * w->F;
    c->out_ints = B * (8 + 3 * (size_t)c->cap);
    size_t off = 0, o_meta, o_raw, o_x0, o_buf[3], o_xp, o_hs, o_hproj, o_c, o_fp, o_gp, o_pk, o_probs, o_ints, o_tok, o_out;
    size_t o_ph[kMaxL], o_pc[kMaxL];
#define TAKE(o_, bytes)    \
    do {                   \
        off = al(off);     \
        o_ = off;          \
        off += (bytes);    \
    } while (0)
    TAKE(o_meta, c->meta_ints * 4);
    TAKE(o_raw, c->raw_floats * 4);
    TAKE(o_x0, x0_el * esz);
    for (int i = 0; i < 3; i++) TAKE(o_buf[i], buf_el * esz);
    TAKE(o_xp, xp_el * esz);
    TAKE(o_hs, rrec * hpmax * esz);
    TAKE(o_hproj, rrec * g4max * 4);
    TAKE(o_c, B * hpmax * 4);
    TAKE(o_fp, fp_el * 4);
    TAKE(o_gp, B * w->jp * 4);
    TAKE(o_pk, B * 4);
    TAKE(o_probs, B * c->cap * 4);
    for (int l = 0; l < w->n_pred; l++) {
        TAKE(o_ph[l], 2 * B * w->pred[l].hp * esz);
        TAKE(o_pc[l], B * w->pred[l].hp * 4);
    }
    TAKE(o_ints, (B * 11 + 4) * 4);
    TAKE(o_tok, 2 * B * c->cap * 4);
    TAKE(o_out, c->out_ints * 4);
#undef TAKE
    rnnt_status st = RNNT_OK;
    cudaError_t ce = cudaMalloc(&c->arena, al(off));
    if (ce == cudaSuccess) ce = cudaMemsetAsync(c->arena, 0, al(off), s);
    if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&c->h_meta, al(c->meta_ints * 4) + c->raw_floats * 4, cudaHostAllocDefault);
    if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&c->h_out, (c->out_ints + 64) * 4, cudaHostAllocDefault);
    for (int i = 0; i < 4 && ce == cudaSuccess; i++) ce = cudaEventCreate(&c->ev[i]);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&c->ev_wait, cudaEventBlockingSync | cudaEventDisableTiming);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(s);
    if (ce != cudaSuccess) {
        st = cu_set_err(err, errlen, cu_status_of(ce), "cuda: %.1f MiB of stream buffers for %d streams x %d frames: %s",
                        off / 1048576.0, p->max_batch, p->max_frames, cudaGetErrorString(ce));
        cudaGetLastError();
        pool_destroy(c);
        return st;
    }
    char *a = (char *)c->arena;
    c->meta_dev = (int *)(a + o_meta);
    c->raw_dev = (float *)(a + o_raw);
    c->h_raw = (float *)((char *)c->h_meta + al(c->meta_ints * 4));
    c->x0 = a + o_x0;
    for (int i = 0; i < 3; i++) c->buf[i] = a + o_buf[i];
    c->xproj = a + o_xp;
    c->hs = a + o_hs;
    c->hproj = (float *)(a + o_hproj);
    c->c = (float *)(a + o_c);
    c->fproj = (float *)(a + o_fp);
    c->gp = (float *)(a + o_gp);
    c->pk = (float *)(a + o_pk);
    c->probs = (float *)(a + o_probs);
    for (int l = 0; l < w->n_pred; l++) {
        c->ph[l] = a + o_ph[l];
        c->pc[l] = (float *)(a + o_pc[l]);
    }
    int *ints = (int *)(a + o_ints);
    int **fields[] = {&c->st.t, &c->st.labels, &c->st.t_enc, &c->st.n_tok, &c->st.e, &c->st.status,
                      &c->st.steps, &c->st.skipped, &c->st.done, &c->st.k, &c->st.emit};
    for (int i = 0; i < 11; i++) *fields[i] = ints + (size_t)i * B;
    c->st.counts = ints + 11 * B;
    c->st.tokens = (int *)(a + o_tok);
    c->st.frames = c->st.tokens + B * c->cap;
    c->st.cap = c->cap;
    c->out_dev = (int *)(a + o_out);
    c->h_active = c->h_out + c->out_ints;
    *out = c;
    return RNNT_OK;
}

/* ---------------------------------------------------------------- one advance */

namespace {

void plan_chunk(const struct rnnt_model *m, const struct rnnt_stream *st, int max_frames, plan *c)
{
    rnnt_stream_plan_chunk(m, st, max_frames, &c->take, &c->flush, c->rows);
}

/* Whether a stream not bound yet has encoded rows already (a CPU runner advanced it): a fresh slot
 * would start from zeros, so such a stream stays with the CPU backend. */
bool encoded_on_host(const struct rnnt_model *m, const struct rnnt_stream *st)
{
    if (st->enc_frames > 0) return true;
    for (int l = 0; l < m->n_enc; l++)
        if (st->rem_rows[l] > 0) return true;
    return false;
}

meta_view meta_of(int *base, int B, int n_enc)
{
    meta_view v;
    v.slot = base;
    v.fresh = base + B;
    v.off = base + 2 * B;
    v.take = base + 3 * B;
    for (int l = 0; l <= n_enc; l++) v.rows[l] = base + (size_t)(4 + l) * B;
    for (int l = 0; l < n_enc; l++) v.remr[l] = base + (size_t)(5 + n_enc + l) * B;
    return v;
}

/* Waits for everything enqueued on the runner's stream, sleeping. */
rnnt_status wait_stream(cu_streams *c, char *err, size_t errlen)
{
    CU_TRY(cudaEventRecord(c->ev_wait, c->s));
    CU_TRY(cudaEventSynchronize(c->ev_wait));
    return RNNT_OK;
}

/* An error after the slots began to change: the device finishes what was queued (its result is
 * ignored: the error reported is the first one), and every stream of the batch stops with
 * RNNT_ERR_DEVICE (final; later advances leave it alone), since its slot may be ahead of its host
 * state. Returns s. */
rnnt_status fail_batch(cu_streams *c, int n, struct rnnt_stream *const *st, rnnt_status s)
{
    char ignored[8];
    (void)wait_stream(c, ignored, sizeof ignored);
    for (int b = 0; b < n; b++) st[b]->dec.status = RNNT_ERR_DEVICE;
    return s;
}

dim3 grid2(int cols, int rows) { return dim3((unsigned)cu_div_up(cols, 128), (unsigned)rows); }

template <typename S>
rnnt_status enqueue_encoder(cu_streams *c, int nb, const meta_view &dv, const int *T, char *err, size_t errlen)
{
    const cu_weights *w = c->w;
    const size_t esz = sizeof(S);
    const char *pool = c->pool;
    size_t rec = c->lay.bytes;
    if (T[0] > 0)
        RNNT_TRY(cu_frontend(c->s, w->dt, nb, T[0] * w->k, w->F, w->fp, c->raw_dev, dv.off, dv.take, w->mean, w->sd, c->x0,
                             err, errlen));
    const void *in = c->x0;
    for (int l = 0; l < w->n_enc; l++) {
        const cu_lstm_w *L = &w->enc[l];
        const int H = L->hidden, hp = L->hp, Tl = T[l], last = l == w->n_enc - 1;
        void *y = c->buf[0] == in ? c->buf[1] : c->buf[0];
        /* Gathered and scattered also without new rows: a fresh slot's state is zeroed that way. */
        k_enc_gather<S><<<grid2(hp, nb), 128, 0, c->s>>>(hp, dv.slot, dv.fresh, pool, rec, c->lay.enc_h[l], c->lay.enc_c[l],
                                                         (S *)c->hs, c->c);
        CU_TRY_LAUNCH();
        if (Tl > 0) {
            RNNT_TRY(cu_gemm_rows(c->blas, w->dt, nb * Tl, 4 * H, L->in_w, in, L->in_w, L->w_ih, L->in_w, c->xproj, 0, L->g4,
                                  c->p.r_in, err, errlen));
            for (int t = 0; t < Tl; t++) {
                RNNT_TRY(cu_gemm_rows(c->blas, w->dt, nb, 4 * H, hp, c->hs, hp, L->w_hh, hp, c->hproj, 1, L->g4, c->p.r_rec,
                                      err, errlen));
                RNNT_TRY(cu_lstm_pointwise(c->s, w->dt, w->act, nb, H, hp, (const char *)c->xproj + (size_t)t * L->g4 * esz,
                                           (size_t)Tl * L->g4, c->hproj, L->g4, L->bias, c->c, hp,
                                           (char *)y + (size_t)t * hp * esz, (size_t)Tl * hp, c->hs, hp, dv.rows[l], t, err,
                                           errlen));
            }
        }
        k_enc_scatter<S><<<grid2(hp, nb), 128, 0, c->s>>>(hp, dv.slot, c->pool, rec, c->lay.enc_h[l], c->lay.enc_c[l],
                                                          (const S *)c->hs, c->c);
        CU_TRY_LAUNCH();
        if (last) {
            in = y;
            break;
        }
        const int s = L->time_stack, Tn = T[l + 1];
        if (s == 1) {
            in = y; /* the next layer's rows are this layer's */
            continue;
        }
        void *x = c->buf[0] != in && c->buf[0] != y ? c->buf[0] : c->buf[1] != in && c->buf[1] != y ? c->buf[1] : c->buf[2];
        if (Tn > 0) {
            k_restack_x<S><<<dim3((unsigned)cu_div_up(hp, 128), (unsigned)(Tn * s), (unsigned)nb), 128, 0, c->s>>>(
                hp, s, Tl, Tn, dv.slot, dv.rows[l], dv.rows[l + 1], dv.remr[l], pool, rec, c->lay.rem[l], (const S *)y, (S *)x);
            CU_TRY_LAUNCH();
        }
        k_restack_rem<S><<<dim3((unsigned)cu_div_up(hp, 128), (unsigned)(s - 1), (unsigned)nb), 128, 0, c->s>>>(
            hp, s, Tl, dv.slot, dv.rows[l], dv.rows[l + 1], dv.remr[l], c->pool, rec, c->lay.rem[l], (const S *)y);
        CU_TRY_LAUNCH();
        in = x;
    }
    const int Te = T[w->n_enc];
    if (Te > 0)
        RNNT_TRY(cu_gemm_rows(c->blas, w->dt, nb * Te, w->J, w->hep, in, w->hep, w->jenc_w, w->hep, c->fproj, 1, w->jp,
                              c->p.r_in, err, errlen));
    return RNNT_OK;
}

rnnt_status enqueue_pred(cu_streams *c, int nb, char *err, size_t errlen)
{
    const cu_weights *w = c->w;
    const size_t B = (size_t)c->bcap;
    for (int l = 0; l < w->n_pred; l++) {
        const cu_lstm_w *L = &w->pred[l];
        const cu_lstm_w *P = l > 0 ? &w->pred[l - 1] : NULL;
        RNNT_TRY(cu_pred_layer(c->s, w->dt, w->act, nb, c->st.emit, c->st.counts, c->st.e, c->st.k, l == 0 ? w->emb : NULL,
                               l == 0 ? NULL : c->ph[l - 1], l == 0 ? 0 : B * P->hp, l == 0 ? w->ep : P->hp,
                               l == 0 ? w->E : P->hidden, L->w_ih, L->in_w, L->w_hh, L->hp, L->bias, L->hidden, c->ph[l],
                               B * L->hp, L->hp, c->pc[l], L->hp, err, errlen));
    }
    const cu_lstm_w *T = &w->pred[w->n_pred - 1];
    return cu_pred_proj(c->s, w->dt, nb, c->st.emit, c->st.counts, c->st.e, c->ph[w->n_pred - 1], B * T->hp, T->hp, T->hidden,
                        w->jpred_w, w->hpp, w->jbias, w->J, c->gp, w->jp, err, errlen);
}

template <typename S>
rnnt_status pred_state(cu_streams *c, int nb, const meta_view &dv, int to_slot, char *err, size_t errlen)
{
    const cu_weights *w = c->w;
    for (int l = 0; l < w->n_pred; l++) {
        int hp = w->pred[l].hp, cols = l == 0 && w->jp > hp ? w->jp : hp;
        k_pred_state<S><<<grid2(cols, nb), 128, 0, c->s>>>(hp, w->jp, w->V, to_slot, dv.slot, dv.fresh, c->pool, c->lay.bytes,
                                                           c->lay.ints, c->lay.pred_h[l], c->lay.pred_c[l], c->lay.gp, c->st,
                                                           (S *)c->ph[l], (size_t)c->bcap * hp, c->pc[l],
                                                           l == 0 ? c->gp : NULL);
        CU_TRY_LAUNCH();
    }
    return RNNT_OK;
}

template <typename S>
rnnt_status enqueue_joint(cu_streams *c, int nb, int fstride, char *err, size_t errlen)
{
    const cu_weights *w = c->w;
    size_t shm = (size_t)(w->J + w->n_out) * sizeof(float);
    if (w->joint_act == RNNT_JOINT_RELU)
        k_joint_prob<S, true><<<nb, kWarps * 32, shm, c->s>>>(w->J, w->n_out, c->fproj, w->jp, fstride, c->gp, w->jp,
                                                              (const S *)w->jout_w, w->jp, w->jout_b, c->st.t, c->st.done,
                                                              c->st.k, c->pk);
    else
        k_joint_prob<S, false><<<nb, kWarps * 32, shm, c->s>>>(w->J, w->n_out, c->fproj, w->jp, fstride, c->gp, w->jp,
                                                               (const S *)w->jout_w, w->jp, w->jout_b, c->st.t, c->st.done,
                                                               c->st.k, c->pk);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

/* Decoding of the batch rows over their new frames, from and back to the slots. */
template <typename S>
rnnt_status enqueue_decoder(cu_streams *c, int nb, const meta_view &dv, int Te, char *err, size_t errlen)
{
    const cu_weights *w = c->w;
    k_dec_gather<<<1, kScanThreads, 0, c->s>>>(nb, w->V, dv.slot, dv.fresh, dv.rows[w->n_enc], c->pool, c->lay.bytes,
                                               c->lay.ints, c->st);
    CU_TRY_LAUNCH();
    RNNT_TRY(pred_state<S>(c, nb, dv, 0, err, errlen));
    RNNT_TRY(enqueue_pred(c, nb, err, errlen)); /* the pending labels (the start symbol of a new stream) */
    if (Te > 0)
        /* The first look after Te + 2 steps (a chunk of Te frames with a token or two needs about that
         * many), then every kUnroll: a look costs a copy and a wait, a step past the end a few idle
         * launches. */
        for (int iters = 0, group = Te + 2;; group = kUnroll) {
            for (int u = 0; u < group; u++) {
                RNNT_TRY(enqueue_joint<S>(c, nb, Te, err, errlen));
                k_stream_update<<<1, kScanThreads, 0, c->s>>>(nb, c->rule, c->st, c->pk, c->probs);
                CU_TRY_LAUNCH();
                RNNT_TRY(enqueue_pred(c, nb, err, errlen));
            }
            iters += group;
            CU_TRY(cudaMemcpyAsync(c->h_active, c->st.counts + 1, sizeof(int), cudaMemcpyDeviceToHost, c->s));
            RNNT_TRY(wait_stream(c, err, errlen));
            if (*c->h_active == 0) break;
            if (iters > c->rule.max_iters + kUnroll)
                return cu_set_err(err, errlen, RNNT_ERR_DEVICE, "cuda: stream decoding did not end after %d steps", iters);
        }
    RNNT_TRY(pred_state<S>(c, nb, dv, 1, err, errlen));
    k_dec_scatter<<<cu_div_up(nb, 128), 128, 0, c->s>>>(nb, w->V, dv.slot, dv.fresh, c->pool, c->lay.bytes, c->lay.ints, c->st);
    CU_TRY_LAUNCH();
    k_stream_pack<<<nb, 128, 0, c->s>>>(c->st, c->probs, c->out_dev);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}

/* The encoder and the decoder of the batch (n streams in nb rows), then its results into h_out;
 * waits for the device. */
rnnt_status advance_on_device(cu_streams *c, int n, int nb, const meta_view &dv, const int *T, char *err, size_t errlen)
{
    const cu_weights *w = c->w;
    const int n_enc = w->n_enc;
    CU_TRY(cudaEventRecord(c->ev[0], c->s));
    rnnt_status rs = w->dt == CU_F16 ? enqueue_encoder<__half>(c, nb, dv, T, err, errlen) : enqueue_encoder<float>(c, nb, dv, T, err, errlen);
    if (rs) return rs;
    CU_TRY(cudaEventRecord(c->ev[1], c->s));
    rs = w->dt == CU_F16 ? enqueue_decoder<__half>(c, nb, dv, T[n_enc], err, errlen)
                         : enqueue_decoder<float>(c, nb, dv, T[n_enc], err, errlen);
    if (rs) return rs;
    CU_TRY(cudaEventRecord(c->ev[2], c->s));
    const size_t row = 8 + 3 * (size_t)c->cap;
    CU_TRY(cudaMemcpyAsync(c->h_out, c->out_dev, (size_t)n * row * sizeof(int), cudaMemcpyDeviceToHost, c->s));
    return wait_stream(c, err, errlen);
}

} // namespace

rnnt_status cu_streams_advance(cu_streams *c, int n, struct rnnt_stream *const *st, rnnt_timing *timing, char *err,
                               size_t errlen)
{
    const struct rnnt_model *m = c->m;
    const cu_weights *w = c->w;
    double t0 = now_s();
    if (n < 1) return RNNT_OK;
    if (n > c->p.max_batch)
        return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: %d streams, the runner takes %d", n, c->p.max_batch);
    CU_TRY(cudaSetDevice(c->p.device));
    cudaGetLastError();
    const int nb = cu_round_up_i(n, 8), B = c->bcap, n_enc = w->n_enc;
    plan *pl = c->pl;
    int T[kMaxL + 1] = {0};
    for (int b = 0; b < n; b++) {
        if (st[b]->dev.owner && st[b]->dev.owner != c)
            return cu_set_err(err, errlen, RNNT_ERR_INVALID, "stream %d is bound to another runner's device", b);
        if (!st[b]->dev.owner && encoded_on_host(m, st[b]))
            return cu_set_err(err, errlen, RNNT_ERR_INVALID, "stream %d was advanced by the CPU backend: its state is in host memory", b);
        plan_chunk(m, st[b], c->p.max_frames, &pl[b]);
        for (int l = 0; l <= n_enc; l++) T[l] = pl[b].rows[l] > T[l] ? pl[b].rows[l] : T[l];
        /* Everything that can fail on the host comes before any stream changes. */
        if (rnnt_stream_reserve_tokens(st[b], (size_t)pl[b].rows[n_enc] * m->max_symbols + 1))
            return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory for stream %d's tokens", b);
    }
    int *fresh_slot = c->fresh_slot;
    for (int b = 0; b < n; b++) {
        fresh_slot[b] = -1;
        if (st[b]->dev.owner) continue;
        rnnt_status s = slot_acquire(c, &fresh_slot[b], err, errlen);
        if (s != RNNT_OK) {
            for (int i = 0; i < b; i++)
                if (fresh_slot[i] >= 0) slot_release(c, fresh_slot[i]);
            return s;
        }
    }
    /* Meta and features into the pinned buffer (the last advance synchronised: it is free). */
    memset(c->h_meta, 0, c->meta_ints * 4);
    meta_view hv = meta_of(c->h_meta, B, n_enc), dv = meta_of(c->meta_dev, B, n_enc);
    size_t used = 0;
    const int F = w->F;
    for (int b = 0; b < nb; b++) hv.slot[b] = -1;
    for (int b = 0; b < n; b++) {
        struct rnnt_stream *s = st[b];
        hv.slot[b] = s->dev.owner ? s->dev.slot : fresh_slot[b];
        hv.fresh[b] = !s->dev.owner;
        hv.off[b] = (int)used;
        hv.take[b] = pl[b].take;
        for (int l = 0; l <= n_enc; l++) hv.rows[l][b] = pl[b].rows[l];
        for (int l = 0; l < n_enc; l++) hv.remr[l][b] = s->rem_rows[l];
        if (pl[b].take) memcpy(c->h_raw + used * F, s->feats, (size_t)pl[b].take * F * sizeof(float));
        used += (size_t)pl[b].take;
    }
    /* A failed copy changes no slot: the fresh ones go back, the stream is synchronised (the next
     * advance reuses the pinned buffers), and no stream has changed. */
    cudaError_t ce = cudaMemcpyAsync(c->meta_dev, c->h_meta, c->meta_ints * 4, cudaMemcpyHostToDevice, c->s);
    if (ce == cudaSuccess && used)
        ce = cudaMemcpyAsync(c->raw_dev, c->h_raw, used * F * sizeof(float), cudaMemcpyHostToDevice, c->s);
    if (ce != cudaSuccess) {
        char ignored[8];
        (void)wait_stream(c, ignored, sizeof ignored);
        for (int b = 0; b < n; b++)
            if (fresh_slot[b] >= 0) slot_release(c, fresh_slot[b]);
        return cu_set_err(err, errlen, RNNT_ERR_DEVICE, "cuda: %s", cudaGetErrorString(ce));
    }
    /* From here on the slots change: the streams are bound to them whatever happens, and an error
     * stops the whole batch (fail_batch). */
    for (int b = 0; b < n; b++)
        if (!st[b]->dev.owner) {
            st[b]->dev.ops = c->ops;
            st[b]->dev.owner = c;
            st[b]->dev.slot = fresh_slot[b];
            st[b]->dev.release = slot_release;
        }
    rnnt_status rs = advance_on_device(c, n, nb, dv, T, err, errlen);
    if (rs) return fail_batch(c, n, st, rs);

    const size_t row = 8 + 3 * (size_t)c->cap;
    /* An overrun anywhere fails the batch before any stream is updated (a stream stopped before keeps
     * its slot's status and is left alone). */
    for (int b = 0; b < n; b++)
        if (st[b]->dec.status == RNNT_OK && c->h_out[(size_t)b * row + 3] == 2)
            return fail_batch(c, n, st,
                              cu_set_err(err, errlen, RNNT_ERR_DEVICE, "cuda: decoding of stream %d overran its step bound", b));
    for (int b = 0; b < n; b++) {
        struct rnnt_stream *s = st[b];
        const int *o = c->h_out + (size_t)b * row;
        rnnt_dec_state *d = &s->dec;
        int base = s->enc_frames, n_new = o[0] < c->cap ? o[0] : c->cap;
        /* the frames a big blank skipped so far, as the decoder counts them (without the part beyond
         * the frames that existed), plus this chunk's */
        int acc = d->skipped - rnnt_mb_past_end(d->t, base);
        for (int i = 0; i < n_new; i++) {
            d->tokens[d->n_tokens + i] = o[8 + i];
            d->frames[d->n_tokens + i] = base + o[8 + c->cap + i];
            float p;
            memcpy(&p, &o[8 + 2 * c->cap + i], sizeof p);
            if (d->probs) d->probs[d->n_tokens + i] = p;
        }
        d->n_tokens += n_new;
        d->steps += o[1];
        rnnt_stream_drop_frames(s, pl[b].take);
        for (int l = 0; l < n_enc - 1; l++) s->rem_rows[l] = rnnt_stream_rem_after(m, s, pl[b].rows, l);
        s->enc_frames += pl[b].rows[n_enc];
        if (pl[b].flush) s->flushed = 1;
        if (o[4] >= 0) d->t = base + o[4];
        if (d->t < base) d->t = base;
        d->skipped = acc + o[2] + rnnt_mb_past_end(d->t, s->enc_frames);
        if (o[3] == 1 && d->status == RNNT_OK) d->status = RNNT_ERR_NUMERIC;
    }
    if (timing) { /* the streams have changed: a timing that cannot be read is 0, not an error */
        float e_ms = 0, d_ms = 0;
        if (cudaEventElapsedTime(&e_ms, c->ev[0], c->ev[1]) != cudaSuccess) e_ms = 0;
        if (cudaEventElapsedTime(&d_ms, c->ev[1], c->ev[2]) != cudaSuccess) d_ms = 0;
        timing->encoder_s = e_ms / 1e3;
        timing->joint_s = 0;
        timing->predictor_s = 0;
        timing->decode_s = d_ms / 1e3;
        timing->total_s = now_s() - t0;
    }
    return RNNT_OK;
}
