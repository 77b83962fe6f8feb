/* cu_decoder.cu — decode state, the step kernels' sequence, the WHILE graph (see cu_decoder.h). */
#include "cu_decoder.h"

#include "cu_dec_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

struct dgraph {
    int nb;
    const void *fproj, *fstride, *t_enc; /* baked into the graph */
    cudaGraphExec_t exec;
};

} // namespace

struct cu_decoder {
    const cu_weights *w;
    cudaStream_t s;
    int bcap, cap, t_enc_max;
    cu_dec_state st;
    cu_dec_rule rule;
    void *arena;
    size_t arena_bytes;
    void **ph;           /* per predictor layer: h [2][bcap][hp] */
    float **pc;          /* per predictor layer: c [bcap][hp] */
    float *gp;           /* [bcap][jp] */
    int mapped;          /* results written by the pack kernel straight into host memory */
    int *h_out;          /* pinned results (mapped, or the target of one copy) */
    int *d_out;          /* its device alias, or a device buffer */
    int *h_active, *d_active; /* d_active NULL when not mapped */
    size_t out_ints;
    cu_dec_mode forced;  /* CU_DEC_HOST once the WHILE graph failed */
    const char *note;
    dgraph graphs[8];
    int n_graphs;
    int unroll;          /* decoding steps per WHILE iteration */
    int group;           /* slots per block of the fused loop */
    int cluster, cluster_w, cluster_g; /* blocks, warps per block and slots (0: auto) of the cluster loop */
    int grid_per_sm;     /* blocks per SM of the grid loop (0: as many as fit) */
    int grid_tile;       /* its work split (cu_dec_grid_plan.tile; 2: tile with the weights in shared memory) */
    int grid_vst;        /* its f4 staging 16 bytes a thread (cu_dec_grid_plan.vst) */
    int grid_cnt;        /* per-slot counters instead of two of its grid barriers (cu_dec_grid_plan.cnt); -1 by batch */
    int grid_occ;        /* blocks an SM its kernel is built for (1 or 2; -1 the default) */
    int grid_slices;     /* its slices (cu_decoder_set_grid_slices; -1 the default) */
    int grid_pair;       /* two emitter groups a pass in its layers (cu_decoder_set_grid_pair; -1 the default) */
    int *flags;          /* the grid loop's [2][bcap] step flags (int2), then [2][bcap] counters, its slices' barriers */
    cudaEvent_t ev[4];
};

static rnnt_status enqueue_pred(cu_decoder *d, int nb, char *err, size_t errlen)
{
    const cu_weights *w = d->w;
    for (int l = 0; l < w->n_pred; l++) {
        const cu_lstm_w *L = &w->pred[l];
        const cu_lstm_w *P = l > 0 ? &w->pred[l - 1] : NULL;
        RNNT_TRY(cu_pred_layer(d->s, w->dt, w->act, nb, d->st.emit, d->st.counts, d->st.e, d->st.k,
                               l == 0 ? w->emb : NULL, l == 0 ? NULL : d->ph[l - 1],
                               l == 0 ? 0 : (size_t)d->bcap * P->hp, l == 0 ? w->ep : P->hp,
                               l == 0 ? w->E : P->hidden, L->w_ih, L->in_w, L->w_hh, L->hp, L->bias, L->hidden,
                               d->ph[l], (size_t)d->bcap * L->hp, L->hp, d->pc[l], L->hp, err, errlen));
    }
    const cu_lstm_w *T = &w->pred[w->n_pred - 1];
    return cu_pred_proj(d->s, w->dt, nb, d->st.emit, d->st.counts, d->st.e, d->ph[w->n_pred - 1],
                        (size_t)d->bcap * T->hp, T->hp, T->hidden, w->jpred_w, w->hpp, w->jbias, w->J, d->gp, w->jp,
                        err, errlen);
}

static rnnt_status enqueue_prologue(cu_decoder *d, int nb, const int *t_enc_dev, char *err, size_t errlen)
{
    const cu_weights *w = d->w;
    for (int l = 0; l < w->n_pred; l++) {
        const cu_lstm_w *L = &w->pred[l];
        CU_TRY(cudaMemsetAsync(d->ph[l], 0, (size_t)2 * d->bcap * L->hp * cu_dtype_size(w->dt), d->s));
        CU_TRY(cudaMemsetAsync(d->pc[l], 0, (size_t)d->bcap * L->hp * sizeof(float), d->s));
    }
    RNNT_TRY(cu_dec_init(d->s, nb, t_enc_dev, w->V, d->st, err, errlen));
    return enqueue_pred(d, nb, err, errlen);
}

