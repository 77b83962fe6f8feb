/* multiblank.h — the multi-blank rule (FORMAT.md, stage 6; NeMo's convention), in one place for the CPU
 * backend, every CUDA decoder (kernels/cu_device.cuh) and the tests' host models: which joint output is
 * which big blank, how far each output moves the decoder, and what a skip past the last frame counts.
 * The PyTorch twin is models/rnntd_ref/config.py (ModelConfig.advance, frames_skipped).
 * Plain C and CUDA both read it: under nvcc every function is __host__ __device__.
 * Thread safety: pure functions of their arguments. */
#ifndef RNNT_MULTIBLANK_H
#define RNNT_MULTIBLANK_H

#if defined(__CUDACC__)
#define RNNT_HOST_DEVICE __host__ __device__
#else
#define RNNT_HOST_DEVICE
#endif

/* The joint's outputs: tokens [0, V), then the big blanks, then the blank (output `blank` = V + n);
 * big blank i (durations[i], in model.yaml's order) is output blank - 1 - i.
 * Frames the decoder moves on after joint output k (0 <= k <= blank): 0 for a label (it stays on its
 * frame until max_symbols labels were emitted there), 1 for the blank, durations[i] for big blank i. */
static inline RNNT_HOST_DEVICE int rnnt_mb_advance(int k, int vocab, int blank, const int *durations)
{
    if (k < vocab) return 0;
    if (k == blank) return 1;
    return durations[blank - 1 - k];
}

/* A big blank may jump past the last of the T encoder frames: the frames of that jump beyond the end
 * (t_next - T) are not counted in frames_skipped, which counts, for each move of d frames, the d - 1
 * frames after the first that exist. */
static inline RNNT_HOST_DEVICE int rnnt_mb_past_end(int t_next, int T) { return t_next > T ? t_next - T : 0; }

#endif
