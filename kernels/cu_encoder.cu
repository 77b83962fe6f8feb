/* cu_encoder.cu — encoder buffers, buckets, graph capture and replay (see cu_encoder.h). */
#include "cu_encoder.h"

#include <stdlib.h>
#include <string.h>

#include "cu_gemm.h"
#include "cu_kernels.h"
#include "cu_layer_norm.h"
#include "cu_mma_step.h"
#include "cu_persist.h"
#include "cu_stage.h"
#include "cu_wave.h"

namespace {

struct graph_entry {
    int nb, tb;
    cudaGraphExec_t exec;
    unsigned long long stamp;
};

} // namespace

struct cu_encoder {
    const cu_weights *w;
    cudaStream_t s;
    cublasHandle_t blas;
    int max_batch, max_frames, bcap, tcap, quantum, r_in, r_rec;
    int *tmax;            /* [n_enc + 1] steps of each layer at tcap; tmax[n_enc] = encoder frames */
    char *persist;        /* [n_enc] layer runs its recurrence as a persistent kernel */
    int n_persist;
    char *wave;           /* [n_enc] layer l runs with layer l + 1 as one layer wavefront (cu_wave.h) */
    int n_wave;
    void *wbuf;           /* the wavefront's scratch (zeroed at create) */
    size_t wbuf_bytes;
    int chip;             /* every layer in one wavefront with W_hh on chip (cu_lstm_wave_chip), rows < max_batch */
    void *ychip;          /* its outputs of layers 0 .. n_enc - 3 (layers n_enc - 2, n_enc - 1 write e->y) */
    size_t ychip_el;      /* elements per layer there */
    void *hbuf;           /* persistent kernels' scratch (h buffers, control words; zeroed at create) */
    size_t hbuf_bytes;
    int fused_bt;         /* rows of the fused step kernel, 0 = cuBLAS + cell kernel */
    int mma_step;         /* per-step layers run cu_lstm_mma_step (GEMM + cell in one kernel) */
    void *hs2;            /* the fused and mma steps' second h buffer */
    /* layer streams (cu_encoder_params.lstreams): per layer l a recurrence stream ls[2l] and a projection
     * stream ls[2l + 1], each with its own cuBLAS handle and workspace (concurrent GEMMs must not share one;
     * the size is the backend's, so cuBLAS picks the same kernels as on the runner's handle); per layer its
     * own h, gates and c, a ring of lring chunk buffers for its input projection (l >= 1) and for its output
     * (l < n_enc - 1; the last layer writes e->y as the per-step path does) */
    int lchunk, lring, lev_n, lsms; /* steps per chunk of the last layer (0: off), ring slots, events per kind */
    int lrows_rin;        /* 1: a chunk's projection in calls of r_in rows (the per-step path's shape: its bits);
                             0: one call of bcap x (the layer's chunk) rows (no padding rows at the runner's size) */
    cudaStream_t *ls;
    cublasHandle_t *lblas;
    void *lbuf;           /* the buffers above and the workspaces, one allocation (zeroed at create) */
    size_t lbuf_bytes;
    cudaEvent_t *lev;     /* [n_enc][2][lev_n] (done, projected), then fork, then [2 n_enc] joins */
    void **lhs, **lxr, **lyr; /* [n_enc] */
    float **lhproj, **lc;     /* [n_enc] */
    size_t *lxr_slot, *lyr_slot; /* [n_enc] elements per ring slot */
    /* device */
    void *arena;
    size_t arena_bytes;
    int *meta;            /* [0] t_enc of the bucket, then off, frames, lens[n_enc + 1] (bcap each) */
    float *raw;
    void *x0, *y[2], *xproj, *hs;
    void *mbuf;           /* o * phi(c) of a projection LSTM's step, before W_hr ([rec rows][hpmax]) */
    float *hproj, *c, *fproj;
    /* pinned staging: meta then raw (the same layout as meta and raw on the device), filled by the
     * stager and sent on the copy stream cs; ev_in: the point on s after which the device input may be
     * overwritten; ev_up: the transfers are done (and the pinned buffer free again) */
    int *h_meta;
    float *h_raw;
    size_t meta_ints, raw_used;
    cu_stager *stager;
    cudaStream_t cs;
    cudaEvent_t ev_in, ev_up;
    int up_recorded;
    /* ev_raw: the point on s after the last encoder run (with raw_early: after its frontend kernel), which has
     * read the device input (raw); the next batch's raw transfers wait only for it, so with a batch staged while
     * another runs (rnnt_runner_submit) they overlap the running batch's decoding (raw_early: its layers too; at
     * B 2048 of the MLPerf-shaped model the 655 MB upload takes longer than the decoding alone); meta, which the
     * decoder reads, still waits for everything enqueued on s */
    cudaEvent_t ev_raw;
    int raw_recorded;
    int raw_early;        /* 1 (cu_encoder_params.raw_early, RNNT_CUDA_RAW_EARLY): the frontend kernel, the one reader of
                             raw, launched before the layers' graph and ev_raw recorded right after it, so the next
                             batch's transfers overlap this batch's layers; 0: the frontend in the graph, ev_raw after
                             the encoder */
    int raw_done;         /* this compute recorded ev_raw after its frontend */
    const float **seg_src; /* [max_batch] */
    size_t *seg_bytes;     /* [max_batch] */
    /* batch */
    cu_encoder_batch batch;
    int *h_tenc;          /* [max_batch] */
    /* graphs */
    int graphs;
    const char *graph_note;
    graph_entry *cache;
    int cache_cap, cache_n;
    unsigned long long clock;
};

static int *meta_off(cu_encoder *e, int *m) { return m + 1; }
static int *meta_frames(cu_encoder *e, int *m) { return m + 1 + e->bcap; }
static int *meta_lens(cu_encoder *e, int *m, int l) { return m + 1 + (size_t)(2 + l) * e->bcap; }

int cu_encoder_frames(const cu_weights *w, int frames)
{
    if (frames <= 0) return 0;
    int t = (frames + w->k - 1) / w->k;
    for (int l = 0; l < w->n_enc; l++) t = (t + w->enc[l].time_stack - 1) / w->enc[l].time_stack;
    return t;
}

/* Steps per chunk of layer l under layer streams: the last layer's lchunk times the time stacks after l,
 * so chunk k of every layer feeds chunk k of the next. */
static int lstream_chunk_of(const cu_encoder *e, int l)
{
    int c = e->lchunk;
    for (int j = l; j + 1 < e->w->n_enc; j++) c *= e->w->enc[j].time_stack;
    return c;
}
/* Rows per projection call of layer l's chunks: fixed per runner (so a row's bits never depend on the batch). */
static int lstream_rows_of(const cu_encoder *e, int l)
{
    return e->lrows_rin ? e->r_in : e->bcap * lstream_chunk_of(e, l);
}

static const size_t kLstreamWorkspace = 32u << 20; /* the backend's cuBLAS workspace (backend_cuda.cu) */
enum { kLstreamMaxLayers = 64 };