static rnnt_status enqueue_joint(cu_decoder *d, int nb, const int *fstride_dev, const float *fproj, char *err,
                                 size_t errlen)
{
    const cu_weights *w = d->w;
    return cu_joint_argmax(d->s, w->dt, w->joint_act, nb, w->J, w->n_out, fproj, w->jp, 0, fstride_dev, d->gp,
                           w->jp, w->jout_w, w->jp, w->jout_b, d->st.t, d->st.done, d->st.k, d->st.p, err, errlen);
}

static rnnt_status enqueue_step(cu_decoder *d, int nb, const int *fstride_dev, const float *fproj, int use_cond,
                                cudaGraphConditionalHandle cond, char *err, size_t errlen)
{
    RNNT_TRY(enqueue_joint(d, nb, fstride_dev, fproj, err, errlen));
    RNNT_TRY(cu_dec_update(d->s, nb, d->rule, d->st, use_cond, cond, use_cond ? NULL : d->d_active, err, errlen));
    return enqueue_pred(d, nb, err, errlen);
}

/* The results of slots < nb into host memory: the pack kernel, plus one copy when not mapped. */
static rnnt_status enqueue_results(cu_decoder *d, int nb, char *err, size_t errlen)
{
    RNNT_TRY(cu_dec_pack(d->s, nb, d->st, d->d_out, err, errlen));
    if (!d->mapped)
        CU_TRY(cudaMemcpyAsync(d->h_out, d->d_out, (size_t)nb * CU_DEC_OUT_INTS(d->cap) * sizeof(int),
                               cudaMemcpyDeviceToHost, d->s));
    return RNNT_OK;
}

