#!/bin/bash
# On the GPU machine, from the repository root, after kernels/dev/stage-wave5.sh here and a `run` carrying
# .gpu/wave5: the on-chip layer wavefront (lab variants 7-11 against variant 1, layer by layer): checks +
# bench, compute-sanitizer memcheck and racecheck on its checks, ncu on k_wave_chip; with the encoder
# build also bench_encoder (same process as cuDNN) and the GPU kernel tests. Logs in $OUT.
#   LAB_VARIANTS=1,7,... BUDGET_S=... bash .gpu/wave5/device-wave5.sh [STEPS]
set -u
steps=${1:-env,lab,sanitize,ncu}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
unpack "$H/pack.tar.xz" /tmp/gw
B=/tmp/gw/bin
use_libs /tmp/gw/lib cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
export LAB_VARIANTS=${LAB_VARIANTS:-1,7,8,9,10,11}
if has env; then { log env; nvidia-smi; for b in $B/*; do ldd $b | grep -i "not found"; done; } > "$OUT/env.log" 2>&1; grep -E "H100|H200|Driver" "$OUT/env.log" | head -3; fi
if has lab; then
  log lab_lstm_wave; timeout $(tmo 200) $B/lab_lstm_wave > "$OUT/lab_wave5.log" 2>&1; echo "exit $?"
  grep -E "FAIL|checks:|^\||variant (1|7|11) " "$OUT/lab_wave5.log" | grep -v "does not apply" | sed -E 's/all layers, W_hh on chip/chip/; s/layer by layer \(GEMM \+ persistent\)/by layer/' | cut -c1-200 | head -70
fi
if has encoder && [ -x $B/bench_encoder ]; then
  # the wave column: every layer on chip where it fits (B = 1), else pairs
  log bench_encoder; RNNT_CUDA_WAVE_CHIP=1 timeout $(tmo 200) $B/bench_encoder ${BENCH_ARGS:---quick --reps 10} > "$OUT/bench_encoder.log" 2>&1; echo "exit $?"
  grep -E "^device|^\| 5 x|wavefront" "$OUT/bench_encoder.log" | cut -c1-330 | head -30
fi
if has tests && [ -x $B/test_cuda_kernels ]; then
  { log test_cuda_kernels; RNNT_TEST_QUICK=1 timeout $(tmo 150) $B/test_cuda_kernels; echo "exit $?"; } > "$OUT/tests.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|wave|\[  FAILED|ERROR" "$OUT/tests.log" | cut -c1-200 | head -20
fi
if has sanitize; then
  { log "memcheck lab checks"; LAB_VARIANTS=7,11 LAB_CHECK_ONLY=1 timeout $(tmo 100) compute-sanitizer --tool memcheck --error-exitcode 9 $B/lab_lstm_wave 2>&1 | grep -vE "^check " | tail -4; echo "exit ${PIPESTATUS[0]}"
    log "racecheck lab checks"; LAB_VARIANTS=7,11 LAB_CHECK_ONLY=1 timeout $(tmo 120) compute-sanitizer --tool racecheck --error-exitcode 9 $B/lab_lstm_wave 2>&1 | grep -vE "^check " | head -30; echo "exit ${PIPESTATUS[0]}"
  } > "$OUT/sanitize.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|RACECHECK SUMMARY|checks:|Race|at .*cu_wave" "$OUT/sanitize.log" | head -20
fi
if has ncu && command -v ncu >/dev/null; then
  { for v in ${NCU_VARIANTS:-7}; do log "ncu k_wave_chip variant $v B=1"; timeout $(tmo 90) ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats -k regex:k_wave_chip -c 1 $B/lab_lstm_wave $v 1 300; done; } > "$OUT/ncu.log" 2>&1
  grep -E "^== |Duration|Throughput|Stall|Warp Cycles|L2 Hit|Registers|Issued Warp|No Eligible|Shared Memory Configuration Size|Dynamic Shared" "$OUT/ncu.log" | cut -c1-150 | head -50
fi
log done
