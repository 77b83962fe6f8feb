/* chip_lab.cu — kernel lab copy of the on-chip layer wavefront (kernels/cu_wave.cu's cu_lstm_wave_chip) with the
 * options tried in session 6 of issue 16 §1 (kernels/dev/NOTES.md, "The on-chip wavefront, session 6"): early
 * schedule, split projection passes, hoisted / per-warp-staged h loads, 16-column passes, and a PROF build that stamps
 * the clock at each phase of each step. Lab only (lab_lstm_wave variants 12-22): the production kernel stays
 * cu_wave.cu's until a variant here measures faster in the encoder. Same numerics as cu_wave.cu's kernel except the
 * 16-column passes' two-stage sum (another fixed order). */
#include "chip_lab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cu_persist.h"
#include "cu_persist_dev.cuh"

namespace {
constexpr int U = CU_PERSIST_U;
constexpr int RS = 36; /* floats per (warp, column) row of the partial sums: 32 gate rows + pad */
constexpr int LINE = 32;
} // namespace

/* ---------------------------------------------------------------------------------------------------
 * Every layer in ONE persistent kernel with the recurrent weights on chip (cu_lstm_wave_chip, issue 16
 * §1; counts in kernels/dev/NOTES.md, "All layers in flight, W_hh on chip"). One block of 512 threads
 * per SM owns the units j0 .. j0 + 7 of EVERY layer: the 32 gate rows of each layer's W_hh, 64 KB in
 * fp16. Layers 0 and 1 keep theirs in registers (64 fragment registers per thread), layers 2.. in shared
 * memory as the same fragments (one 16-byte load per lane and (m-tile, k-step)). Warp w multiplies the
 * K slice 64 w .. 64 w + 63 of every layer (16 partial sums per gate row, added in warp order). One
 * arrival counter for the whole grid: one barrier per wavefront step, every layer's step in it. Layer l
 * runs its step t at wavefront step off_l + t R_l (R_l: the product of the time stacks before it);
 * layers l >= 1 project their input, W_ih [x_t s .. x_t s + s - 1], for C steps at once in the shadow
 * of the barrier before their chunk starts (W_ih rows read from L2 once per chunk), the fp16 results in
 * a per-block global ring. */
namespace {

constexpr int CH_THREADS = 512;
constexpr int CH_WARPS = CH_THREADS / 32;
constexpr int CH_KS = 4;                 /* k16 steps per warp: K slice 64, so H <= 1024 */
constexpr int CH_NR = 2;                 /* layers whose W_hh fragments live in registers */
constexpr int CH_PCOLS = 8;              /* (step, row) columns per projection pass */
constexpr int CH_MAX_ROWS = 8;           /* one n-tile */
constexpr size_t CH_WBYTES = (size_t)CH_WARPS * 2 * CH_KS * 32 * 16; /* one layer's fragments: 64 KB */
constexpr int CH_PROF_WORDS = LAB_CHIP_PROF_WORDS;

struct clayer {
    const __half *w_hh, *w_ih, *x;
    const float *bias;
    const int *len;
    __half *y;
    size_t ldx_b, ldy_b;
    int T, in_w, s, off, R;
};

struct cprm {
    clayer L[CU_WAVE_MAX_LAYERS];
    int n, nb, H, hp, g4, chunk, part_floats;
    int stage;     /* h of every layer copied into shared memory (cp.async) before the products */
    int early;     /* the next step's schedule by an idle warp during the cells (LAB_CHIP_EARLY_SCHED) */
    int split;     /* each chunk projection pass as soon as its slots and inputs allow (LAB_CHIP_SPLIT_PROJ) */
    int pcols;     /* columns per projection pass: 8, or 16 (LAB_CHIP_WIDE_PASS: W_ih read once per 16) */
    unsigned *prof; /* lab: CH_PROF_WORDS per (block, wavefront step < prof_steps), thread 0's clocks; 0: off */
    int prof_steps;
    unsigned *ctl; /* [0] arrivals, [LINE] blocks done */
    __half *hb;    /* layer l: [2][nb][hp] at hb + l * 2 * nb * hp */
    __half *xin;   /* block k: [n][chunk][nb][32] at xin + k * n * chunk * nb * 32 */
};

__device__ __forceinline__ void lds128(uint32_t (&a)[4], unsigned addr)
{
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(addr));
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(sa), "l"(gmem), "r"(src_bytes) : "memory");
}

/* input projections of the chunks whose passes are due at the end of wavefront step ws - 1 (layers >= 1); returns
 * the passes. Inlined: run 2 made it a call (__noinline__) to keep its registers away from the products' 64 fragment
 * registers, and every step got slower (B = 1 2.76 -> 3.27 ms). */
