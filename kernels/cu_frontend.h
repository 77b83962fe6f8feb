/* cu_frontend.h — the model's feature frontend on the GPU (the twin of engine/frontend.c, whose tables
 * it uses): a batch's PCM (float or 16-bit, per utterance) is staged into pinned memory and sent to the
 * device in chunks (cu_stage.h), then, on the runner's stream, written as packed [frame][F] rows where
 * the encoder reads its raw features. Two paths:
 *   fused (n_fft a power of two, 4..4096; the default there): one kernel, each block a few frames held
 *     in shared memory from PCM to features: pre-emphasis + framing + window, our own Stockham FFT
 *     (cu_fe_fft.h, with a CPU twin test), |X|^power + the sparse mel filterbank (accumulated in
 *     double, in the CPU's order) + ln(max(., log_floor)). Device memory sees the PCM read and the
 *     features written, nothing else.
 *   cufft (other n_fft, or RNNT_CUDA_FE=cufft at create): per chunk of frames, pre-emphasis + framing +
 *     window + zero padding (one kernel), cuFFT's batched real FFT of n_fft, |X|^power + filterbank +
 *     log (one kernel): ~8.5 KB of device traffic per frame.
 *
 * Every float operation the CPU rounds separately is rounded separately here too (no contraction into
 * FMAs), so the features differ from the CPU's only by the FFT's and logf's rounding.
 *
 * Buffers for PCM grow with the largest batch seen (a frontend of max_batch x max_frames would pin
 * 2x the encoder's raw feature buffer); the FFT buffers are a fixed chunk of frames. Dither and an
 * n_fft with a prime factor above 7 (cufft path) are not supported (create says RNNT_ERR_UNSUPPORTED; the runner
 * then uses the CPU frontend). One thread at a time per frontend. */
#ifndef RNNT_CU_FRONTEND_H
#define RNNT_CU_FRONTEND_H

#include "backend.h"
#include "cu_common.h"

typedef struct cu_audio_fe cu_audio_fe;

/* fe: the CPU frontend (its tables are copied; fe may be freed afterwards). stage_helpers: as
 * cu_encoder_params.stage_helpers (0 default, -1 none). */
rnnt_status cu_audio_fe_create(const rnnt_frontend *fe, cudaStream_t stream, int stage_helpers, cu_audio_fe **out,
                               char *err, size_t errlen);
void cu_audio_fe_free(cu_audio_fe *f);

/* Uploads in[0..n) (validated by the runner) and enqueues on the frontend's stream the features of
 * utterance i into out_dev rows [row_off[i], row_off[i] + frames[i]) (F floats each), row_off being
 * the prefix sums of frames. Returns when every transfer and kernel is enqueued. */
rnnt_status cu_audio_fe_run(cu_audio_fe *f, int n, const rnnt_audio_input *in, const int *frames, float *out_dev,
                            char *err, size_t errlen);
/* "fused" (fe_fused_kernel) or "cufft" (three passes around cuFFT's batched R2C). */
const char *cu_audio_fe_path(const cu_audio_fe *f);
/* GPU time of the last run's kernels (after the stream has passed them), in ms. */
rnnt_status cu_audio_fe_last_ms(cu_audio_fe *f, float *ms, char *err, size_t errlen);

#endif
