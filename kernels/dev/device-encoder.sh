#!/bin/bash
# On the GPU machine, from the repository root, after kernels/dev/stage-encoder.sh here and a `run` carrying
# .gpu/encoder: the GEMM + cell step kernel (cu_mma_step.cu) checked and measured. Logs in $OUT.
#   bash .gpu/encoder/device-encoder.sh STEPS    STEPS: comma list of
#   env,tests,quick,lab,labmma,encoder,ncu,sanitize,race,engine,steps,lstreams,lsengine
# tests: test_cuda_kernels in full; quick: RNNT_TEST_QUICK=1 (RNNT_TEST_ONLY=glob picks tests in both); lab: lab_lstm_layer (checks + every table);
# labmma: its checks and the full-length table only (variants 2, 9-12 at B >= 32); encoder: bench_encoder
# (ours vs cuDNN, mma table); ncu: the mma step kernel at B = 64 and 256 (lab single-shape mode);
# sanitize: memcheck + racecheck on test_cuda_kernels (quick); race: racecheck on test_mma_step alone (quick);
# engine: bench_engine (packed with EXTRA_BINS) on the shipped model, default vs RNNT_CUDA_MMA_STEP=1.
set -u
steps=${1:-env,tests,lab,encoder}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/ge cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
if has env; then { log env; nvidia-smi; for b in $B/*; do ldd $b | grep -i "not found"; done; } > "$OUT/env.log" 2>&1; grep -E "H100|H200|Driver" "$OUT/env.log" | head -3; fi
for t in tests quick; do
  has $t || continue
  q=0; [ $t = quick ] && q=1
  { log "test_cuda_kernels RNNT_TEST_QUICK=$q"; RNNT_TEST_QUICK=$q timeout $(tmo 150) $B/test_cuda_kernels; echo "exit $?"; } > "$OUT/tests.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|mma|\[  FAILED|ERROR" "$OUT/tests.log" | cut -c1-260
done
if has lab || has labmma; then
  v=""; has labmma && ! has lab && v=9
  log "lab_lstm_layer $v"; timeout $(tmo 150) $B/lab_lstm_layer $v > "$OUT/lab.log" 2>&1; echo "exit $?"
  grep -E "FAIL|checks:|^\| 1024 \| [0-9]+ \|" "$OUT/lab.log" | cut -c1-200 | head -70
fi
if has encoder; then
  log bench_encoder; timeout $(tmo 240) $B/bench_encoder > "$OUT/bench_encoder.log" 2>&1; echo "exit $?"
  grep -E "^device|^\| 5 x|^\| 4 x|Per-step layers" "$OUT/bench_encoder.log" | cut -c1-330
fi
if has ncu && command -v ncu >/dev/null; then
  { for b in 64 256; do log "ncu k_mma_step B=$b"; timeout $(tmo 60) ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats -k regex:k_mma_step -s 20 -c 1 $B/lab_lstm_layer 9 1024 $b 300; done; } > "$OUT/ncu.log" 2>&1
  grep -E "^== |Duration|Throughput|Stall|Warp Cycles|L2 Hit|Registers|Achieved Occ|Grid Size" "$OUT/ncu.log" | cut -c1-150 | head -50
fi
if has sanitize; then
  { log "memcheck test_cuda_kernels (quick)"; RNNT_TEST_QUICK=1 timeout $(tmo 120) compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
    log "racecheck test_cuda_kernels (quick)"; RNNT_CUDA_MAPPED=0 RNNT_TEST_QUICK=1 timeout $(tmo 150) compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
  } > "$OUT/sanitize.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize.log" | head -20
fi
if has steps; then  # the step-kernel checks and the encoder test alone, in full
  { for t in test_fused test_mma_step test_encoder; do
      log "test_cuda_kernels $t"; RNNT_TEST_ONLY=$t timeout $(tmo 90) $B/test_cuda_kernels; echo "exit $?"
    done; } > "$OUT/steps.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|mma step|fused recurrent|k-enc-.*mma=1" "$OUT/steps.log" | cut -c1-220
fi
if has lstreams; then  # layer streams (cu_encoder_params.lstreams): the encoder test in full, the bench (--fast),
  # memcheck on the encoder test, the engine test with every runner on layer streams
  { log "test_cuda_kernels test_encoder (full)"; RNNT_TEST_ONLY=test_encoder timeout $(tmo 150) $B/test_cuda_kernels; echo "exit $?"; } > "$OUT/lstreams-test.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|lstream chunk=[1-9]|error" "$OUT/lstreams-test.log" | cut -c1-240
  log "bench_encoder --fast"; timeout $(tmo 240) $B/bench_encoder --fast ${BENCH_REPS:+--reps $BENCH_REPS} > "$OUT/bench_encoder.log" 2>&1; echo "exit $?"
  grep -E "^device|^\| 5 x|^\| 4 x|wavefront over streams" "$OUT/bench_encoder.log" | cut -c1-330
  { log "memcheck test_encoder (quick)"; RNNT_TEST_ONLY=test_encoder RNNT_TEST_QUICK=1 timeout $(tmo 150) compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -6; echo "exit ${PIPESTATUS[0]}"; } > "$OUT/lstreams-memcheck.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|PASSED|FAILED" "$OUT/lstreams-memcheck.log"
  if [ -x $B/test_cuda_engine ]; then
    { log "test_cuda_engine RNNT_CUDA_LSTREAMS=1 RNNT_CUDA_PERSIST=0 (quick)"; RNNT_CUDA_LSTREAMS=1 RNNT_CUDA_PERSIST=0 RNNT_TEST_QUICK=1 timeout $(tmo 150) $B/test_cuda_engine; echo "exit $?"; } > "$OUT/lstreams-engine.log" 2>&1
    grep -E "^== |exit |PASSED|FAILED|identical|error" "$OUT/lstreams-engine.log" | cut -c1-200 | head -30
  fi
fi
if has lsengine && [ -x $B/bench_engine ]; then  # whole engine, shipped model: default (layer streams at B >= 64) vs off
  { for setting in "default RNNT_TEST_QUICK=0" "off RNNT_CUDA_LSTREAMS=0"; do
      set -- $setting
      log "bench_engine models/en-char-small, $1 ($2)"
      env $2 timeout $(tmo 60) $B/bench_engine models/en-char-small --batches 64,256 --seconds 10 --reps 7 --extras 0; echo "exit $?"
    done; } > "$OUT/bench_engine.log" 2>&1
  grep -E "^== |^\| [0-9]|exit" "$OUT/bench_engine.log" | cut -c1-200
fi
if has race; then
  { log "racecheck test_mma_step (quick)"; RNNT_TEST_ONLY=test_mma_step RNNT_TEST_QUICK=1 timeout $(tmo 60) compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -6; echo "exit ${PIPESTATUS[0]}"; } > "$OUT/race.log" 2>&1
  grep -E "^== |exit |RACECHECK SUMMARY|PASSED|FAILED|mma" "$OUT/race.log"
fi
if has engine && [ -x $B/bench_engine ]; then
  { for setting in "default RNNT_TEST_QUICK=0" "mma RNNT_CUDA_MMA_STEP=1"; do
      set -- $setting
      log "bench_engine models/en-char-small, $1 ($2)"
      env $2 timeout $(tmo 40) $B/bench_engine models/en-char-small --batches 32,256 --seconds 10 --reps 7 --extras 0; echo "exit $?"
    done; } > "$OUT/bench_engine.log" 2>&1
  grep -E "^== |^\| [0-9]|exit" "$OUT/bench_engine.log" | cut -c1-200
fi
log done