static void lstreams_free(cu_encoder *e)
{
    int n2 = 2 * e->w->n_enc;
    if (e->ls) {
        for (int i = 0; i < n2; i++)
            if (e->ls[i]) cudaStreamSynchronize(e->ls[i]);
        for (int i = 0; i < n2; i++) {
            if (e->lblas && e->lblas[i]) cublasDestroy(e->lblas[i]);
            if (e->ls[i]) cudaStreamDestroy(e->ls[i]);
        }
    }
    if (e->lev) {
        int ne = e->w->n_enc * 2 * e->lev_n + 1 + n2;
        for (int i = 0; i < ne; i++)
            if (e->lev[i]) cudaEventDestroy(e->lev[i]);
    }
    if (e->lbuf) cudaFree(e->lbuf);
    free(e->ls);
    free(e->lblas);
    free(e->lev);
    free(e->lhs);
    free(e->lxr);
    free(e->lyr);
    free(e->lhproj);
    free(e->lc);
    free(e->lxr_slot);
    free(e->lyr_slot);
    e->ls = NULL;
    e->lblas = NULL;
    e->lev = NULL;
    e->lbuf = NULL;
}

static rnnt_status lstreams_create(cu_encoder *e, size_t rec_rows, char *err, size_t errlen)
{
    const cu_weights *w = e->w;
    int n = w->n_enc, n2 = 2 * n, ne = n * 2 * e->lev_n + 1 + n2;
    size_t B = (size_t)e->bcap, esz = cu_dtype_size(w->dt), R = (size_t)e->lring;
    e->ls = (cudaStream_t *)calloc((size_t)n2, sizeof(cudaStream_t));
    e->lblas = (cublasHandle_t *)calloc((size_t)n2, sizeof(cublasHandle_t));
    e->lev = (cudaEvent_t *)calloc((size_t)ne, sizeof(cudaEvent_t));
    e->lhs = (void **)calloc((size_t)n, sizeof(void *));
    e->lxr = (void **)calloc((size_t)n, sizeof(void *));
    e->lyr = (void **)calloc((size_t)n, sizeof(void *));
    e->lhproj = (float **)calloc((size_t)n, sizeof(float *));
    e->lc = (float **)calloc((size_t)n, sizeof(float *));
    e->lxr_slot = (size_t *)calloc((size_t)n, sizeof(size_t));
    e->lyr_slot = (size_t *)calloc((size_t)n, sizeof(size_t));
    if (!e->ls || !e->lblas || !e->lev || !e->lhs || !e->lxr || !e->lyr || !e->lhproj || !e->lc || !e->lxr_slot ||
        !e->lyr_slot)
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    size_t off = 0;
    size_t *o = (size_t *)calloc((size_t)n * 5, sizeof(size_t));
    if (!o) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    for (int l = 0; l < n; l++) {
        const cu_lstm_w *L = &w->enc[l];
        size_t cl = (size_t)lstream_chunk_of(e, l);
        e->lxr_slot[l] = l > 0 ? cu_round_up(B * cl, (size_t)lstream_rows_of(e, l)) * L->g4 : 0;
        e->lyr_slot[l] = l + 1 < n ? cu_round_up(B * (size_t)lstream_chunk_of(e, l + 1), (size_t)lstream_rows_of(e, l + 1)) *
                                         w->enc[l + 1].in_w
                                   : 0;
        size_t bytes[5] = {rec_rows * L->hp * esz, rec_rows * L->g4 * 4, B * L->hp * 4, R * e->lxr_slot[l] * esz,
                           R * e->lyr_slot[l] * esz};
        for (int i = 0; i < 5; i++) {
            off = cu_round_up(off, 256);
            o[l * 5 + i] = off;
            off += bytes[i];
        }
    }
    off = cu_round_up(off, 256);
    size_t o_ws = off;
    off += (size_t)n2 * kLstreamWorkspace;
    e->lbuf_bytes = off;
    cudaError_t ce = cudaMalloc(&e->lbuf, off);
    if (ce == cudaSuccess) ce = cudaMemsetAsync(e->lbuf, 0, off, e->s);
    if (ce != cudaSuccess) {
        free(o);
        e->lbuf = NULL;
        return cu_set_err(err, errlen, cu_status_of(ce), "cuda: allocating %.1f MiB of layer-stream buffers: %s",
                          off / 1048576.0, cudaGetErrorString(ce));
    }
    char *a = (char *)e->lbuf;
    for (int l = 0; l < n; l++) {
        e->lhs[l] = a + o[l * 5];
        e->lhproj[l] = (float *)(a + o[l * 5 + 1]);
        e->lc[l] = (float *)(a + o[l * 5 + 2]);
        e->lxr[l] = a + o[l * 5 + 3];
        e->lyr[l] = a + o[l * 5 + 4];
    }
    free(o);
    /* the recurrences are the critical path; the projections fill the gaps (graph nodes keep the priority) */
    int prio_lo = 0, prio_hi = 0;
    CU_TRY(cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi));
    for (int i = 0; i < n2; i++) {
        CU_TRY(cudaStreamCreateWithPriority(&e->ls[i], cudaStreamNonBlocking, i % 2 ? prio_lo : prio_hi));
        RNNT_TRY(cu_blas_create(e->ls[i], a + o_ws + (size_t)i * kLstreamWorkspace, kLstreamWorkspace, &e->lblas[i], err,
                                errlen));
        /* The recurrent GEMMs chosen for n SMs (cublasSetSmCountTarget), so that those of concurrent layers can
         * share the GPU: another kernel than the per-step path's, so other bits, but one shape and one kernel per
         * runner. RNNT_CUDA_LSTREAM_SMS=n (0: cuBLAS's own choice); default 66 up to 64 slots, 33 above (the best
         * of the sweep in run 2), 66 again from CU_LARGE_RUNNER_MIN_B (512-row calls: the best of session 5's sweep
         * at 2048); none in the rin mode. */
        const char *ce_sms = getenv("RNNT_CUDA_LSTREAM_SMS");
        int sms = ce_sms ? atoi(ce_sms) : e->lrows_rin ? 0 : e->bcap <= 64 || e->max_batch >= CU_LARGE_RUNNER_MIN_B ? 66 : 33;
        if (i % 2 == 0 && sms > 0) {
            cublasStatus_t bs = cublasSetSmCountTarget(e->lblas[i], sms);
            if (bs != CUBLAS_STATUS_SUCCESS)
                return cu_set_err(err, errlen, cu_status_of_blas(bs), "cublas: SM count target: %s", cu_blas_str(bs));
            e->lsms = sms;
        }
    }
    for (int i = 0; i < ne; i++) CU_TRY(cudaEventCreateWithFlags(&e->lev[i], cudaEventDisableTiming));
    return RNNT_OK;
}