rnnt_status cu_decoder_create(const cu_weights *w, cudaStream_t stream, int max_batch, int t_enc_max, int mapped,
                              cu_decoder **out, char *err, size_t errlen)
{
    *out = NULL;
    cu_decoder *d = (cu_decoder *)calloc(1, sizeof *d);
    if (!d) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    d->w = w;
    d->s = stream;
    d->bcap = cu_round_up_i(max_batch, 8);
    d->t_enc_max = t_enc_max;
    d->mapped = mapped;
    d->cap = (t_enc_max > 0 ? t_enc_max : 1) * w->max_symbols;
    d->ph = (void **)calloc((size_t)w->n_pred, sizeof(void *));
    d->pc = (float **)calloc((size_t)w->n_pred, sizeof(float *));
    if (!d->ph || !d->pc) {
        cu_decoder_free(d);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    }
    d->rule.V = w->V;
    d->rule.blank = w->blank;
    d->rule.n_big = w->n_big;
    d->rule.max_symbols = w->max_symbols;
    d->rule.max_iters = (t_enc_max + 1) * (w->max_symbols + 1) + 8;
    for (int i = 0; i < w->n_big; i++) d->rule.durations[i] = w->durations[i];

    size_t B = (size_t)d->bcap, esz = cu_dtype_size(w->dt), off = 0;
    size_t o_int, o_tok, o_prob, o_gp, o_flags;
    size_t *o_h = (size_t *)calloc((size_t)w->n_pred * 2, sizeof(size_t));
    if (!o_h) {
        cu_decoder_free(d);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    }
#define TAKE(o, bytes)               \
    do {                             \
        off = cu_round_up(off, 256); \
        o = off;                     \
        off += (bytes);              \
    } while (0)
    TAKE(o_int, (11 * B + 8) * sizeof(int));
    TAKE(o_tok, 2 * B * (size_t)d->cap * sizeof(int));
    TAKE(o_prob, (B + B * (size_t)d->cap) * sizeof(float));
    TAKE(o_gp, B * w->jp * sizeof(float));
    TAKE(o_flags, CU_DEC_GRID_FLAG_INTS(B) * sizeof(int)); /* the grid loop's step flags [2][B] int2, its counters [2][B], slice barriers */
    for (int l = 0; l < w->n_pred; l++) {
        TAKE(o_h[2 * l], 2 * B * w->pred[l].hp * esz);
        TAKE(o_h[2 * l + 1], B * w->pred[l].hp * sizeof(float));
    }
#undef TAKE
    d->arena_bytes = cu_round_up(off, 256);
    size_t out_ints = B * CU_DEC_OUT_INTS(d->cap);
    cudaError_t ce = cudaMalloc(&d->arena, d->arena_bytes);
    if (ce == cudaSuccess) ce = cudaMemsetAsync(d->arena, 0, d->arena_bytes, stream); /* ordered: see cu_encoder_create */
    d->out_ints = out_ints;
    if (mapped) {
        if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&d->h_out, out_ints * sizeof(int), cudaHostAllocMapped);
        if (ce == cudaSuccess) ce = cudaHostGetDevicePointer((void **)&d->d_out, d->h_out, 0);
        if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&d->h_active, 64, cudaHostAllocMapped);
        if (ce == cudaSuccess) ce = cudaHostGetDevicePointer((void **)&d->d_active, d->h_active, 0);
    } else {
        if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&d->h_out, out_ints * sizeof(int), cudaHostAllocDefault);
        if (ce == cudaSuccess) ce = cudaMalloc((void **)&d->d_out, out_ints * sizeof(int));
        /* zeroed once: the copy back takes each slot's whole token area, of which the pack kernel writes only what was
         * emitted (compute-sanitizer initcheck reported every unwritten word the copy read) */
        if (ce == cudaSuccess) ce = cudaMemsetAsync(d->d_out, 0, out_ints * sizeof(int), stream);
        if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&d->h_active, 64, cudaHostAllocDefault);
    }
    for (int i = 0; i < 4 && ce == cudaSuccess; i++) ce = cudaEventCreate(&d->ev[i]);
    if (ce != cudaSuccess) {
        free(o_h);
        rnnt_status st = cu_set_err(err, errlen, cu_status_of(ce), "cuda: allocating decoder state: %s",
                                    cudaGetErrorString(ce));
        cu_decoder_free(d);
        return st;
    }
    char *a = (char *)d->arena;
    int *ip = (int *)(a + o_int);
    int **fields[] = {&d->st.t, &d->st.labels, &d->st.t_enc, &d->st.n_tok, &d->st.e, &d->st.status,
                      &d->st.steps, &d->st.skipped, &d->st.done, &d->st.k, &d->st.emit};
    for (int i = 0; i < 11; i++) *fields[i] = ip + (size_t)i * B;
    d->st.counts = ip + 11 * B;
    d->st.tokens = (int *)(a + o_tok);
    d->st.frames = d->st.tokens + B * (size_t)d->cap;
    d->st.cap = d->cap;
    d->st.p = (float *)(a + o_prob);
    d->st.probs = d->st.p + B;
    d->gp = (float *)(a + o_gp);
    d->flags = (int *)(a + o_flags);
    for (int l = 0; l < w->n_pred; l++) {
        d->ph[l] = a + o_h[2 * l];
        d->pc[l] = (float *)(a + o_h[2 * l + 1]);
    }
    free(o_h);
    d->forced = CU_DEC_WHILE;
    d->unroll = CU_DEC_UNROLL_DEFAULT;
    d->group = CU_DEC_GROUP_DEFAULT;
    d->cluster = 8;
    d->cluster_w = 8;
    d->grid_tile = CU_DEC_GRID_TILE_DEFAULT;
    d->grid_vst = CU_DEC_GRID_VST_DEFAULT;
    d->grid_cnt = -1;
    d->grid_occ = -1;
    d->grid_slices = -1;
    d->grid_pair = -1;
    *out = d;
    return RNNT_OK;
}

void cu_decoder_free(cu_decoder *d)
{
    if (!d) return;
    for (int i = 0; i < d->n_graphs; i++) cudaGraphExecDestroy(d->graphs[i].exec);
    for (int i = 0; i < 4; i++)
        if (d->ev[i]) cudaEventDestroy(d->ev[i]);
    if (d->arena) cudaFree(d->arena);
    if (d->h_out) cudaFreeHost(d->h_out);
    if (!d->mapped && d->d_out) cudaFree(d->d_out);
    if (d->h_active) cudaFreeHost(d->h_active);
    free(d->ph);
    free(d->pc);
    free(d);
}