__device__ __forceinline__ int chip_project(const cprm &P, int ws, const int *trun, const int *spj, const int *spq, float *part,
                                         __half *xin, int j0)
{
    constexpr int WARPS = CH_WARPS;
    const int n = P.n, nb = P.nb, H = P.H, hp = P.hp, C = P.chunk;
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    (void)lane;
    int passes = 0;
    for (int l = 1; l < n; l++) {
        const clayer &L = P.L[l], &Lp = P.L[l - 1];
        const int t0 = spj[((ws - 1) & 1) * n + l]; /* the chunk whose passes are due, if any */
        if (t0 < 0) continue;
        const int qq = spq[((ws - 1) & 1) * n + l], qb = qq & 0xffff, qe = qq >> 16;
        const int cs = trun[l] - t0 < C ? trun[l] - t0 : C, s = L.s, in_w = L.in_w;
        const int pc = P.pcols, ncols = cs * nb < qe * pc ? cs * nb : qe * pc; /* columns < ncols of this call */
        int wro[4]; /* this lane's W_ih rows: R = 16 (r / 2) + 8 (r % 2) + g, -1 past H */
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int R = (r >> 1) * 16 + (r & 1) * 8 + g, jj = j0 + (R & 7);
            wro[r] = jj < H ? ((R >> 3) * H + jj) : -1;
        }
        if (pc == 2 * CH_PCOLS) { /* wide passes: two n-tiles share each W_ih fragment (half the L2 bytes) */
            for (int c0 = qb * pc; c0 < ncols; c0 += pc) {
                passes++;
                const __half *in[2];
                bool cv[2];
#pragma unroll
                for (int nt = 0; nt < 2; nt++) {
                    const int col = c0 + nt * 8 + g;
                    cv[nt] = col < ncols;
                    const int tt = t0 + (cv[nt] ? col / nb : 0), b = cv[nt] ? col % nb : 0;
                    in[nt] = Lp.y + b * Lp.ldy_b + (size_t)tt * s * hp;
                }
                float acc[2][2][4] = {};
#pragma unroll 1
                for (int kk = w * 32; kk < in_w; kk += WARPS * 32) {
                    const int k = kk + 8 * q;
                    const uint4 z = make_uint4(0, 0, 0, 0);
                    const bool kv = k < in_w;
                    uint4 bv[2];
#pragma unroll
                    for (int nt = 0; nt < 2; nt++) bv[nt] = cv[nt] && kv ? __ldcg((const uint4 *)(in[nt] + k)) : z;
#pragma unroll
                    for (int mt = 0; mt < 2; mt++) {
                        const int ra = wro[2 * mt], rb = wro[2 * mt + 1];
                        const uint4 va = ra >= 0 && kv ? __ldg((const uint4 *)(L.w_ih + (size_t)ra * in_w + k)) : z;
                        const uint4 vb = rb >= 0 && kv ? __ldg((const uint4 *)(L.w_ih + (size_t)rb * in_w + k)) : z;
                        const uint32_t a0[4] = {va.x, vb.x, va.y, vb.y};
                        const uint32_t a1[4] = {va.z, vb.z, va.w, vb.w};
#pragma unroll
                        for (int nt = 0; nt < 2; nt++) {
                            mma16816(acc[nt][mt], a0, bv[nt].x, bv[nt].y);
                            mma16816(acc[nt][mt], a1, bv[nt].z, bv[nt].w);
                        }
                    }
                }
                /* fixed order: s_w = p_w + p_(w+8) for w < 8 (warps 8-15 store, warps 0-7 add), then s_0 + .. + s_7;
                 * [8][16][RS] floats: the size of the narrow passes' [16][8][RS] */
                auto slot = [&](int ww, int nt, int mt, int e) {
                    return part + ((size_t)ww * 2 * CH_PCOLS + nt * 8 + 2 * q + (e & 1)) * RS + mt * 16 + g + (e >> 1) * 8;
                };
                if (w >= WARPS / 2)
#pragma unroll
                    for (int nt = 0; nt < 2; nt++)
#pragma unroll
                        for (int mt = 0; mt < 2; mt++)
#pragma unroll
                            for (int e = 0; e < 4; e++) *slot(w - WARPS / 2, nt, mt, e) = acc[nt][mt][e];
                __syncthreads();
                if (w < WARPS / 2)
#pragma unroll
                    for (int nt = 0; nt < 2; nt++)
#pragma unroll
                        for (int mt = 0; mt < 2; mt++)
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                float *p = slot(w, nt, mt, e);
                                *p = __fadd_rn(acc[nt][mt][e], *p);
                            }
                __syncthreads();
                { /* 512 threads: (column, gate row) */
                    const int cc = tid >> 5, R = tid & 31;
                    if (c0 + cc < ncols) {
                        const float *p = part + (size_t)cc * RS + R;
                        float sum = p[0];
#pragma unroll
                        for (int k = 1; k < WARPS / 2; k++) sum = __fadd_rn(sum, p[(size_t)k * 2 * CH_PCOLS * RS]);
                        const int col2 = c0 + cc, t2 = t0 + col2 / nb, b2 = col2 % nb;
                        xin[(((size_t)l * C + t2 % C) * nb + b2) * 32 + R] = __float2half_rn(sum);
                    }
                }
                __syncthreads();
            }
            continue;
        }
        for (int c0 = qb * CH_PCOLS; c0 < ncols; c0 += CH_PCOLS) {
            passes++;
            const int col = c0 + g;
            const bool cv = col < ncols;
            const int tt = t0 + (cv ? col / nb : 0), b = cv ? col % nb : 0;
            const __half *in = Lp.y + b * Lp.ldy_b + (size_t)tt * s * hp;
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 1
            for (int kk = w * 32; kk < in_w; kk += WARPS * 32) {
                const int k = kk + 8 * q;
                const uint4 z = make_uint4(0, 0, 0, 0);
                const bool kv = k < in_w;
                const uint4 bv = cv && kv ? __ldcg((const uint4 *)(in + k)) : z;
#pragma unroll
                for (int mt = 0; mt < 2; mt++) { /* the four rows' loads in flight together */
                    const int ra = wro[2 * mt], rb = wro[2 * mt + 1];
                    const uint4 va = ra >= 0 && kv ? __ldg((const uint4 *)(L.w_ih + (size_t)ra * in_w + k)) : z;
                    const uint4 vb = rb >= 0 && kv ? __ldg((const uint4 *)(L.w_ih + (size_t)rb * in_w + k)) : z;
                    const uint32_t a0[4] = {va.x, vb.x, va.y, vb.y};
                    const uint32_t a1[4] = {va.z, vb.z, va.w, vb.w};
                    mma16816(acc[mt], a0, bv.x, bv.y);
                    mma16816(acc[mt], a1, bv.z, bv.w);
                }
            }
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                float *p = part + ((size_t)w * CH_PCOLS + 2 * q) * RS + mt * 16 + g;
                p[0] = acc[mt][0];
                p[RS] = acc[mt][1];
                p[8] = acc[mt][2];
                p[RS + 8] = acc[mt][3];
            }
            __syncthreads();
            if (tid < CH_PCOLS * 32) {
                const int cc = tid >> 5, R = tid & 31;
                if (c0 + cc < ncols) {
                    const float *p = part + (size_t)cc * RS + R;
                    float sum = p[0];
#pragma unroll
                    for (int k = 1; k < WARPS; k++) sum = __fadd_rn(sum, p[(size_t)k * CH_PCOLS * RS]);
                    const int col2 = c0 + cc, t2 = t0 + col2 / nb, b2 = col2 % nb;
                    xin[(((size_t)l * C + t2 % C) * nb + b2) * 32 + R] = __float2half_rn(sum);
                }
            }
            __syncthreads();
        }
    }
    return passes;
}
/* HM: how the products get h: 0 straight from L2 into fragments, layer after layer; 1 (HOIST) every layer's loads
 * into registers before the first product; 2 (WSTAGE, one row) each warp's K slice of every layer in one round into
 * its shared buffer */
