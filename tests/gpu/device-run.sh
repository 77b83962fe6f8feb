#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-device.sh here and a `run` carrying
# .gpu/cuda-backend: GPU tests, compute-sanitizer (memcheck, racecheck) on the quick GPU tests, the
# kernel lab, the encoder benchmark against cuDNN and the whole-engine benchmark on a random
# MLPerf-shaped model. Logs go to $OUT (at most 8 files come back).
#   tests/gpu/device-run.sh [STEPS]   STEPS: comma list of env,model,tests,lab,encoder,engine,sanitize,ncu (default
#   all, in that order); each step's timeout is cut to what is left of BUDGET_S (default 560 s).
set -u
steps=${1:-env,model,tests,lab,encoder,engine,sanitize,ncu}
source tests/gpu/device-common.sh
open_pack .gpu/cuda-backend/pack.tar.xz /tmp/cb cudnn cublas cuda_runtime   # cuDNN for bench_encoder's comparison
export RNNT_TEST_DATA=$PWD/tests/data

if has env; then
  { log env; nvidia-smi; nvcc --version | tail -1; compute-sanitizer --version | head -1
    for b in $B/*; do echo "$b:"; ldd $b | grep -i "not found"; done; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; } > "$OUT/env.log" 2>&1
  tail -5 "$OUT/env.log"
fi

MODEL=/tmp/mlperf
if has model; then
  log "random MLPerf-shaped model"
  (cd models && timeout $(tmo 240) python3 -m rnntd_ref.random_model --preset mlperf --seed 1 --out $MODEL) > "$OUT/model.log" 2>&1
  tail -3 "$OUT/model.log"
fi

if has tests; then
  { log test_cuda_kernels; timeout $(tmo 150) $B/test_cuda_kernels; echo "exit $?"
    log test_cuda_engine; export RNNT_GPU_MODELS=models/en-char-small; [ -f $MODEL/model.yaml ] && RNNT_GPU_MODELS=$MODEL:$RNNT_GPU_MODELS
    timeout $(tmo 240) $B/test_cuda_engine; echo "exit $?"
    P=.gpu/cuda-backend/parity
    for list in $P/samples.tsv $P/test-clean.tsv; do
      [ -f $list ] || continue
      log "bench_parity shipped model on $list"; timeout $(tmo 90) $B/bench_parity models/en-char-small $list --batch 32; echo "exit $?"
    done; } > "$OUT/tests.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|\[  FAILED|fp16 vs|identical|ERROR|^\| |WER" "$OUT/tests.log" | cut -c1-300
fi

if has lab; then
  log lab; timeout $(tmo 90) $B/lab_lstm_layer > "$OUT/lab.log" 2>&1; echo "exit $?"; cat "$OUT/lab.log"
fi

if has encoder; then
  log bench_encoder; timeout $(tmo 180) $B/bench_encoder > "$OUT/bench_encoder.log" 2>&1; echo "exit $?"; cat "$OUT/bench_encoder.log"
fi

if has engine && [ -f $MODEL/model.yaml ]; then
  { log bench_engine; timeout $(tmo 150) $B/bench_engine $MODEL --batches 1,32,256 --seconds 10 --reps 5; echo "exit $?"
    log "bench_engine with RNNT_CUDA_FUSED=1 (runners of <= 32 utterances use the fused step kernel)"
    RNNT_CUDA_FUSED=1 timeout $(tmo 60) $B/bench_engine $MODEL --batches 1,32 --seconds 10 --reps 5; echo "exit $?"
    log "bench_engine on the shipped model"
    timeout $(tmo 60) $B/bench_engine models/en-char-small --batches 1,32,256 --seconds 10 --reps 5; echo "exit $?"
  } > "$OUT/bench_engine.log" 2>&1
  cat "$OUT/bench_engine.log"
fi
if has sanitize; then
  # racecheck crashed (SIGSEGV) on kernels writing mapped host memory: its engine run uses RNNT_CUDA_MAPPED=0
  { for tool in ${SAN_TOOLS:-memcheck racecheck}; do
      for t in ${SAN_TESTS:-test_cuda_kernels test_cuda_engine}; do
        mapped=1; [ $tool = racecheck ] && mapped=0
        log "compute-sanitizer --tool $tool $t (RNNT_TEST_QUICK=1 RNNT_CUDA_MAPPED=$mapped OPENBLAS_NUM_THREADS=1)"
        OPENBLAS_NUM_THREADS=1 RNNT_CUDA_MAPPED=$mapped RNNT_TEST_QUICK=1 timeout $(tmo 120) compute-sanitizer --tool $tool --error-exitcode 9 $B/$t 2>&1 | tail -25
        echo "exit ${PIPESTATUS[0]}"
      done
    done; } > "$OUT/sanitize.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize.log"
fi

if has ncu; then
  { log "ncu: persistent kernel, H=1024 B=1 T=300"
    timeout $(tmo 90) ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section WarpStateStats -k regex:k_lstm_persist -c 1 $B/lab_lstm_layer 3 1024 1 300
    log "ncu: per-step path, H=1024 B=256 (GEMM + cell kernel of two steps)"
    timeout $(tmo 90) ncu --clock-control none --section SpeedOfLight --section LaunchStats --launch-skip 20 -c 4 \
      $B/lab_lstm_layer 1 1024 256 30
    log "ncu: per-step path, H=1024 B=1"
    timeout $(tmo 60) ncu --clock-control none --section SpeedOfLight --section LaunchStats --launch-skip 20 -c 4 \
      $B/lab_lstm_layer 1 1024 1 30; } > "$OUT/ncu.log" 2>&1
  grep -E "^== |Duration|Compute \(SM\) Throughput|Memory Throughput|Grid Size|  [a-z_0-9]+.*\(|Function Name" "$OUT/ncu.log" | cut -c1-160 | head -60
fi

log done