/* Capture `what` into a new graph. */
#define CAPTURE_INTO(graph_out, what)                                               \
    do {                                                                            \
        CU_TRY(cudaStreamBeginCapture(d->s, cudaStreamCaptureModeThreadLocal));     \
        rnnt_status st_ = (what);                                                   \
        cudaError_t ce_ = cudaStreamEndCapture(d->s, &(graph_out));                 \
        if (st_ != RNNT_OK) {                                                       \
            if (graph_out) cudaGraphDestroy(graph_out);                             \
            graph_out = NULL;                                                       \
            return st_;                                                             \
        }                                                                           \
        CU_TRY(ce_);                                                                \
    } while (0)

static rnnt_status build_while(cu_decoder *d, int nb, const int *t_enc_dev, const int *fstride_dev,
                               const float *fproj, cudaGraph_t g, cudaGraphExec_t *out, char *err, size_t errlen)
{
    cudaGraph_t pro = NULL, epi = NULL, body_cap = NULL;
    CAPTURE_INTO(pro, enqueue_prologue(d, nb, t_enc_dev, err, errlen));
    cudaGraphNode_t n_pro, n_loop, n_epi;
    cudaError_t ce = cudaGraphAddChildGraphNode(&n_pro, g, NULL, 0, pro);
    cudaGraphDestroy(pro);
    CU_TRY(ce);
    cudaGraphConditionalHandle cond;
    CU_TRY(cudaGraphConditionalHandleCreate(&cond, g, 1, cudaGraphCondAssignDefault));
    /* cudaGraphNodeParams holds a union without a default constructor: aggregate-initialise the type,
     * the rest is zero. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
    cudaGraphNodeParams cp = {cudaGraphNodeTypeConditional};
#pragma GCC diagnostic pop
    cp.conditional.handle = cond;
    cp.conditional.type = cudaGraphCondTypeWhile;
    cp.conditional.size = 1;
    CU_TRY(cudaGraphAddNode(&n_loop, g, &n_pro, NULL, 1, &cp));
    cudaGraph_t body = cp.conditional.phGraph_out[0];
    CU_TRY(cudaStreamBeginCaptureToGraph(d->s, body, NULL, NULL, 0, cudaStreamCaptureModeThreadLocal));
    rnnt_status st = RNNT_OK;
    for (int u = 0; u < d->unroll && st == RNNT_OK; u++) st = enqueue_step(d, nb, fstride_dev, fproj, 1, cond, err, errlen);
    ce = cudaStreamEndCapture(d->s, &body_cap);
    if (st != RNNT_OK) return st;
    CU_TRY(ce);
    CAPTURE_INTO(epi, enqueue_results(d, nb, err, errlen));
    ce = cudaGraphAddChildGraphNode(&n_epi, g, &n_loop, 1, epi);
    cudaGraphDestroy(epi);
    CU_TRY(ce);
    CU_TRY(cudaGraphInstantiate(out, g, 0));
    return RNNT_OK;
}

static rnnt_status get_while(cu_decoder *d, int nb, const int *t_enc_dev, const int *fstride_dev,
                             const float *fproj, cudaGraphExec_t *out, char *err, size_t errlen)
{
    /* The graph bakes in the buffer pointers: the encoder's fixed buffers in the runner, so in
     * practice one graph per nb; the key includes them for callers that pass others. */
    for (int i = 0; i < d->n_graphs; i++)
        if (d->graphs[i].nb == nb && d->graphs[i].fproj == fproj && d->graphs[i].fstride == fstride_dev &&
            d->graphs[i].t_enc == t_enc_dev) {
            *out = d->graphs[i].exec;
            return RNNT_OK;
        }
    cudaGraph_t g;
    CU_TRY(cudaGraphCreate(&g, 0));
    rnnt_status st = build_while(d, nb, t_enc_dev, fstride_dev, fproj, g, out, err, errlen);
    cudaGraphDestroy(g);
    if (st != RNNT_OK) return st;
    int slot = d->n_graphs;
    if (slot == (int)(sizeof d->graphs / sizeof d->graphs[0])) {
        /* small fixed cache: replace the oldest */
        cudaGraphExecDestroy(d->graphs[0].exec);
        memmove(&d->graphs[0], &d->graphs[1], sizeof(dgraph) * (size_t)(d->n_graphs - 1));
        slot = d->n_graphs - 1;
    } else {
        d->n_graphs++;
    }
    d->graphs[slot].nb = nb;
    d->graphs[slot].fproj = fproj;
    d->graphs[slot].fstride = fstride_dev;
    d->graphs[slot].t_enc = t_enc_dev;
    d->graphs[slot].exec = *out;
    return RNNT_OK;
}