template <bool HARD, int NR, int HM, bool PROF>
__global__ void __launch_bounds__(CH_THREADS, 1) k_wave_chip(const __grid_constant__ cprm P)
{
    constexpr int KS = CH_KS, WARPS = CH_WARPS;
    extern __shared__ __align__(16) unsigned char csm[];
    const int n = P.n, nb = P.nb, H = P.H, hp = P.hp, C = P.chunk;
    uint4 *const wsm = (uint4 *)csm;                                  /* [n - NR][WARPS][2][KS][32] */
    float *const part = (float *)(csm + (size_t)(n - NR) * CH_WBYTES); /* steps: [n][WARPS][nb][RS]; projections: [WARPS][PCOLS][RS] */
    __half *const hs = (__half *)(part + P.part_floats);                /* stage: [n][nb][hp]; wstage: [WARPS][n][nb][64] */
    int *const slen = (int *)(hs + (P.stage ? (size_t)n * nb * hp : HM == 2 ? (size_t)WARPS * n * 64 : 0)); /* [n][nb], then trun [n] */
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
    const unsigned nblk = gridDim.x;
    const int j0 = (int)blockIdx.x * U;
    auto kch = [&](int v) { return 8 * (w * (2 * KS) + 4 * v + q); };

    uint32_t A[NR][2][KS][4];
#pragma unroll
    for (int l = 0; l < NR; l++) load_whh_fragments<KS>(A[l], P.L[l].w_hh, H, hp, j0, w, g, q);
    for (int l = NR; l < n; l++) {
        uint32_t F[2][KS][4];
        load_whh_fragments<KS>(F, P.L[l].w_hh, H, hp, j0, w, g, q);
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
            for (int s = 0; s < KS; s++)
                wsm[((((l - NR) * WARPS + w) * 2 + mt) * KS + s) * 32 + lane] =
                    make_uint4(F[mt][s][0], F[mt][s][1], F[mt][s][2], F[mt][s][3]);
    }
    for (int i = tid; i < n * nb; i += CH_THREADS) slen[i] = P.L[i / nb].len[i % nb];
    __syncthreads();
    /* steps each layer runs (its longest row), and the wavefront steps in all */
    int *const trun = slen + n * nb; /* [n] */
    int W = 0;
    for (int l = 0; l < n; l++) {
        int m = 0;
        for (int b = 0; b < nb; b++) m = slen[l * nb + b] > m ? slen[l * nb + b] : m;
        m = m < P.L[l].T ? m : P.L[l].T;
        if (m > 0) {
            const int e = P.L[l].off + (m - 1) * P.L[l].R + 1;
            W = e > W ? e : W;
        }
        if (tid == 0) trun[l] = m;
    }
    __syncthreads();
    /* the schedule, one wavefront step ahead, by lanes l < n of warp 1 (integer divisions by runtime
     * values cost ~30 instructions each: once per layer and step, not in every thread): sst[l] = layer l's
     * step at the current wavefront step (-1: none), spj[l] = the step whose chunk projection is due in the
     * shadow of this step's barrier (its chunk starts at the next wavefront step; -1: none); two copies by
     * the step's parity, so the next step's can be written while this step's projections read theirs */
    int *const sst = trun + n, *const spj = sst + 2 * n, *const spq = spj + 2 * n; /* [2][n] each */
    auto step_div = [&](int l, int wv) {
        const int d = wv - P.L[l].off;
        if (d < 0 || d % P.L[l].R) return -1;
        const int t = d / P.L[l].R;
        return t < trun[l] ? t : -1;
    };
    /* early: the schedule of step wv + 1 by the last warp while the cell warps work (it multiplies only);
     * otherwise by warp 1 after its cell */
    const bool early = P.early && n * nb < WARPS;
    const int sw = early ? WARPS - 1 : 1;
    /* spq: the projection passes [qb, qe) of chunk spj (qb | qe << 16). Whole chunks: every pass on the step
     * before the chunk starts. split: pass q (columns 8q .. 8q + 7 of the next chunk, ending at its local step
     * e_q) right after the layer's step e_q of the chunk before (its ring slots are read by then; the host's
     * layer offsets make its inputs complete by then), so no step carries more than ceil(nb / 8) + 1 passes
     * of a layer; chunk 0 whole, on the step before the layer starts */
    auto schedule = [&](int wv) {
        if (w == sw && lane < n) {
            const int t = step_div(lane, wv), t1 = step_div(lane, wv + 1);
            sst[(wv & 1) * n + lane] = t;
            int t0 = -1, qb = 0, qe = 0x7fff;
            if (lane > 0 && t1 >= 0 && (t1 == 0 || (!P.split && t1 % C == 0))) t0 = t1;
            else if (lane > 0 && P.split && t >= 0) {
                const int t0c = t / C * C, t0n = t0c + C;
                if (t0n < trun[lane]) {
                    const int cs = trun[lane] - t0n < C ? trun[lane] - t0n : C, ncols = cs * nb;
                    const int pc = P.pcols, np = (ncols + pc - 1) / pc, d = t - t0c;
                    qb = d * nb / pc;
                    qe = (d + 1) * nb / pc;
                    qe = qe < np - 1 ? qe : np - 1;
                    if ((ncols - 1) / nb == d) qe = np;
                    if (qb < qe) t0 = t0n;
                }
            }
            spj[(wv & 1) * n + lane] = t0;
            spq[(wv & 1) * n + lane] = qb | qe << 16;
        }
    };
    schedule(0);
    __syncthreads();
    auto step_of = [&](int l, int wv) { return sst[(wv & 1) * n + l]; }; /* wv: always the current step */

    /* the cell's warp: layer cl, row cb (warps n nb.. only multiply) */
    const bool cw = w < n * nb;
    const int cl = cw ? w / nb : 0, cb = cw ? w % nb : 0;
    const int gr = lane >> 3, ul = lane & 7, j = j0 + ul;
    const bool jv = j < H;
    const float bias_r = cw && jv ? P.L[cl].bias[gr * H + j] : 0.0f;
    const int clen = cw ? slen[cl * nb + cb] : 0;
    float c = 0.0f;
    const size_t hbs = (size_t)nb * hp;
    uint4 *const hw = (uint4 *)hs + (size_t)w * n * 8; /* HM 2: this warp's [n][8] pieces of 16 bytes (one row) */
    __half *const xin = P.xin + (size_t)blockIdx.x * n * C * nb * 32;

    auto project = [&](int ws) { /* the passes due (a call only when some are) */
        bool any = false;
        for (int l = 1; l < n; l++) any |= spj[((ws - 1) & 1) * n + l] >= 0;
        return any ? chip_project(P, ws, trun, spj, spq, part, xin, j0) : 0;
    };

    /* lab profile: thread 0's clock at the phases of each step (CH_PROF_WORDS words per step) */
    /* PROF only: run 1 read the clocks in every build (volatile reads), which cost ~0.3 ms at B = 1 */
#define CH_STAMP(i, expr)                                                                                               \
    do {                                                                                                                \
        if constexpr (PROF)                                                                                             \
            if (tid == 0 && wv < P.prof_steps) P.prof[((size_t)blockIdx.x * P.prof_steps + wv) * CH_PROF_WORDS + (i)] = (expr); \
    } while (0)
    auto clk = []() { return (unsigned)clock64(); };
    auto gtime = []() {
        unsigned long long g;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
        return (unsigned)g;
    };

    for (int wv = 0; wv < W; wv++) {
        CH_STAMP(0, clk());
        /* the cell's input projection, early (its latency under the products) */
        const int ct = cw ? step_of(cl, wv) : -1;
        float xv = 0.0f;
        if (ct >= 0 && ct < clen) {
            const clayer &L = P.L[cl];
            xv = cl == 0 ? (jv ? __half2float(__ldg(L.x + cb * L.ldx_b + (size_t)ct * P.g4 + gr * H + j)) : 0.0f)
                         : __half2float(__ldcg(xin + (((size_t)cl * C + ct % C) * nb + cb) * 32 + lane));
        }
        if (P.stage) { /* every layer's h rows in one round of copies, not one L2 round trip per layer */
            const int nch = hp / 8;
            for (int l = 0; l < n; l++) {
                const int t = step_of(l, wv);
                if (t <= 0) continue;
                const __half *src = P.hb + ((size_t)l * 2 + ((t - 1) & 1)) * hbs;
                for (int i = tid; i < nb * nch; i += CH_THREADS) {
                    const int b = i / nch, k = (i % nch) * 8;
                    cp_async16(hs + ((size_t)l * nb + b) * hp + k, src + (size_t)b * hp + k, t < slen[l * nb + b] ? 16 : 0);
                }
            }
            asm volatile("cp.async.wait_all;\n" ::: "memory");
            __syncthreads();
        }
        if constexpr (HM == 2) { /* one round of L2 loads for every layer's h (row 0), each warp its own K slice */
            uint4 hv[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int i = lane + 32 * r, l = i >> 3, k = 8 * (w * 2 * KS + (i & 7));
                hv[r] = make_uint4(0, 0, 0, 0);
                const int t = l < n ? step_of(l, wv) : 0;
                if (t > 0 && t < slen[l * nb] && k < H)
                    hv[r] = __ldcg((const uint4 *)(P.hb + ((size_t)l * 2 + ((t - 1) & 1)) * hbs + k));
            }
#pragma unroll
            for (int r = 0; r < 2; r++)
                if (lane + 32 * r < n * 8) hw[lane + 32 * r] = hv[r];
            __syncwarp();
        }
        /* the recurrent products: every layer's step of this wavefront step (register layers unrolled so
         * their fragments stay in registers; shared-memory layers in a plain loop, or every layer unrolled
         * with HOIST: then every layer's h loads are issued before the first product, one L2 round trip per
         * step instead of one per layer) */
        auto load_b = [&](int l, uint32_t(&Bf)[KS][2]) { /* whether layer l multiplies this step */
            const int t = step_of(l, wv);
            const bool live = t > 0; /* a step, and not the first (h = 0) */
            const __half *src = P.hb + ((size_t)l * 2 + ((t - 1) & 1)) * hbs;
            const bool rv = live && g < nb && t < slen[l * nb + (g < nb ? g : 0)];
#pragma unroll
            for (int v = 0; v < KS / 2; v++) {
                const int k = kch(v);
                uint4 d = make_uint4(0, 0, 0, 0);
                if (rv && k < H)
                    d = HM == 2    ? hw[l * 8 + 4 * v + q]
                        : P.stage ? *(const uint4 *)(hs + ((size_t)l * nb + g) * hp + k)
                                  : __ldcg((const uint4 *)(src + (size_t)g * hp + k));
                if (k + 8 > H) {
                    d.x = mask2(d.x, k, H), d.y = mask2(d.y, k + 2, H);
                    d.z = mask2(d.z, k + 4, H), d.w = mask2(d.w, k + 6, H);
                }
                Bf[2 * v][0] = d.x, Bf[2 * v][1] = d.y;
                Bf[2 * v + 1][0] = d.z, Bf[2 * v + 1][1] = d.w;
            }
            return live;
        };
        auto mma_store = [&](int l, const uint32_t(&Bf)[KS][2], auto afrag) {
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int s = 0; s < KS; s++) {
                    uint32_t a[4];
                    afrag(mt, s, a);
                    mma16816(acc, a, Bf[s][0], Bf[s][1]);
                }
                float *p = part + (((size_t)l * WARPS + w) * nb + 2 * q) * RS + mt * 16 + g;
                if (2 * q < nb) p[0] = acc[0], p[8] = acc[2];
                if (2 * q + 1 < nb) p[RS] = acc[1], p[RS + 8] = acc[3];
            }
        };
        /* a shared-memory layer: its 8 fragments read one ahead of the mma that uses them (volatile loads keep their
         * place among the volatile mma: 8 live registers, not 32; run 1's ncu found ~13 spill reloads per warp and
         * step of the register layers' fragments, which the hoisted shared loads had pushed out of registers) */
        auto mma_store_smem = [&](int l, const uint32_t(&Bf)[KS][2]) {
            const unsigned base = (unsigned)__cvta_generic_to_shared(wsm + ((size_t)((l - NR) * WARPS + w) * 2 * KS) * 32 + lane);
            auto addr = [&](int i) { return base + (unsigned)(((i & 1) * KS + (i >> 1)) * 32 * 16); }; /* i = 2 s + mt */
            float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
            uint32_t cur[4], nxt[4];
            lds128(cur, addr(0));
#pragma unroll
            for (int i = 0; i < 2 * KS; i++) {
                if (i + 1 < 2 * KS) lds128(nxt, addr(i + 1));
                mma16816(acc[i & 1], cur, Bf[i >> 1][0], Bf[i >> 1][1]);
#pragma unroll
                for (int e = 0; e < 4; e++) cur[e] = nxt[e];
            }
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                float *p = part + (((size_t)l * WARPS + w) * nb + 2 * q) * RS + mt * 16 + g;
                if (2 * q < nb) p[0] = acc[mt][0], p[8] = acc[mt][2];
                if (2 * q + 1 < nb) p[RS] = acc[mt][1], p[RS + 8] = acc[mt][3];
            }
        };
        if constexpr (HM == 1) {
            uint32_t Bh[CU_WAVE_MAX_LAYERS][KS][2];
            bool on[CU_WAVE_MAX_LAYERS];
#pragma unroll
            for (int l = 0; l < CU_WAVE_MAX_LAYERS; l++) on[l] = l < n && load_b(l, Bh[l]);
#pragma unroll
            for (int l = 0; l < NR; l++)
                if (on[l])
                    mma_store(l, Bh[l], [&](int mt, int s, uint32_t(&a)[4]) {
                        a[0] = A[l][mt][s][0], a[1] = A[l][mt][s][1], a[2] = A[l][mt][s][2], a[3] = A[l][mt][s][3];
                    });
#pragma unroll
            for (int l = NR; l < CU_WAVE_MAX_LAYERS; l++)
                if (on[l]) mma_store_smem(l, Bh[l]);
        } else {
#pragma unroll
            for (int l = 0; l < NR; l++) {
                uint32_t Bf[KS][2];
                if (l < n && load_b(l, Bf))
                    mma_store(l, Bf, [&](int mt, int s, uint32_t(&a)[4]) {
                        a[0] = A[l][mt][s][0], a[1] = A[l][mt][s][1], a[2] = A[l][mt][s][2], a[3] = A[l][mt][s][3];
                    });
            }
#pragma unroll 1
            for (int l = NR; l < n; l++) {
                uint32_t Bf[KS][2];
                if (load_b(l, Bf)) mma_store_smem(l, Bf);
            }
        }
        CH_STAMP(1, clk());
        __syncthreads();
        CH_STAMP(2, clk());
        if (early && w == sw) schedule(wv + 1); /* an idle warp, beside the cells */
        if (ct >= 0 && ct < clen) {
            float v = __fadd_rn(xv, bias_r);
            if (ct > 0) {
                const float *p = part + ((size_t)cl * WARPS * nb + cb) * RS + lane;
                float sum = p[0];
#pragma unroll
                for (int k = 1; k < WARPS; k++) sum = __fadd_rn(sum, p[(size_t)k * nb * RS]);
                v = __fadd_rn(v, sum);
            }
            const float ai = __shfl_sync(0xffffffffu, v, ul), af = __shfl_sync(0xffffffffu, v, 8 + ul);
            const float ag = __shfl_sync(0xffffffffu, v, 16 + ul), ao = __shfl_sync(0xffffffffu, v, 24 + ul);
            const float ig = gate_sig<HARD>(ai), fg = gate_sig<HARD>(af), gg = gate_tanh<HARD>(ag);
            const float og = gate_sig<HARD>(ao);
            const float cn = __fadd_rn(__fmul_rn(fg, c), __fmul_rn(ig, gg));
            const float hn = __fmul_rn(og, gate_tanh<HARD>(cn));
            c = cn;
            if (lane < 8 && jv) {
                const __half hh = __float2half_rn(hn);
                if (ct + 1 < clen) P.hb[((size_t)cl * 2 + (ct & 1)) * hbs + (size_t)cb * hp + j] = hh;
                P.L[cl].y[cb * P.L[cl].ldy_b + (size_t)ct * hp + j] = hh;
            }
        }
        if (!early) schedule(wv + 1); /* the other parity's copy: nothing reads it until the next step */
        if (wv + 1 < W) {
            __syncthreads();
            CH_STAMP(3, clk());
            if (tid == 0) red_release_add(P.ctl, 1u);
            CH_STAMP(9, clk()); /* the release's fence has waited for the block's stores */
            CH_STAMP(6, gtime());
            const int np = project(wv + 1); /* its inputs were complete at the barrier before this step */
            CH_STAMP(4, clk());
            CH_STAMP(8, (unsigned)np);
            if (tid == 0) spin_until(P.ctl, nblk * (unsigned)(wv + 1), 0, 1u << 27);
            CH_STAMP(5, clk());
            CH_STAMP(7, gtime());
            __syncthreads();
        }
    }
    __syncthreads();
    if (tid == 0) {
        __threadfence();
        unsigned *done = P.ctl + LINE;
        if (atomicAdd(done, 1u) == nblk - 1) { /* every block is past its last wait */
            P.ctl[0] = 0;
            *done = 0;
            __threadfence();
        }
    }
}

