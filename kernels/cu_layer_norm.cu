/* cu_layer_norm.cu — see cu_layer_norm.h. One warp per row: each lane sums its columns in double, the
 * warp reduces by shuffles, then every lane normalises its columns. */
#include "cu_layer_norm.h"

#include "model.h"

namespace {

const int kWarpsPerBlock = 8;

__device__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void k_layer_norm_rows(int nb, int steps, int R, int ld, T *y, size_t ldy_b, const int *len, const float *w,
                                  const float *bias)
{
    int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= nb * steps) return;
    int b = row / steps, t = row % steps;
    T *p = y + (size_t)b * ldy_b + (size_t)t * ld;
    if (t >= len[b]) {
        for (int j = lane; j < ld; j += 32) cu_st(p + j, 0.0f);
        return;
    }
    double s = 0.0;
    for (int j = lane; j < R; j += 32) s += cu_ld(p + j);
    float mean = (float)(warp_sum(s) / R);
    double ss = 0.0;
    for (int j = lane; j < R; j += 32) {
        float d = cu_ld(p + j) - mean;
        ss += (double)d * d;
    }
    float rstd = (float)(1.0 / sqrt(warp_sum(ss) / R + (double)RNNT_LAYER_NORM_EPS));
    for (int j = lane; j < R; j += 32) cu_st(p + j, (cu_ld(p + j) - mean) * rstd * w[j] + bias[j]);
}

} // namespace

rnnt_status cu_layer_norm_rows(cudaStream_t stream, cu_dtype dt, int nb, int T, int R, int ld, void *y, size_t ldy_b,
                               const int *len, const float *w, const float *b, char *err, size_t errlen)
{
    if (nb <= 0 || T <= 0) return RNNT_OK;
    int rows = nb * T, blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (dt == CU_F16)
        k_layer_norm_rows<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(nb, T, R, ld, (__half *)y, ldy_b, len, w, b);
    else
        k_layer_norm_rows<<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(nb, T, R, ld, (float *)y, ldy_b, len, w, b);
    CU_TRY_LAUNCH();
    return RNNT_OK;
}