rnnt_status cu_encoder_create(const cu_weights *w, cudaStream_t stream, cublasHandle_t blas,
                              const cu_encoder_params *p, cu_encoder **out, char *err, size_t errlen)
{
    *out = NULL;
    if (p->max_batch < 1 || p->max_frames < 1)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: max_batch and max_frames must be >= 1");
    if (w->enc[w->n_enc - 1].time_stack != 1)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED,
                          "cuda: a time_stack on the last encoder layer is not supported");
    cu_encoder *e = (cu_encoder *)calloc(1, sizeof *e);
    if (!e) return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    e->w = w;
    e->s = stream;
    e->blas = blas;
    e->max_batch = p->max_batch;
    e->max_frames = p->max_frames;
    e->bcap = cu_round_up_i(p->max_batch, 8);
    int G = w->subsampling;
    int q = p->t_quantum > 0 ? p->t_quantum : 32;
    e->quantum = cu_div_up(q, G) * G;
    e->tcap = cu_round_up_i(p->max_frames, e->quantum);
    /* larger chunks for large runners: fewer, fuller GEMMs; small runners waste less on padding */
    e->r_in = p->r_in > 0 ? p->r_in : (p->max_batch >= 64 ? 4096 : 1024);
    /* fp16 runners of CU_LARGE_RUNNER_MIN_B and more: 512 rows (fewer, fuller recurrent GEMMs: the MLPerf-shaped
     * encoder at B 2048 125 -> 115 ms with the SM target below, kernels/dev/NOTES.md, "The whole engine at large
     * batch"); 1024 from CU_XLARGE_RUNNER_MIN_B (the decoder overlapping the next encoder, steady state: B 1024 60.5 ->
     * 57.4 ms a batch, B 2048 124.0 -> 116.0; 2048 rows 112.7 at B 2048 but 71.7 at B 1024, session 2026-11-25-s1);
     * fp32 keeps 256 (one path at every size) */
    e->r_rec = p->r_rec > 0 ? p->r_rec
                            : w->dt == CU_F16 && p->max_batch >= CU_XLARGE_RUNNER_MIN_B ? 1024
                            : w->dt == CU_F16 && p->max_batch >= CU_LARGE_RUNNER_MIN_B ? 512
                                                                                         : (cu_round_up_i(p->max_batch, 16) < 256 ? cu_round_up_i(p->max_batch, 16) : 256);
    e->graphs = p->graphs;
    e->cache_cap = p->graph_cache > 0 ? p->graph_cache : 16;
    e->tmax = (int *)calloc((size_t)w->n_enc + 1, sizeof(int));
    e->cache = (graph_entry *)calloc((size_t)e->cache_cap, sizeof(graph_entry));
    e->h_tenc = (int *)calloc((size_t)p->max_batch, sizeof(int));
    e->persist = (char *)calloc((size_t)w->n_enc, 1);
    e->wave = (char *)calloc((size_t)w->n_enc, 1);
    e->seg_src = (const float **)calloc((size_t)p->max_batch, sizeof(float *));
    e->seg_bytes = (size_t *)calloc((size_t)p->max_batch, sizeof(size_t));
    if (!e->tmax || !e->cache || !e->h_tenc || !e->persist || !e->wave || !e->seg_src || !e->seg_bytes) {
        cu_encoder_free(e);
        return cu_set_err(err, errlen, RNNT_ERR_NOMEM, "cuda: out of host memory");
    }
    int T = e->tcap / w->k;
    for (int l = 0; l < w->n_enc; l++) {
        e->tmax[l] = T;
        T /= w->enc[l].time_stack;
    }
    e->tmax[w->n_enc] = T;

    /* Sizes in elements. Every operand of a chunked GEMM has room for its rows rounded up to r_in. */
    size_t B = (size_t)e->bcap, rin = (size_t)e->r_in, esz = cu_dtype_size(w->dt);
    size_t x0_el = cu_round_up(B * e->tmax[0], rin) * (size_t)w->enc[0].in_w;
    size_t y_el = 0, xp_el = 0;
    int g4max = 0, hpmax = 0, any_proj = 0;
    for (int l = 0; l < w->n_enc; l++) {
        const cu_lstm_w *L = &w->enc[l];
        size_t as_out = cu_round_up(B * e->tmax[l], rin) * (size_t)L->ow;
        size_t as_in = cu_round_up(B * e->tmax[l + 1], rin) * (size_t)L->time_stack * L->ow;
        any_proj |= L->proj > 0;
        if (as_out > y_el) y_el = as_out;
        if (as_in > y_el) y_el = as_in;
        size_t xp = cu_round_up(B * e->tmax[l], rin) * (size_t)L->g4;
        if (xp > xp_el) xp_el = xp;
        if (L->g4 > g4max) g4max = L->g4;
        if (L->hp > hpmax) hpmax = L->hp;
    }
    size_t rec_rows = cu_round_up(B, (size_t)e->r_rec);
    if (p->fused) e->fused_bt = cu_step_fused_rows(e->bcap);
    /* The recurrence path is fixed per runner by max_batch (so an utterance's arithmetic never depends on
     * its batch): the persistent kernel for fp16 runners of up to CU_PERSIST_AUTO_MAX_B utterances, where
     * it measured faster than the per-step graph path on the H100 (kernels/dev/NOTES.md), unless
     * p->persist says otherwise (1 on wherever it fits, -1 off); the fused step kernel, asked for, wins. */
    int want_persist = p->persist > 0 || (p->persist == 0 && !p->fused && e->bcap <= CU_PERSIST_AUTO_MAX_B);
    if (want_persist && w->dt == CU_F16 && e->bcap <= CU_PERSIST_MAX_B)
        for (int l = 0; l < w->n_enc; l++) {
            /* projection LSTMs and LayerNorm (cu_layer_norm.h) take the per-step path */
            e->persist[l] = (char)(!w->enc[l].proj && !w->enc[l].ln_w && cu_persist_fits(w->enc[l].hidden, e->bcap, NULL));
            e->n_persist += e->persist[l];
        }
    /* The per-step layers' recurrent steps as one tensor-core kernel each (fp16; p->mma_step, else
     * RNNT_CUDA_MMA_STEP=1; off by default: kernels/dev/NOTES.md, "GEMM + cell in one kernel"). */
    int want_mma = p->mma_step;
    if (want_mma == 0) {
        const char *env = getenv("RNNT_CUDA_MMA_STEP");
        want_mma = env ? atoi(env) : 0;
    }
    e->mma_step = want_mma > 0 && w->dt == CU_F16 && !e->fused_bt && e->n_persist < w->n_enc;
    /* The layers as a wavefront over streams (p->lstreams > 0; when it is 0, RNNT_CUDA_LSTREAMS=1 / 0 on / off,
     * else on for runners of max_batch >= CU_LSTREAMS_AUTO_MIN_B, where it measured faster than the per-step
     * graph: kernels/dev/NOTES.md, "Layers as a wavefront over streams"): only where every layer is a plain
     * per-step layer whose input is the previous layer's (time-stacked) h. */
    int want_ls = p->lstreams > 0;
    if (p->lstreams == 0) {
        const char *env = getenv("RNNT_CUDA_LSTREAMS");
        want_ls = env ? atoi(env) > 0 : e->bcap >= CU_LSTREAMS_AUTO_MIN_B && !p->fused;
    }
    int ls_ok = want_ls && w->n_enc >= 2 && w->n_enc <= kLstreamMaxLayers && e->n_persist == 0 && !e->fused_bt && !e->mma_step;
    for (int l = 0; ls_ok && l < w->n_enc; l++) {
        const cu_lstm_w *L = &w->enc[l];
        if (L->proj || L->ln_w || L->ow != L->hp) ls_ok = 0;
        if (l + 1 < w->n_enc && w->enc[l + 1].in_w != L->time_stack * L->hp) ls_ok = 0;
    }
    if (ls_ok) {
        const char *ce_chunk = getenv("RNNT_CUDA_LSTREAM_CHUNK"), *ce_ring = getenv("RNNT_CUDA_LSTREAM_RING");
        /* RNNT_CUDA_LSTREAM_CHUNK=C: C steps per chunk, projections in calls of one chunk (the fp16 default, C 16:
         * the best or within 3% of it from B 24 to 256 in the sweep of run 2); =rin (the fp32 default): a chunk
         * of one r_in call at the runner's max_batch, in calls of r_in rows, and cuBLAS's own kernels: the
         * per-step path's bits, which are also the streams' (cu_stream.h), so fp32 streams keep decoding as whole
         * utterances do */
        e->lrows_rin = ce_chunk ? !strcmp(ce_chunk, "rin") : w->dt != CU_F16;
        e->lchunk = e->lrows_rin ? (e->r_in / e->bcap > 1 ? e->r_in / e->bcap : 1)
                                 : ce_chunk && atoi(ce_chunk) > 0 ? atoi(ce_chunk) : CU_LSTREAM_CHUNK_DEFAULT;
        e->lring = ce_ring && atoi(ce_ring) > 0 ? atoi(ce_ring) : 2;
        e->lev_n = e->lring + 1;
    }
    size_t hb_bytes = e->n_persist ? cu_persist_scratch_bytes(e->bcap, hpmax) : 0;
    /* Pairs of consecutive persistent layers of one size as a layer wavefront (p->wave > 0, or
     * RNNT_CUDA_WAVE=1 when p->wave is 0): layer l + 1 computes its input projection in chunks inside the
     * kernel while layer l runs ahead (kernels/dev/NOTES.md, "Layer wavefront"). */
    int want_wave = p->wave > 0;
    if (p->wave == 0) {
        const char *env = getenv("RNNT_CUDA_WAVE");
        want_wave = env && atoi(env) > 0;
    }
    if (want_wave)
        for (int l = 0; l + 1 < w->n_enc; l++) {
            const cu_lstm_w *A = &w->enc[l], *N = &w->enc[l + 1];
            if (e->persist[l] && e->persist[l + 1] && A->hidden == N->hidden && A->hp == N->hp && A->g4 == N->g4 &&
                N->in_w == A->time_stack * A->hp && cu_wave_fits(2, A->hidden, e->bcap)) {
                e->wave[l] = 1;
                e->n_wave++;
                l++;
            }
        }
    /* Every layer as ONE wavefront with the recurrent weights on chip: by default for runners of max_batch <=
     * CU_WAVE_CHIP_AUTO_MAX_B (p->wave == 0 and no RNNT_CUDA_WAVE), or asked for (p->wave == 2, RNNT_CUDA_WAVE=2,
     * or RNNT_CUDA_WAVE_CHIP=1 with a wavefront asked for); p->wave < 0 or RNNT_CUDA_WAVE=0 never. Only where
     * every layer is persistent (fp16), of one size, and max_batch rows fit its shared memory (kernels/dev/NOTES.md,
     * "All layers in flight"). */
    int want_chip = p->wave == 2;
    if (p->wave == 0) {
        const char *env = getenv("RNNT_CUDA_WAVE");
        want_chip = env ? atoi(env) == 2 : p->max_batch <= CU_WAVE_CHIP_AUTO_MAX_B;
    }
    if (p->wave > 0 && !want_chip) {
        const char *env = getenv("RNNT_CUDA_WAVE_CHIP");
        want_chip = env && atoi(env) > 0;
    }
    if (want_chip && e->n_persist == w->n_enc) {
        int ok = cu_wave_chip_fits(w->n_enc, w->enc[0].hidden, p->max_batch);
        for (int l = 1; l < w->n_enc && ok; l++) {
            const cu_lstm_w *A = &w->enc[l - 1], *N = &w->enc[l];
            ok = A->hidden == N->hidden && A->hp == N->hp && A->g4 == N->g4 && N->in_w == A->time_stack * A->hp;
        }
        if (ok) {
            e->chip = 1;
            memset(e->wave, 0, (size_t)w->n_enc);
            e->n_wave = 0;
        }
    }
    size_t wb_bytes = e->n_wave ? cu_wave_scratch_bytes(2, e->bcap, hpmax) : 0;
    if (e->chip) wb_bytes = cu_wave_chip_scratch_bytes(w->n_enc, p->max_batch, w->enc[0].hidden, hpmax, 0);
    size_t fp_el = cu_round_up(B * e->tmax[w->n_enc], rin) * (size_t)w->jp;
    e->meta_ints = 1 + B * (3 + (size_t)w->n_enc);
    size_t raw_el = (size_t)p->max_batch * p->max_frames * w->F;

    size_t off = 0, o_meta, o_raw, o_x0, o_y0, o_y1, o_xp, o_hs, o_hproj, o_c, o_fp, o_hb;