static rnnt_status run_host(cu_decoder *d, int nb, const int *t_enc_dev, const int *fstride_dev,
                            const float *fproj, int profile, cu_dec_profile *prof, char *err, size_t errlen)
{
    const int poll = profile ? 1 : 8;
    cu_dec_profile local;
    memset(&local, 0, sizeof local);
    if (!prof) prof = &local;
    float ms;
    if (profile) CU_TRY(cudaEventRecord(d->ev[0], d->s));
    RNNT_TRY(enqueue_prologue(d, nb, t_enc_dev, err, errlen));
    if (profile) {
        CU_TRY(cudaEventRecord(d->ev[1], d->s));
        CU_TRY(cudaEventSynchronize(d->ev[1]));
        CU_TRY(cudaEventElapsedTime(&ms, d->ev[0], d->ev[1]));
        prof->pred_ms += ms;
    }
    int iters = 0;
    for (;;) {
        for (int i = 0; i < poll; i++) {
            if (profile) {
                CU_TRY(cudaEventRecord(d->ev[0], d->s));
                RNNT_TRY(enqueue_joint(d, nb, fstride_dev, fproj, err, errlen));
                CU_TRY(cudaEventRecord(d->ev[1], d->s));
                RNNT_TRY(cu_dec_update(d->s, nb, d->rule, d->st, 0, 0, d->d_active, err, errlen));
                CU_TRY(cudaEventRecord(d->ev[2], d->s));
                RNNT_TRY(enqueue_pred(d, nb, err, errlen));
                CU_TRY(cudaEventRecord(d->ev[3], d->s));
            } else {
                RNNT_TRY(enqueue_step(d, nb, fstride_dev, fproj, 0, 0, err, errlen));
            }
            iters++;
        }
        if (!d->mapped)
            CU_TRY(cudaMemcpyAsync(d->h_active, d->st.counts + 1, sizeof(int), cudaMemcpyDeviceToHost, d->s));
        CU_TRY(cudaStreamSynchronize(d->s));
        if (profile) {
            CU_TRY(cudaEventElapsedTime(&ms, d->ev[0], d->ev[1]));
            prof->joint_ms += ms;
            CU_TRY(cudaEventElapsedTime(&ms, d->ev[1], d->ev[2]));
            prof->update_ms += ms;
            CU_TRY(cudaEventElapsedTime(&ms, d->ev[2], d->ev[3]));
            prof->pred_ms += ms;
        }
        if (*(volatile int *)d->h_active == 0) break;
        if (iters > d->rule.max_iters + poll)
            return cu_set_err(err, errlen, RNNT_ERR_DEVICE, "cuda: decoding did not end after %d steps", iters);
    }
    prof->iterations = iters;
    RNNT_TRY(enqueue_results(d, nb, err, errlen));
    CU_TRY(cudaStreamSynchronize(d->s));
    return RNNT_OK;
}

static void fused_net(const cu_decoder *d, const int *fstride_dev, const float *fproj, cu_dec_fused_net *net)
{
    const cu_weights *w = d->w;
    memset(net, 0, sizeof *net);
    net->n_pred = w->n_pred;
    for (int l = 0; l < w->n_pred && l < CU_DEC_FUSED_MAX_PRED; l++) {
        const cu_lstm_w *L = &w->pred[l];
        cu_dec_fused_layer *F = &net->L[l];
        F->w_ih = L->w_ih;
        F->w_hh = L->w_hh;
        F->bias = L->bias;
        F->I = l == 0 ? w->E : w->pred[l - 1].hidden;
        F->ld_ih = L->in_w;
        F->H = L->hidden;
        F->ld_hh = L->hp;
        F->h = d->ph[l];
        F->hpar = (size_t)d->bcap * L->hp;
        F->ldh = L->hp;
        F->c = d->pc[l];
        F->ldc = L->hp;
    }
    net->emb = w->emb;
    net->ld_emb = w->ep;
    net->wp = w->jpred_w;
    net->ldwp = w->hpp;
    net->jb = w->jbias;
    net->J = w->J;
    net->gp = d->gp;
    net->ldg = w->jp;
    net->wout = w->jout_w;
    net->ldw = w->jp;
    net->bout = w->jout_b;
    net->n_out = w->n_out;
    net->fproj = fproj;
    net->ldf = w->jp;
    net->fstride_dev = fstride_dev;
}