typedef void (*ckern_t)(cprm);
template <bool HARD, int NR, bool PROF>
ckern_t chip_kernel_hm(int hm)
{
    return hm == 1 ? k_wave_chip<HARD, NR, 1, PROF> : hm == 2 ? k_wave_chip<HARD, NR, 2, PROF> : k_wave_chip<HARD, NR, 0, PROF>;
}
/* prof: the clock-stamping build (soft activations only, the lab's profile) */
ckern_t chip_kernel(bool hard, int nr, int hm, bool prof = false)
{
    if (prof && !hard) return nr == 1 ? chip_kernel_hm<false, 1, true>(hm) : chip_kernel_hm<false, 2, true>(hm);
    return hard ? (nr == 1 ? chip_kernel_hm<true, 1, false>(hm) : chip_kernel_hm<true, 2, false>(hm))
                : (nr == 1 ? chip_kernel_hm<false, 1, false>(hm) : chip_kernel_hm<false, 2, false>(hm));
}
int chip_nr(int n) { return n < CH_NR ? n : CH_NR; }
int chip_part_floats(int n, int nb)
{
    int a = n * CH_WARPS * nb * RS, b = CH_WARPS * CH_PCOLS * RS;
    return a > b ? a : b;
}
size_t chip_smem(int n, int nb, int hp, int stage, int wstage = 0)
{
    return (size_t)(n - chip_nr(n)) * CH_WBYTES + (size_t)chip_part_floats(n, nb) * 4 +
           (stage ? (size_t)n * nb * hp * 2 : wstage ? (size_t)CH_WARPS * n * nb * 128 : 0) +
           (size_t)n * (nb + 7) * 4;
}

} // namespace