#define TAKE(o, bytes)                      \
    do {                                    \
        off = cu_round_up(off, 256);        \
        o = off;                            \
        off += (bytes);                     \
    } while (0)
    TAKE(o_meta, e->meta_ints * 4);
    TAKE(o_raw, raw_el * 4);
    TAKE(o_x0, x0_el * esz);
    TAKE(o_y0, y_el * esz);
    TAKE(o_y1, y_el * esz);
    TAKE(o_xp, xp_el * esz);
    TAKE(o_hs, rec_rows * hpmax * esz);
    TAKE(o_hproj, rec_rows * g4max * 4);
    TAKE(o_c, B * hpmax * 4);
    TAKE(o_fp, fp_el * 4);
    TAKE(o_hb, hb_bytes);
    size_t o_wb;
    TAKE(o_wb, wb_bytes);
    size_t o_hs2, o_mb, o_yc;
    e->ychip_el = e->chip && w->n_enc > 2 ? (size_t)p->max_batch * e->tmax[0] * hpmax : 0;
    TAKE(o_yc, e->ychip_el * (w->n_enc > 2 ? w->n_enc - 2 : 0) * esz);
    TAKE(o_hs2, e->fused_bt || e->mma_step ? rec_rows * hpmax * esz : 0);
    TAKE(o_mb, any_proj ? rec_rows * hpmax * esz : 0);
#undef TAKE
    e->arena_bytes = cu_round_up(off, 256);
    cudaError_t ce = cudaMalloc(&e->arena, e->arena_bytes);
    /* on the runner's stream: a plain cudaMemset runs on the legacy stream, which a non-blocking stream
     * does not wait for, so it could land after the first batch's upload (seen under racecheck: an
     * utterance's length read as 0) */
    if (ce == cudaSuccess) ce = cudaMemsetAsync(e->arena, 0, e->arena_bytes, stream);
    if (ce == cudaSuccess) ce = cudaHostAlloc((void **)&e->h_meta, e->meta_ints * 4 + 256 + raw_el * 4, cudaHostAllocDefault);
    if (ce != cudaSuccess) {
        rnnt_status st = cu_set_err(err, errlen, cu_status_of(ce),
                                    "cuda: allocating %.1f MiB of encoder buffers for max_batch %d x max_frames %d: %s",
                                    e->arena_bytes / 1048576.0, p->max_batch, p->max_frames, cudaGetErrorString(ce));
        cu_encoder_free(e);
        return st;
    }
    char *a = (char *)e->arena;
    e->meta = (int *)(a + o_meta);
    e->raw = (float *)(a + o_raw);
    e->x0 = a + o_x0;
    e->y[0] = a + o_y0;
    e->y[1] = a + o_y1;
    e->xproj = a + o_xp;
    e->hs = a + o_hs;
    e->hproj = (float *)(a + o_hproj);
    e->c = (float *)(a + o_c);
    e->fproj = (float *)(a + o_fp);
    e->hbuf = a + o_hb;
    e->hbuf_bytes = hb_bytes;
    e->wbuf = a + o_wb;
    e->wbuf_bytes = wb_bytes;
    e->hs2 = a + o_hs2;
    e->ychip = a + o_yc;
    e->mbuf = a + o_mb;
    e->h_raw = (float *)((char *)e->h_meta + cu_round_up(e->meta_ints * 4, 256));
    rnnt_status st = RNNT_OK;
    ce = cudaStreamCreateWithFlags(&e->cs, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&e->ev_in, cudaEventDisableTiming);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&e->ev_up, cudaEventDisableTiming);
    if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&e->ev_raw, cudaEventDisableTiming);
    const char *re = getenv("RNNT_CUDA_RAW_EARLY");
    e->raw_early = re && *re ? strcmp(re, "1") == 0 : p->raw_early == 1;
    if (ce != cudaSuccess)
        st = cu_set_err(err, errlen, cu_status_of(ce), "cuda: encoder copy stream: %s", cudaGetErrorString(ce));
    if (st == RNNT_OK)
        st = cu_stager_create(p->stage_helpers == 0 ? -1 : p->stage_helpers < 0 ? 0 : p->stage_helpers, p->stage_chunk,
                              &e->stager, err, errlen);
    if (st == RNNT_OK && e->lchunk) st = lstreams_create(e, rec_rows, err, errlen);
    if (st != RNNT_OK) {
        cu_encoder_free(e);
        return st;
    }
    *out = e;
    return RNNT_OK;
}

