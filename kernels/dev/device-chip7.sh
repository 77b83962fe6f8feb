#!/bin/bash
# On the GPU machine, from the repository root, after kernels/dev/stage-chip7.sh here and a `run` carrying .gpu/enc7:
# the on-chip layer wavefront of session 7 (issue 16 §1): bench_encoder at B 1, 2, 3 (same process as cuDNN; the wave
# column is the on-chip kernel, RNNT_CUDA_WAVE_CHIP=1) with the lean projection (the build's default) and without it
# (RNNT_CUDA_WAVE_CHIP_LEAN=0, session 5's kernel), the lab checks + bench of variants $LAB_VARIANTS, the GPU kernel
# tests (quick; test_encoder_chip also with RNNT_CUDA_WAVE_CHIP_LEAN=0), memcheck on variant 23's checks.
# Files back: tests.log bench.log lab.log.
#   BUDGET_S=150 bash .gpu/enc7/device-chip7.sh [STEPS]      STEPS: comma list of env,encoder,lab,tests,memcheck
set -u
steps=${1:-env,encoder,lab,tests,memcheck}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/gc cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
export LAB_VARIANTS=${LAB_VARIANTS:-1,7,23,24}
T=$OUT/tests.log
if has env; then { log env; nvidia-smi; for b in $B/*; do ldd $b | grep -i "not found"; done; } >> "$T" 2>&1; grep -E "H100|H200|Driver" "$T" | head -3; fi
if has encoder; then
  { for lean in 1 0 1; do
      log "bench_encoder RNNT_CUDA_WAVE_CHIP=1 RNNT_CUDA_WAVE_CHIP_LEAN=$lean"
      RNNT_CUDA_WAVE_CHIP_LEAN=$lean RNNT_CUDA_WAVE_CHIP=1 timeout $(tmo 40) $B/bench_encoder --fast --wave --reps 10 --batches 1,2,3; echo "exit $?"
    done; } > "$OUT/bench.log" 2>&1
  grep -E "^== |^\| 5 x|exit" "$OUT/bench.log" | cut -c1-250
fi
if has lab; then
  log lab_lstm_wave; timeout $(tmo 60) $B/lab_lstm_wave > "$OUT/lab.log" 2>&1; echo "exit $?"
  grep -E "FAIL|checks:|^\|" "$OUT/lab.log" | grep -v "does not apply" | sed -E 's/all layers, W_hh on chip/chip/; s/layer by layer \(GEMM \+ persistent\)/by layer/' | cut -c1-160 | head -40
fi
if has tests; then
  { log "test_cuda_kernels quick (lean projection by default)"; RNNT_TEST_QUICK=1 timeout $(tmo 60) $B/test_cuda_kernels; echo "exit $?"
    log "test_encoder_chip RNNT_CUDA_WAVE_CHIP_LEAN=0"; RNNT_CUDA_WAVE_CHIP_LEAN=0 RNNT_TEST_ONLY='test_encoder_chip' timeout $(tmo 30) $B/test_cuda_kernels; echo "exit $?"
  } >> "$T" 2>&1
  grep -E "^== |exit |PASSED|FAILED|on chip|\[  FAILED|ERROR" "$T" | cut -c1-200 | head -30
fi
if has memcheck; then
  { log "memcheck lab checks 23"; LAB_VARIANTS=23 LAB_CHECK_ONLY=1 timeout $(tmo 60) compute-sanitizer --tool memcheck --error-exitcode 9 $B/lab_lstm_wave 2>&1 | grep -vE "^check " | tail -4; echo "exit ${PIPESTATUS[0]}"; } >> "$T" 2>&1
  grep -E "memcheck|ERROR SUMMARY|checks:|exit" "$T" | tail -4
fi
log done