void cu_decoder_set_group(cu_decoder *d, int group) { d->group = group; }
void cu_decoder_set_grid(cu_decoder *d, int blocks_per_sm, int tile)
{
    d->grid_per_sm = blocks_per_sm < 0 ? 0 : blocks_per_sm;
    d->grid_tile = tile < 0 ? 0 : tile > 3 ? 3 : tile;
}
void cu_decoder_set_grid_staging(cu_decoder *d, int vst, int cnt, int occ)
{
    d->grid_vst = vst != 0;
    d->grid_cnt = cnt < 0 ? -1 : cnt != 0;
    d->grid_occ = occ == 1 || occ == 2 ? occ : -1;
}
void cu_decoder_set_grid_slices(cu_decoder *d, int slices) { d->grid_slices = slices < 0 ? -1 : slices; }
void cu_decoder_set_grid_pair(cu_decoder *d, int pair) { d->grid_pair = pair < 0 ? -1 : pair != 0; }
void cu_decoder_set_cluster(cu_decoder *d, int cluster, int warps, int slots)
{
    d->cluster = cluster >= 16 ? 16 : 8;
    d->cluster_w = warps >= 16 ? 16 : 8;
    d->cluster_g = slots < 0 ? 0 : slots;
}

rnnt_status cu_decoder_run(cu_decoder *d, cu_dec_mode mode, int nb, int n_live, const int *t_enc_dev,
                           const int *fstride_dev, const float *fproj, cu_dec_profile *prof, char *err,
                           size_t errlen)
{
    if (nb < 1 || nb > d->bcap)
        return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: %d decoder slots, runner holds %d", nb, d->bcap);
    /* the rule counts the utterances, not the slots (nb is rounded up to 8; the others end at once); fp32 too:
     * the cluster loop's label probabilities are summed in the per-step kernels' warp groups, so its results
     * are bitwise the graph's in any batch (main's e3a4019 had kept fp32 on the graph before that fix) */
    int auto_cluster = mode == CU_DEC_AUTO && n_live <= CU_DEC_AUTO_CLUSTER_MAX;
    int auto_grid = mode == CU_DEC_AUTO && !auto_cluster; /* the grid loop where its f4 layout fits */
    if (mode == CU_DEC_AUTO) mode = auto_cluster ? CU_DEC_CLUSTER : CU_DEC_GRID;
    if (mode == CU_DEC_CLUSTER) {
        cu_dec_fused_net net;
        fused_net(d, fstride_dev, fproj, &net);
        cu_dec_cluster_plan pl;
        const char *why = NULL;
        if (cu_dec_cluster_plan_make(&net, d->w->dt, d->w->V, nb,
                                     auto_cluster ? (n_live <= CU_DEC_AUTO_CLUSTER16_MAX ? 16 : 8) : d->cluster,
                                     auto_cluster ? 16 : d->cluster_w, auto_cluster ? 1 : d->cluster_g, &pl, &why)) {
            RNNT_TRY(enqueue_prologue(d, nb, t_enc_dev, err, errlen));
            const char *cv = getenv("RNNT_CUDA_DEC_CLUSTER_CHAIN"); /* lab: the one-load-at-a-time dots */
            const char *fv = getenv("RNNT_CUDA_DEC_CLUSTER_FCACHE"); /* lab: 1 = f rows cached */
            pl.chain = cv && *cv == '1';
            if (!(fv && *fv == '1')) pl.fcache = 0; /* no gain measured: off unless asked for */
            const char *tv = getenv("RNNT_CUDA_DEC_TRACE"); /* lab: phase clocks of the first cluster */
            long long *tdev = NULL;
            if (tv && *tv == '1') {
                CU_TRY(cudaMalloc((void **)&tdev, 32 * sizeof(long long)));
                CU_TRY(cudaMemsetAsync(tdev, 0, 32 * sizeof(long long), d->s));
                pl.trace = tdev;
            }
            RNNT_TRY(cu_dec_cluster(d->s, d->w->dt, d->w->act, d->w->joint_act, nb, &pl, d->rule, d->st, &net, err,
                                    errlen));
            if (tdev) {
                long long h[32];
                CU_TRY(cudaMemcpyAsync(h, tdev, sizeof h, cudaMemcpyDeviceToHost, d->s));
                CU_TRY(cudaStreamSynchronize(d->s));
                cudaFree(tdev);
                static const char *ph[10] = {"joint", "rule", "-", "push", "bcast-wait", "layer", "layer-wait",
                                             "proj", "proj-wait", "init"};
                for (int r = 0; r < 2; r++) {
                    fprintf(stderr, "dec_cluster nb %d C %d G %d smem %zu block %d: joint steps %lld, pred steps %lld;", nb,
                            pl.C, pl.G, pl.smem, r, h[r * 16 + 10], h[r * 16 + 11]);
                    for (int k = 0; k < 10; k++)
                        if (k != 2) fprintf(stderr, " %s %.1f", ph[k], h[r * 16 + k] / 1000.0);
                    fprintf(stderr, " (kcycles)\n");
                }
            }
            return enqueue_results(d, nb, err, errlen);
        }
        d->note = why; /* a static string: why the cluster loop cannot run; the WHILE graph instead */
        mode = CU_DEC_WHILE;
    }
    if (mode == CU_DEC_GRID) {
        cu_dec_fused_net net;
        fused_net(d, fstride_dev, fproj, &net);
        cu_dec_grid_plan pl;
        const char *why = NULL;
        const int tile = auto_grid ? 3 : d->grid_tile;
        /* slices by default (they change the counters' and occupancy's rules), or as set */
        const int sl_want = d->grid_slices >= 0 ? d->grid_slices
                            : CU_DEC_GRID_SLICES_AUTO_MIN > 0 && n_live >= CU_DEC_GRID_SLICES_AUTO_MIN ? CU_DEC_GRID_MAX_SLICES
                                                                                                   : 0;
        const int occ2 = d->grid_occ >= 0 ? d->grid_occ == 2
                         : n_live > (sl_want > 0 ? CU_DEC_GRID_SL_OCC1_AUTO_MAX : CU_DEC_GRID_OCC1_AUTO_MAX);
        if (cu_dec_grid_plan_make(&net, d->w->dt, d->w->act, d->w->joint_act, nb, auto_grid ? 0 : d->grid_per_sm,
                                  tile >= 2 ? tile - 1 : 0, occ2, &pl, &why) &&
            (!auto_grid || pl.f4) && (tile == 0 || cu_dec_grid_tiles_fit(&net, &pl))) {
            pl.tile = tile != 0;
            pl.vst = pl.f4 && d->grid_vst;
            pl.cnt = pl.vst && (d->grid_cnt >= 0 ? d->grid_cnt
                                : n_live <= (sl_want > 0 ? CU_DEC_GRID_SL_CNT_AUTO_MAX : CU_DEC_GRID_CNT_AUTO_MAX));
            pl.slices = cu_dec_grid_slices_fit(&net, &pl, nb, sl_want); /* 0: one loop, grid barriers */
            pl.pair = pl.f4 && (d->grid_pair >= 0 ? d->grid_pair : CU_DEC_GRID_PAIR_DEFAULT && !pl.occ2);
            RNNT_TRY(enqueue_prologue(d, nb, t_enc_dev, err, errlen));
            const char *tv = getenv("RNNT_CUDA_DEC_TRACE"); /* lab: phase clocks of block 0 */
            long long *tdev = NULL;
            if (tv && *tv == '1') {
                CU_TRY(cudaMalloc((void **)&tdev, 16 * sizeof(long long)));
                CU_TRY(cudaMemsetAsync(tdev, 0, 16 * sizeof(long long), d->s));
                pl.trace = tdev;
            }
            RNNT_TRY(cu_dec_grid(d->s, d->w->dt, d->w->act, d->w->joint_act, nb, &pl, d->rule, d->st, &net, d->flags,
                                 err, errlen));
            if (tdev) {
                long long h[16];
                CU_TRY(cudaMemcpyAsync(h, tdev, sizeof h, cudaMemcpyDeviceToHost, d->s));
                CU_TRY(cudaStreamSynchronize(d->s));
                cudaFree(tdev);
                fprintf(stderr, "dec_grid nb %d blocks %d slices %d pair %d tile %d wsm %d f4 %d vst %d cnt %d occ2 %d smem %zu: steps %lld, pred steps %lld; joint+rule %.1f "
                                "sync %.1f list %.1f layers %.1f (staging %.1f) layer-sync %.1f proj %.1f (staging %.1f) proj-sync %.1f (kcycles)\n",
                        nb, pl.blocks, pl.slices, pl.pair, pl.tile, pl.wsm, pl.f4, pl.vst, pl.cnt, pl.occ2, pl.smem, h[7], h[8], h[0] / 1e3, h[1] / 1e3, h[2] / 1e3, h[3] / 1e3,
                        h[9] / 1e3, h[4] / 1e3, h[5] / 1e3, h[10] / 1e3, h[6] / 1e3);
            }
            return enqueue_results(d, nb, err, errlen);
        }
        d->note = why                                           ? why /* static strings; the WHILE graph instead */
                  : tile && !cu_dec_grid_tiles_fit(&net, &pl) ? "more unit groups than the grid loop's blocks"
                                                              : "the grid loop's f4 layout does not fit in shared memory";
        mode = CU_DEC_WHILE;
    }
    if (mode == CU_DEC_FUSED) {
        cu_dec_fused_net net;
        fused_net(d, fstride_dev, fproj, &net);
        int g = cu_dec_fused_group(&net, d->group);
        if (g > 0) {
            RNNT_TRY(enqueue_prologue(d, nb, t_enc_dev, err, errlen));
            RNNT_TRY(cu_dec_fused(d->s, d->w->dt, d->w->act, d->w->joint_act, nb, g, d->rule, d->st, &net, err, errlen));
            return enqueue_results(d, nb, err, errlen);
        }
        d->note = "fused decoding does not fit this model; WHILE graph";
        mode = CU_DEC_WHILE;
    }
    if (mode == CU_DEC_WHILE && d->forced == CU_DEC_HOST) mode = CU_DEC_HOST;
    if (mode == CU_DEC_WHILE) {
        cudaGraphExec_t x;
        rnnt_status st = get_while(d, nb, t_enc_dev, fstride_dev, fproj, &x, err, errlen);
        if (st == RNNT_OK) {
            CU_TRY(cudaGraphLaunch(x, d->s));
            return RNNT_OK;
        }
        if (st == RNNT_ERR_NOMEM) return st;
        cudaGetLastError();
        d->forced = CU_DEC_HOST;
        d->note = "conditional WHILE graph unavailable; host-polled loop";
        mode = CU_DEC_HOST;
    }
    *(volatile int *)d->h_active = 1;
    return run_host(d, nb, t_enc_dev, fstride_dev, fproj, mode == CU_DEC_PROFILE, prof, err, errlen);
}