void cu_encoder_free(cu_encoder *e)
{
    if (!e) return;
    if (e->cs) cudaStreamSynchronize(e->cs); /* transfers still reading the pinned buffer */
    lstreams_free(e);
    cu_stager_free(e->stager);
    for (int i = 0; i < e->cache_n; i++) cudaGraphExecDestroy(e->cache[i].exec);
    if (e->ev_in) cudaEventDestroy(e->ev_in);
    if (e->ev_raw) cudaEventDestroy(e->ev_raw);
    if (e->ev_up) cudaEventDestroy(e->ev_up);
    if (e->cs) cudaStreamDestroy(e->cs);
    if (e->arena) cudaFree(e->arena);
    if (e->h_meta) cudaFreeHost(e->h_meta);
    free(e->tmax);
    free(e->persist);
    free(e->wave);
    free(e->cache);
    free(e->h_tenc);
    free(e->seg_src);
    free(e->seg_bytes);
    free(e);
}

rnnt_status cu_encoder_stage(cu_encoder *e, int n, const float *const *feats, const int *frames, char *err,
                             size_t errlen)
{
    const cu_weights *w = e->w;
    if (n < 1 || n > e->max_batch)
        return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: batch of %d utterances, runner holds %d", n,
                          e->max_batch);
    int maxT = 0;
    for (int i = 0; i < n; i++) {
        if (frames[i] < 0 || frames[i] > e->max_frames)
            return cu_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "cuda: utterance %d has %d frames, runner holds %d", i,
                              frames[i], e->max_frames);
        if (frames[i] > maxT) maxT = frames[i];
    }
    int nb = cu_round_up_i(n, 8);
    int tb = cu_round_up_i(maxT, e->quantum);
    /* the previous batch's transfers read the pinned buffer until they are done */
    if (e->up_recorded) CU_TRY(cudaEventSynchronize(e->ev_up));
    memset(e->h_meta, 0, e->meta_ints * 4);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        meta_off(e, e->h_meta)[i] = (int)used;
        meta_frames(e, e->h_meta)[i] = frames[i];
        e->seg_src[i] = feats ? feats[i] : NULL;
        e->seg_bytes[i] = feats && frames[i] > 0 ? (size_t)frames[i] * w->F * sizeof(float) : 0;
        used += (size_t)frames[i];
        int t = (frames[i] + w->k - 1) / w->k;
        for (int l = 0; l < w->n_enc; l++) {
            meta_lens(e, e->h_meta, l)[i] = t;
            t = (t + w->enc[l].time_stack - 1) / w->enc[l].time_stack;
        }
        meta_lens(e, e->h_meta, w->n_enc)[i] = t;
        e->h_tenc[i] = t;
    }
    int t_enc = tb / w->k;
    for (int l = 0; l < w->n_enc; l++) t_enc /= w->enc[l].time_stack;
    e->h_meta[0] = t_enc;
    e->raw_used = used;
    /* Transfers on cs: raw chunk by chunk as the host copy finishes them, once the last encoder run
     * has read the device input (ev_raw); then meta, after everything enqueued on s so far (a running
     * batch's decoder reads its lengths until it ends). */
    rnnt_status st = RNNT_OK;
    if (feats) {
        if (!e->raw_recorded) CU_TRY(cudaEventRecord(e->ev_raw, e->s));
        e->raw_recorded = 1;
        CU_TRY(cudaStreamWaitEvent(e->cs, e->ev_raw, 0));
        st = cu_stager_copy(e->stager, n, (const void *const *)e->seg_src, e->seg_bytes, e->h_raw, e->raw, e->cs, err,
                            errlen);
    }
    CU_TRY(cudaEventRecord(e->ev_in, e->s));
    CU_TRY(cudaStreamWaitEvent(e->cs, e->ev_in, 0));
    CU_TRY(cudaMemcpyAsync(e->meta, e->h_meta, e->meta_ints * 4, cudaMemcpyHostToDevice, e->cs));
    CU_TRY(cudaEventRecord(e->ev_up, e->cs));
    e->up_recorded = 1;
    RNNT_TRY(st);
    cu_encoder_batch *b = &e->batch;
    b->n = n;
    b->nb = nb;
    b->tb = tb;
    b->t_enc = t_enc;
    b->t_enc_dev = meta_lens(e, e->meta, w->n_enc);
    b->t_enc_bucket_dev = e->meta;
    b->t_enc_host = e->h_tenc;
    b->out = e->y[(w->n_enc - 1) & 1];
    b->fproj = e->fproj;
    return RNNT_OK;
}

/* The layers as a wavefront over streams (cu_encoder_params.lstreams), after the frontend. Layer l runs its
 * steps on ls[2l]; its input projection (l >= 1) runs on ls[2l + 1] one chunk of time at a time, as soon as
 * layer l - 1 has written that chunk into its output ring, so layer l + 1 trails layer l by about a chunk and
 * all recurrences run at once. The kernels and GEMM calls are the per-step path's (the all-steps GEMM in
 * calls of r_in rows, the recurrent GEMM in calls of r_rec rows), only the rows of a chunk's projection are
 * [slot][chunk step] of a ring slot instead of [slot][step] of the whole bucket: the same bits. Events,
 * per layer and ring position (lev_n = lring + 1 of each, so a wait never sees a later record): done[l][k]
 * (layer l has written its output of chunk k), proj[l][k] (layer l's projection of chunk k is written). */
