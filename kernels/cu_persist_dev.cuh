/* cu_persist_dev.cuh — device helpers of the persistent LSTM recurrences, shared by cu_persist.cu (one
 * layer) and cu_wave.cu (a wavefront of layers): the fp16 tensor-core MMA, the release/acquire
 * counters blocks wait on, and the W_hh fragments a block keeps in registers. One
 * definition each, so both kernels compute the same bits. Included by those two files only. */
#ifndef RNNT_CU_PERSIST_DEV_CUH
#define RNNT_CU_PERSIST_DEV_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "cu_device.cuh" /* the gate activations gate_sig, gate_tanh */

namespace {

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void red_release_add(unsigned *p, unsigned v)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
/* Spin until *p >= target, sleeping backoff ns between polls (0: spin); after max_spins polls a lost
 * block traps instead of hanging. */
__device__ __forceinline__ void spin_until(const unsigned *p, unsigned target, int backoff, unsigned max_spins)
{
    for (unsigned spins = 0; ld_acquire(p) < target; spins++) {
        if (spins > max_spins) __trap();
        if (backoff) __nanosleep(backoff);
    }
}

__device__ __forceinline__ uint32_t pack2(__half lo, __half hi)
{
    return (uint32_t)__half_as_ushort(lo) | ((uint32_t)__half_as_ushort(hi) << 16);
}
/* zero the halves of a 32-bit pair whose K index (k, k + 1) is >= H */
__device__ __forceinline__ uint32_t mask2(uint32_t v, int k, int H)
{
    return k >= H ? 0u : (k + 1 >= H ? (v & 0xffffu) : v);
}

/* The W_hh fragments of the block of units j0.. (U = 8 units, 32 gate rows) in registers, for KS k16
 * steps of warp w: row R of the block is gate R / 8 of unit j0 + R % 8. This thread's K values are
 * KS / 2 chunks of 8 (16 bytes), chunk v at kch(v) = 8 (w * 2KS + 4v + q) (the four lanes of a row
 * read 64 contiguous bytes per load); step s = 2v + e uses K = kch(v) + 4e + {0, 1} as the fragment's
 * columns 2q, 2q+1 and kch(v) + 4e + {2, 3} as 2q+8, 2q+9 (the same permutation as the B side, so the
 * dot products are unchanged). Rows and K past H are zero. */
template <int KS>
__device__ __forceinline__ void load_whh_fragments(uint32_t (&A)[2][KS][4], const __half *whh, int H, int hp, int j0,
                                                   int w, int g, int q)
{
    auto kch = [&](int v) { return 8 * (w * (2 * KS) + 4 * v + q); };
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
        const int R0 = mt * 16 + g, R1 = R0 + 8;
        const int ja = j0 + (R0 & 7), jb = j0 + (R1 & 7);
        const __half *ra = whh + (size_t)((R0 >> 3) * H + ja) * hp, *rb = whh + (size_t)((R1 >> 3) * H + jb) * hp;
        const __half z = __float2half_rn(0.0f);
#pragma unroll
        for (int s = 0; s < KS; s++) {
            const int k = kch(s >> 1) + 4 * (s & 1);
            __half va[4], vb[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                va[e] = ja < H && k + e < H ? ra[k + e] : z;
                vb[e] = jb < H && k + e < H ? rb[k + e] : z;
            }
            A[mt][s][0] = pack2(va[0], va[1]);
            A[mt][s][1] = pack2(vb[0], vb[1]);
            A[mt][s][2] = pack2(va[2], va[3]);
            A[mt][s][3] = pack2(vb[2], vb[3]);
        }
    }
}

} // namespace

#endif