void cu_decoder_set_unroll(cu_decoder *d, int unroll)
{
    d->unroll = unroll < 1 ? 1 : unroll > CU_DEC_MAX_UNROLL ? CU_DEC_MAX_UNROLL : unroll;
    for (int i = 0; i < d->n_graphs; i++) cudaGraphExecDestroy(d->graphs[i].exec);
    d->n_graphs = 0;
}

int cu_decoder_unroll(const cu_decoder *d) { return d->unroll; }

cu_dec_mode cu_decoder_mode(const cu_decoder *d, const char **note)
{
    if (note) *note = d->note;
    return d->forced;
}

cu_dec_result cu_decoder_result(const cu_decoder *d, int b)
{
    const int *o = d->h_out + (size_t)b * CU_DEC_OUT_INTS(d->cap);
    cu_dec_result r;
    r.n_tok = o[0];
    r.steps = o[1];
    r.skipped = o[2];
    r.status = o[3];
    r.t_final = o[4];
    int n = r.n_tok < d->cap ? r.n_tok : d->cap;
    r.tokens = o + 8;
    r.frames = o + 8 + n;
    r.probs = (const float *)(o + 8 + 2 * n);
    return r;
}

size_t cu_decoder_device_bytes(const cu_decoder *d) { return d->arena_bytes; }