static rnnt_status enqueue_lstreams(cu_encoder *e, int nb, int tb, char *err, size_t errlen)
{
    const cu_weights *w = e->w;
    int n = w->n_enc, E = e->lev_n, R = e->lring;
    size_t esz = cu_dtype_size(w->dt);
    cudaEvent_t *done = e->lev, *proj = e->lev + (size_t)n * E, fork = e->lev[(size_t)n * 2 * E],
                *join = e->lev + (size_t)n * 2 * E + 1;
    int T[kLstreamMaxLayers] = {0}, C[kLstreamMaxLayers] = {0};
    T[0] = tb / w->k;
    for (int l = 0; l < n; l++) {
        C[l] = lstream_chunk_of(e, l);
        if (l + 1 < n) T[l + 1] = T[l] / w->enc[l].time_stack;
    }
    int K = cu_div_up(T[n - 1], C[n - 1]);
    CU_TRY(cudaEventRecord(fork, e->s));
    for (int i = 0; i < 2 * n; i++) CU_TRY(cudaStreamWaitEvent(e->ls[i], fork, 0));
    /* layer 0's input is the whole bucket from the start: one all-steps projection, as the per-step path */
    const cu_lstm_w *L0 = &w->enc[0];
    RNNT_TRY(cu_gemm_rows(e->lblas[0], w->dt, nb * T[0], 4 * L0->hidden, L0->in_w, e->x0, L0->in_w, L0->w_ih, L0->in_w,
                          e->xproj, 0, L0->g4, e->r_in, err, errlen));
    for (int k = 0; k < K; k++)
        for (int l = 0; l < n; l++) {
            const cu_lstm_w *L = &w->enc[l];
            cudaStream_t S = e->ls[2 * l], P = e->ls[2 * l + 1];
            int slot = k % R, H = L->hidden;
            char *xr = (char *)e->lxr[l] + (size_t)slot * e->lxr_slot[l] * esz;
            char *yr = (char *)e->lyr[l] + (size_t)slot * e->lyr_slot[l] * esz;
            if (l > 0) {
                /* chunk k of layer l - 1 is written; ring slot k % R of this layer's projection is free once
                 * this layer has run chunk k - R */
                const char *yin = (const char *)e->lyr[l - 1] + (size_t)slot * e->lyr_slot[l - 1] * esz;
                CU_TRY(cudaStreamWaitEvent(P, done[(size_t)(l - 1) * E + k % E], 0));
                if (k >= R) CU_TRY(cudaStreamWaitEvent(P, done[(size_t)l * E + (k - R) % E], 0));
                RNNT_TRY(cu_gemm_rows(e->lblas[2 * l + 1], w->dt, nb * C[l], 4 * H, L->in_w, yin, L->in_w, L->w_ih,
                                      L->in_w, xr, 0, L->g4, lstream_rows_of(e, l), err, errlen));
                CU_TRY(cudaEventRecord(proj[(size_t)l * E + k % E], P));
                CU_TRY(cudaStreamWaitEvent(S, proj[(size_t)l * E + k % E], 0));
            }
            /* the output ring slot is free once layer l + 1 has projected chunk k - R */
            if (l + 1 < n && k >= R) CU_TRY(cudaStreamWaitEvent(S, proj[(size_t)(l + 1) * E + (k - R) % E], 0));
            const int *len = meta_lens(e, e->meta, l);
            int t1 = (k + 1) * C[l] < T[l] ? (k + 1) * C[l] : T[l];
            for (int t = k * C[l]; t < t1; t++) {
                int tc = t - k * C[l];
                const char *xt = l == 0 ? (const char *)e->xproj + (size_t)t * L->g4 * esz : xr + (size_t)tc * L->g4 * esz;
                size_t ldx = l == 0 ? (size_t)T[0] * L->g4 : (size_t)C[l] * L->g4;
                char *yt = l + 1 == n ? (char *)e->y[l & 1] + (size_t)t * L->hp * esz : yr + (size_t)tc * L->hp * esz;
                size_t ldy = l + 1 == n ? (size_t)T[l] * L->hp : (size_t)C[l] * L->hp;
                if (t > 0)
                    RNNT_TRY(cu_gemm_rows(e->lblas[2 * l], w->dt, nb, 4 * H, L->hp, e->lhs[l], L->hp, L->w_hh, L->hp,
                                          e->lhproj[l], 1, L->g4, e->r_rec, err, errlen));
                RNNT_TRY(cu_lstm_pointwise(S, w->dt, w->act, nb, H, L->hp, xt, ldx, t > 0 ? e->lhproj[l] : NULL, L->g4,
                                           L->bias, e->lc[l], L->hp, yt, ldy, e->lhs[l], L->hp, len, t, err, errlen));
            }
            CU_TRY(cudaEventRecord(done[(size_t)l * E + k % E], S));
        }
    for (int i = 0; i < 2 * n; i++) {
        CU_TRY(cudaEventRecord(join[i], e->ls[i]));
        CU_TRY(cudaStreamWaitEvent(e->s, join[i], 0));
    }
    return RNNT_OK;
}

/* The frontend of one bucket (raw -> x0: normalisation and frame stacking), the only reader of raw; launched on
 * its own before the layers' graph, so that the next batch's upload may start as soon as it has run. */
static rnnt_status enqueue_frontend(cu_encoder *e, int nb, int tb, char *err, size_t errlen)
{
    const cu_weights *w = e->w;
    return cu_frontend(e->s, w->dt, nb, tb, w->F, w->fp, e->raw, meta_off(e, e->meta), meta_frames(e, e->meta), w->mean,
                       w->sd, e->x0, err, errlen);
}

/* The layers of one bucket (after the frontend, which is enqueued here too unless raw_early launches it on its
 * own), enqueued on the stream (captured into a graph or launched directly). */