size_t lab_wave_chip_scratch_bytes(int n, int nb, int H, int hp, int chunk)
{
    if (chunk <= 0) chunk = CU_WAVE_CHUNK_DEFAULT;
    return 256 + (size_t)n * 2 * nb * hp * 2 + (size_t)cu_div_up(H, U) * n * chunk * nb * 32 * 2 + 16;
}



rnnt_status lab_wave_chip_ex(cudaStream_t stream, rnnt_lstm_act act, int nb, int n, const cu_wave_layer *layers,
                                 const lab_chip_opts *o, void *scratch, size_t scratch_bytes, char *err, size_t errlen)
{
    int chunk = o->chunk, stagger = o->stagger, stage = o->stage;
    if (nb <= 0 || n <= 0) return RNNT_OK;
    const int H = layers[0].H, hp = layers[0].hp;
    const int C = chunk > 0 ? chunk : CU_WAVE_CHUNK_DEFAULT;
    if (stagger < 0) stagger = C / 4;
    if (n > CU_WAVE_MAX_LAYERS || nb > CH_MAX_ROWS || n * nb > CH_WARPS || hp % 8 || H > CH_WARPS * 16 * CH_KS)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: on-chip wavefront of %d layers, %d rows, H %d not supported",
                          n, nb, H);
    for (int l = 0; l < n; l++) {
        const cu_wave_layer *L = &layers[l];
        if (L->H != H || L->hp != hp || L->g4 != layers[0].g4)
            return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: wavefront layers differ in size");
        if (l > 0 && (L->stack_in < 1 || L->in_w != L->stack_in * hp || L->T * L->stack_in > layers[l - 1].T || !L->w_ih))
            return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: wavefront layer %d: input %d != %d x %d", l, L->in_w,
                              L->stack_in, hp);
    }
    if (scratch_bytes < lab_wave_chip_scratch_bytes(n, nb, H, hp, C) - 16 || (uintptr_t)scratch % 16)
        return cu_set_err(err, errlen, RNNT_ERR_INVALID, "cuda: on-chip wavefront scratch of %zu bytes too small", scratch_bytes);
    const int nblk = cu_div_up(H, U), nr = chip_nr(n);
    int optin = 0, dev0;
    CU_TRY(cudaGetDevice(&dev0));
    CU_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev0));
    /* staging measured slower (lab run 1: B = 1 3.55 vs 2.91 ms): only when asked for (1) */
    stage = stage == 1 && chip_smem(n, nb, hp, 1) <= (size_t)optin;
    /* wstage at one row, where the per-warp buffers fit (5 layers of 1024: 10 KB beside 203 KB) */
    const int wstage = !stage && nb == 1 && (o->opt & LAB_CHIP_WSTAGE) && chip_smem(n, nb, hp, 0, 1) <= (size_t)optin;
    const size_t smem = chip_smem(n, nb, hp, stage, wstage);
    const int hm = wstage ? 2 : o->opt & LAB_CHIP_HOIST ? 1 : 0;
    ckern_t kern = chip_kernel(act == RNNT_ACT_HARD, nr, hm, o->prof != NULL);
    CU_TRY(cu_allow_max_smem((const void *)kern));
    int per_sm = 0, dev, sms = 0;
    CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, CH_THREADS, smem));
    CU_TRY(cudaGetDevice(&dev));
    CU_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (per_sm * sms < nblk)
        return cu_set_err(err, errlen, RNNT_ERR_UNSUPPORTED, "cuda: on-chip wavefront needs %d co-resident blocks, %d fit", nblk,
                          per_sm * sms);
    cprm P = {};
    int off = 0, R = 1;
    for (int l = 0; l < n; l++) {
        const cu_wave_layer *L = &layers[l];
        const int s = l > 0 ? L->stack_in : 1;
        /* chunk 0's inputs done two steps before it starts; split passes need stagger >= R_l - 1 (NOTES) */
        const int st = o->opt & LAB_CHIP_SPLIT_PROJ && stagger < R * s - 1 ? R * s - 1 : stagger;
        if (l > 0) off += (C * s - 1) * R + 2 + st;
        R *= s;
        P.L[l].w_hh = L->w_hh, P.L[l].w_ih = L->w_ih, P.L[l].x = L->x, P.L[l].bias = L->bias, P.L[l].len = L->len;
        P.L[l].y = L->y, P.L[l].ldx_b = L->ldx_b, P.L[l].ldy_b = L->ldy_b, P.L[l].T = L->T, P.L[l].in_w = L->in_w;
        P.L[l].s = s, P.L[l].off = off, P.L[l].R = R;
        /* y is written for steps < len only: the rest (and the pad columns) are zero */
        CU_TRY(cudaMemset2DAsync(L->y, L->ldy_b * 2, 0, (size_t)L->T * hp * 2, (size_t)nb, stream));
    }
    P.n = n, P.nb = nb, P.H = H, P.hp = hp, P.g4 = layers[0].g4, P.chunk = C, P.part_floats = chip_part_floats(n, nb);
    P.stage = stage;
    P.early = (o->opt & LAB_CHIP_EARLY_SCHED) != 0;
    P.split = (o->opt & LAB_CHIP_SPLIT_PROJ) != 0;
    P.pcols = o->opt & LAB_CHIP_WIDE_PASS ? 2 * CH_PCOLS : CH_PCOLS;
    P.prof = o->prof;
    P.prof_steps = o->prof ? o->prof_steps : 0;
    P.ctl = (unsigned *)scratch;
    P.hb = (__half *)((char *)scratch + 256);
    P.xin = P.hb + (size_t)n * 2 * nb * hp;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)nblk);
    cfg.blockDim = dim3(CH_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CU_TRY(cudaLaunchKernelEx(&cfg, kern, P));
    return RNNT_OK;
}
