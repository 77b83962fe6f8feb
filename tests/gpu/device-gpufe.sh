#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-gpufe.sh here and a `run` carrying
# .gpu/gpufe: issue 12 (the frontend on the GPU, PCM from the daemon, CUDA confidences). Logs go to $OUT.
#   bash .gpu/gpufe/device-gpufe.sh STEPS   STEPS: comma list of
#   env,test,kernels,bench,engine,daemon,mlperf,memcheck
# env: the machine and missing libraries (cuFFT comes from the machine: the toolkit or the nvidia.cufft
# wheel); test: test_cuda_frontend (both GPU paths: fused, cufft); kernels: test_cuda_kernels (the
# joint's label probabilities against the CPU); bench: bench_engine --audio 1 on the shipped model, 10 s
# utterances, batches 1, 32, 256, fp16 and fp32 (fused frontend), then fp16 batch 256 with
# RNNT_CUDA_FE=cufft (the three-pass path) for comparison; engine: test_cuda_engine (RNNT_TEST_QUICK=1,
# plus the shipped model: fp32 token probabilities and word confidences against the CPU); daemon:
# tests/gpu/daemon_audio.py (sample WAVs over HTTP, CPU vs CUDA fp32/fp16 daemons); mlperf: the random
# MLPerf-shaped model (models/rnntd_ref) and bench_engine --audio 1 on it; memcheck:
# compute-sanitizer memcheck on test_cuda_frontend.
set -u
steps=${1:-env,test,kernels,bench,engine,daemon,mlperf,memcheck}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/gf cudnn cublas cuda_runtime cufft
if ldd $B/test_cuda_frontend | grep -q "libcufft.*not found"; then  # look wherever a wheel or toolkit put it
  lib=$(find / -xdev -name 'libcufft.so.12*' 2>/dev/null | head -1)
  [ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib"):$LD_LIBRARY_PATH && echo "cuFFT from $lib"
fi
export RNNT_TEST_DATA=$PWD/tests/data
MODEL=/tmp/mlperf
M=models/en-char-small

if has env; then
  { log env; nvidia-smi; nproc; free -g | head -2; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for b in $B/*; do echo "$b:"; ldd $b | grep -iE "not found|cufft|cublas|cudart"; done; } > "$OUT/env.log" 2>&1
  grep -E "H100|H200|Driver|^[0-9]+$|not found|cufft" "$OUT/env.log" | head -12
fi

if has test; then
  { log test_cuda_frontend; timeout $(tmo 150) $B/test_cuda_frontend; echo "exit $?"; } > "$OUT/test_frontend.log" 2>&1
  cut -c1-300 "$OUT/test_frontend.log" | tail -40
fi

if has kernels; then
  { log test_cuda_kernels; timeout $(tmo 120) $B/test_cuda_kernels; echo "exit $?"; } > "$OUT/test_kernels.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|FAIL|probabilit|ERROR" "$OUT/test_kernels.log" | cut -c1-260 | tail -20
fi

if has bench; then
  { for prec in fp16 fp32; do
      log "bench_engine $M --audio 1 --precision $prec"
      timeout $(tmo 90) $B/bench_engine $M --batches 1,32,256 --seconds 10 --reps 9 --audio 1 --precision $prec; echo "exit $?"
    done
    log "bench_engine $M --audio 1, RNNT_CUDA_FE=cufft (the three-pass cuFFT path)"
    RNNT_CUDA_FE=cufft timeout $(tmo 60) $B/bench_engine $M --batches 256 --seconds 10 --reps 9 --audio 1; echo "exit $?"
    } > "$OUT/bench_audio.log" 2>&1
  grep -E "^== |^\| [0-9]|exit|^Engine|^model" "$OUT/bench_audio.log" | cut -c1-300
fi

if has engine; then
  { log "test_cuda_engine (RNNT_TEST_QUICK=1, RNNT_GPU_MODELS=$M)"
    RNNT_GPU_MODELS=$PWD/$M RNNT_TEST_QUICK=1 timeout $(tmo 150) $B/test_cuda_engine; echo "exit $?"; } > "$OUT/test_engine.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|identical|ERROR|differ|probabilit" "$OUT/test_engine.log" | cut -c1-300
fi

if has daemon; then
  { log "daemon_audio.py: sample WAVs over HTTP, CPU vs CUDA daemons"
    timeout $(tmo 150) python3 "$H/daemon_audio.py" $B/rnntd $M "$OUT/daemon"; echo "exit $?"; } > "$OUT/daemon_audio.log" 2>&1
  cut -c1-250 "$OUT/daemon_audio.log" | tail -24
fi

if has mlperf; then
  log "random MLPerf-shaped model"
  (cd models && timeout $(tmo 120) python3 -m rnntd_ref.random_model --preset mlperf --seed 1 --out $MODEL) > "$OUT/mlperf_model.log" 2>&1
  tail -2 "$OUT/mlperf_model.log"
  if [ -f $MODEL/model.yaml ]; then
    { log "bench_engine $MODEL --audio 1"; timeout $(tmo 90) $B/bench_engine $MODEL --batches 1,32,256 --seconds 10 --reps 9 --audio 1
      echo "exit $?"; } > "$OUT/bench_audio_mlperf.log" 2>&1
    grep -E "^== |^\| [0-9]|exit|^Engine|^model" "$OUT/bench_audio_mlperf.log" | cut -c1-300
  fi
fi

if has memcheck; then
  { log "compute-sanitizer --tool memcheck test_cuda_frontend"
    OPENBLAS_NUM_THREADS=1 timeout $(tmo 150) compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_frontend 2>&1 | tail -30
    echo "exit ${PIPESTATUS[0]}"; } > "$OUT/memcheck.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log"
fi
log done