static rnnt_status enqueue_encoder(cu_encoder *e, int nb, int tb, char *err, size_t errlen)
{
    const cu_weights *w = e->w;
    size_t esz = cu_dtype_size(w->dt);
    if (!e->raw_early) RNNT_TRY(enqueue_frontend(e, nb, tb, err, errlen));
    if (e->lchunk) return enqueue_lstreams(e, nb, tb, err, errlen);
    const void *in = e->x0;
    int T = tb / w->k;
    if (e->chip) {
        /* layer 0's input GEMM, then every layer in one kernel; rows >= max_batch are never live */
        const int n = w->n_enc, nbc = nb < e->max_batch ? nb : e->max_batch;
        const cu_lstm_w *L0 = &w->enc[0];
        RNNT_TRY(cu_gemm_rows(e->blas, w->dt, nb * T, 4 * L0->hidden, L0->in_w, in, L0->in_w, L0->w_ih, L0->in_w, e->xproj,
                              0, L0->g4, e->r_in, err, errlen));
        cu_wave_layer wl[CU_WAVE_MAX_LAYERS];
        memset(wl, 0, sizeof wl);
        for (int l = 0; l < n; l++) {
            const cu_lstm_w *L = &w->enc[l];
            wl[l].w_hh = (const __half *)L->w_hh, wl[l].w_ih = l > 0 ? (const __half *)L->w_ih : NULL, wl[l].bias = L->bias;
            wl[l].x = l == 0 ? (const __half *)e->xproj : NULL, wl[l].ldx_b = (size_t)T * L->g4;
            wl[l].len = meta_lens(e, e->meta, l);
            wl[l].y = (__half *)(l >= n - 2 ? e->y[l & 1] : (char *)e->ychip + (size_t)l * e->ychip_el * 2);
            wl[l].ldy_b = (size_t)T * L->hp, wl[l].T = T, wl[l].H = L->hidden, wl[l].hp = L->hp, wl[l].g4 = L->g4;
            wl[l].in_w = L->in_w, wl[l].stack_in = l > 0 ? w->enc[l - 1].time_stack : 1;
            T /= L->time_stack;
        }
        return cu_lstm_wave_chip(e->s, w->act, nbc, n, wl, 0, -1, -1, e->wbuf, e->wbuf_bytes, err, errlen);
    }
    for (int l = 0; l < w->n_enc; l++) {
        const cu_lstm_w *L = &w->enc[l];
        void *y = e->y[l & 1];
        int H = L->hidden;
        RNNT_TRY(cu_gemm_rows(e->blas, w->dt, nb * T, 4 * H, L->in_w, in, L->in_w, L->w_ih, L->in_w, e->xproj, 0,
                              L->g4, e->r_in, err, errlen));
        const int *len = meta_lens(e, e->meta, l);
        if (e->wave[l]) {
            /* layers l and l + 1 as one wavefront: l + 1 reads y of l (time-stacked) inside the kernel */
            const cu_lstm_w *N = &w->enc[l + 1];
            void *y2 = e->y[(l + 1) & 1];
            int T2 = T / L->time_stack;
            cu_wave_layer wl[2];
            memset(wl, 0, sizeof wl);
            wl[0].w_hh = (const __half *)L->w_hh, wl[0].bias = L->bias, wl[0].x = (const __half *)e->xproj;
            wl[0].ldx_b = (size_t)T * L->g4, wl[0].len = len, wl[0].y = (__half *)y, wl[0].ldy_b = (size_t)T * L->hp;
            wl[0].T = T, wl[0].H = H, wl[0].hp = L->hp, wl[0].g4 = L->g4, wl[0].in_w = L->in_w, wl[0].stack_in = 1;
            wl[1].w_hh = (const __half *)N->w_hh, wl[1].w_ih = (const __half *)N->w_ih, wl[1].bias = N->bias;
            wl[1].len = meta_lens(e, e->meta, l + 1), wl[1].y = (__half *)y2, wl[1].ldy_b = (size_t)T2 * N->hp;
            wl[1].T = T2, wl[1].H = N->hidden, wl[1].hp = N->hp, wl[1].g4 = N->g4, wl[1].in_w = N->in_w;
            wl[1].stack_in = L->time_stack;
            RNNT_TRY(cu_lstm_wave(e->s, w->act, nb, 2, wl, 0, e->wbuf, e->wbuf_bytes, err, errlen));
            in = y2;
            T = T2 / N->time_stack;
            l++;
            continue;
        }
        if (e->persist[l]) {
            RNNT_TRY(cu_lstm_persist(e->s, w->act, nb, T, H, L->hp, L->g4, (const __half *)L->w_hh, L->bias,
                                     (const __half *)e->xproj, (size_t)T * L->g4, len, (__half *)y, (size_t)T * L->hp,
                                     e->hbuf, e->hbuf_bytes, CU_PERSIST_SYNC_AUTO, err, errlen));
            in = y;
            T /= L->time_stack;
            continue;
        }
        if (L->proj) {
            /* projection LSTM (per step): the cell writes o * phi(c) to mbuf, W_hr projects it into hs
             * (the recurrent h, ow wide, pad columns zero) and hs is copied to the output row t */
            CU_TRY(cudaMemsetAsync(e->hs, 0, cu_round_up((size_t)nb, (size_t)e->r_rec) * L->ow * esz, e->s));
            for (int t = 0; t < T; t++) {
                if (t > 0)
                    RNNT_TRY(cu_gemm_rows(e->blas, w->dt, nb, 4 * H, L->ow, e->hs, L->ow, L->w_hh, L->ow, e->hproj, 1,
                                          L->g4, e->r_rec, err, errlen));
                RNNT_TRY(cu_lstm_pointwise(e->s, w->dt, w->act, nb, H, L->hp, (const char *)e->xproj + (size_t)t * L->g4 * esz,
                                           (size_t)T * L->g4, t > 0 ? e->hproj : NULL, L->g4, L->bias, e->c, L->hp, e->mbuf,
                                           L->hp, e->mbuf, L->hp, len, t, err, errlen));
                RNNT_TRY(cu_gemm_rows(e->blas, w->dt, nb, L->proj, L->hp, e->mbuf, L->hp, L->w_hr, L->hp, e->hs, 0, L->ow,
                                      e->r_rec, err, errlen));
                CU_TRY(cudaMemcpy2DAsync((char *)y + (size_t)t * L->ow * esz, (size_t)T * L->ow * esz, e->hs, L->ow * esz,
                                         L->ow * esz, nb, cudaMemcpyDeviceToDevice, e->s));
            }
            if (L->ln_w)
                RNNT_TRY(cu_layer_norm_rows(e->s, w->dt, nb, T, L->out, L->ow, y, (size_t)T * L->ow, len, L->ln_w, L->ln_b,
                                            err, errlen));
            in = y;
            T /= L->time_stack;
            continue;
        }
        if (e->fused_bt && !L->ln_w) {
            void *hb[2] = {e->hs, e->hs2};
            for (int t = 0; t < T; t++)
                RNNT_TRY(cu_lstm_step_fused(e->s, w->dt, w->act, e->fused_bt, nb, H, L->hp, L->w_hh, hb[(t + 1) & 1],
                                            hb[t & 1], (const char *)e->xproj + (size_t)t * L->g4 * esz, (size_t)T * L->g4,
                                            L->bias, e->c, (char *)y + (size_t)t * L->hp * esz, (size_t)T * L->hp, len, t,
                                            err, errlen));
            in = y;
            T /= L->time_stack;
            continue;
        }
        if (e->mma_step && L->hp <= CU_MMA_MAX_HP && !L->ln_w) { /* LayerNorm layers: the plain path below */
            /* step 0 has no recurrent term (the cell kernel alone); then h ping-pongs between two buffers,
             * since the blocks of step t still read h_{t-1} while others write h_t */
            void *hb[2] = {e->hs, e->hs2};
            for (int t = 0; t < T; t++) {
                char *yt = (char *)y + (size_t)t * L->hp * esz;
                const char *xt = (const char *)e->xproj + (size_t)t * L->g4 * esz;
                if (t == 0)
                    RNNT_TRY(cu_lstm_pointwise(e->s, w->dt, w->act, nb, H, L->hp, xt, (size_t)T * L->g4, NULL, L->g4, L->bias,
                                               e->c, L->hp, yt, (size_t)T * L->hp, hb[0], L->hp, len, t, err, errlen));
                else
                    RNNT_TRY(cu_lstm_mma_step(e->s, w->act, CU_MMA_TILE_AUTO, nb, H, L->hp, (const __half *)L->w_hh,
                                              (const __half *)hb[(t - 1) & 1], (__half *)hb[t & 1], (const __half *)xt,
                                              (size_t)T * L->g4, L->bias, e->c, (__half *)yt, (size_t)T * L->hp, len, t,
                                              err, errlen));
            }
            in = y;
            T /= L->time_stack;
            continue;
        }
        for (int t = 0; t < T; t++) {
            if (t > 0)
                RNNT_TRY(cu_gemm_rows(e->blas, w->dt, nb, 4 * H, L->hp, e->hs, L->hp, L->w_hh, L->hp, e->hproj, 1,
                                      L->g4, e->r_rec, err, errlen));
            RNNT_TRY(cu_lstm_pointwise(e->s, w->dt, w->act, nb, H, L->hp, (const char *)e->xproj + (size_t)t * L->g4 * esz,
                                       (size_t)T * L->g4, t > 0 ? e->hproj : NULL, L->g4, L->bias, e->c, L->hp,
                                       (char *)y + (size_t)t * L->hp * esz, (size_t)T * L->hp, e->hs, L->hp, len, t,
                                       err, errlen));
        }
        if (L->ln_w) /* LayerNorm without a projection: the output rows, after the recurrence */
            RNNT_TRY(cu_layer_norm_rows(e->s, w->dt, nb, T, L->out, L->ow, y, (size_t)T * L->ow, len, L->ln_w, L->ln_b, err,
                                        errlen));
        in = y;
        T /= L->time_stack;
    }
    return RNNT_OK;
}

static void cache_evict_all(cu_encoder *e)
{
    for (int i = 0; i < e->cache_n; i++) cudaGraphExecDestroy(e->cache[i].exec);
    e->cache_n = 0;
}

static rnnt_status build_graph(cu_encoder *e, int nb, int tb, cudaGraphExec_t *out, char *err, size_t errlen)
{
    cudaGraph_t g = NULL;
    CU_TRY(cudaStreamBeginCapture(e->s, cudaStreamCaptureModeThreadLocal));
    rnnt_status st = enqueue_encoder(e, nb, tb, err, errlen);
    cudaError_t ce = cudaStreamEndCapture(e->s, &g);
    if (st != RNNT_OK) {
        if (g) cudaGraphDestroy(g);
        return st;
    }
    CU_TRY(ce);
    ce = cudaGraphInstantiate(out, g, 0);
    if (ce == cudaErrorMemoryAllocation && e->cache_n > 0) { /* make room: drop the cached graphs, retry */
        cudaGetLastError();
        cache_evict_all(e);
        ce = cudaGraphInstantiate(out, g, 0);
    }
    cudaGraphDestroy(g);
    CU_TRY(ce);
    return RNNT_OK;
}

static rnnt_status get_graph(cu_encoder *e, int nb, int tb, cudaGraphExec_t *out, char *err, size_t errlen)
{
    e->clock++;
    for (int i = 0; i < e->cache_n; i++)
        if (e->cache[i].nb == nb && e->cache[i].tb == tb) {
            e->cache[i].stamp = e->clock;
            *out = e->cache[i].exec;
            return RNNT_OK;
        }
    cudaGraphExec_t x;
    RNNT_TRY(build_graph(e, nb, tb, &x, err, errlen));
    int slot = e->cache_n;
    if (e->cache_n == e->cache_cap) {
        slot = 0;
        for (int i = 1; i < e->cache_n; i++)
            if (e->cache[i].stamp < e->cache[slot].stamp) slot = i;
        cudaGraphExecDestroy(e->cache[slot].exec);
    } else {
        e->cache_n++;
    }
    e->cache[slot].nb = nb;
    e->cache[slot].tb = tb;
    e->cache[slot].exec = x;
    e->cache[slot].stamp = e->clock;
    *out = x;
    return RNNT_OK;
}

rnnt_status cu_encoder_upload(cu_encoder *e, char *err, size_t errlen)
{
    /* the transfers were enqueued on cs by cu_encoder_stage */
    if (e->up_recorded) CU_TRY(cudaStreamWaitEvent(e->s, e->ev_up, 0));
    return RNNT_OK;
}

static rnnt_status compute_batch(cu_encoder *e, char *err, size_t errlen);

rnnt_status cu_encoder_compute(cu_encoder *e, char *err, size_t errlen)
{
    e->raw_done = 0;
    rnnt_status st = compute_batch(e, err, errlen);
    /* after it the device input has been read (cu_encoder_stage); recorded after a failure too, unless compute
     * recorded it after the frontend already */
    if (e->raw_done) return st;
    cudaError_t ce = cudaEventRecord(e->ev_raw, e->s);
    e->raw_recorded = ce == cudaSuccess;
    if (st == RNNT_OK && ce != cudaSuccess)
        return cu_set_err(err, errlen, cu_status_of(ce), "cuda: %s", cudaGetErrorString(ce));
    return st;
}

static rnnt_status compute_batch(cu_encoder *e, char *err, size_t errlen)
{
    const cu_encoder_batch *b = &e->batch;
    e->batch.graphs_on = 0;
    if (b->tb == 0) return RNNT_OK;
    if (e->raw_early) {
        RNNT_TRY(enqueue_frontend(e, b->nb, b->tb, err, errlen));
        CU_TRY(cudaEventRecord(e->ev_raw, e->s));
        e->raw_recorded = e->raw_done = 1;
    }
    if (e->graphs) {
        cudaGraphExec_t x;
        rnnt_status st = get_graph(e, b->nb, b->tb, &x, err, errlen);
        if (st == RNNT_OK) {
            CU_TRY(cudaGraphLaunch(x, e->s));
            e->batch.graphs_on = 1;
            return RNNT_OK;
        }
        if (st == RNNT_ERR_NOMEM) return st;
        /* Capture itself failed (not a fault of the work): run without graphs from now on. */
        cudaGetLastError();
        e->graphs = 0;
        e->graph_note = "graph capture failed; launching directly";
        e->batch.graph_note = e->graph_note;
    }
    return enqueue_encoder(e, b->nb, b->tb, err, errlen);
}

rnnt_status cu_encoder_run(cu_encoder *e, char *err, size_t errlen)
{
    RNNT_TRY(cu_encoder_upload(e, err, errlen));
    return cu_encoder_compute(e, err, errlen);
}

rnnt_status cu_encoder_joint_proj(cu_encoder *e, char *err, size_t errlen)
{
    const cu_weights *w = e->w;
    const cu_encoder_batch *b = &e->batch;
    if (b->tb == 0) return RNNT_OK;
    return cu_gemm_rows(e->blas, w->dt, b->nb * b->t_enc, w->J, w->hep, b->out, w->hep, w->jenc_w, w->hep, e->fproj, 1,
                        w->jp, e->r_in, err, errlen);
}

const cu_encoder_batch *cu_encoder_get_batch(const cu_encoder *e) { return &e->batch; }
const int *cu_encoder_meta_dev(const cu_encoder *e) { return e->meta; }
size_t cu_encoder_meta_bytes(const cu_encoder *e) { return e->meta_ints * 4; }
void cu_encoder_chunks(const cu_encoder *e, int *r_in, int *r_rec)
{
    *r_in = e->r_in;
    *r_rec = e->r_rec;
}
float *cu_encoder_raw_dev(const cu_encoder *e) { return e->raw; }
size_t cu_encoder_device_bytes(const cu_encoder *e) { return e->arena_bytes + e->lbuf_bytes; }
const void *cu_encoder_layer_out(const cu_encoder *e, int l)
{
    if (e->chip && l < e->w->n_enc - 2) return (const char *)e->ychip + (size_t)l * e->ychip_el * 2;
    return e->y[l & 1];
}
int cu_encoder_persistent_layers(const cu_encoder *e) { return e->n_persist; }
int cu_encoder_wave_pairs(const cu_encoder *e) { return e->chip ? 1 : e->n_wave; }
int cu_encoder_wave_chip(const cu_encoder *e) { return e->chip; }
int cu_encoder_fused_steps(const cu_encoder *e) { return e->fused_bt > 0; }
int cu_encoder_mma_steps(const cu_encoder *e) { return e->mma_step; }
int cu_encoder_stage_helpers(const cu_encoder *e) { return cu_stager_helpers(e->stager); }
size_t cu_encoder_stage_chunk(const cu_encoder *e) { return cu_stager_chunk(e->stager); }
int cu_encoder_lstream_chunk(const cu_encoder *e) { return e->lchunk; }
int cu_encoder_lstream_same_bits(const cu_encoder *e) { return e->lchunk && e->lrows_rin && !e->lsms; }
int cu_encoder_lstream_sms(const cu_encoder *e) { return e->lsms; }
