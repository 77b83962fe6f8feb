#!/bin/bash
# On the GPU machine, from the repository root, after kernels/dev/stage-wave.sh here and a `run` carrying
# .gpu/wave: the layer wavefront lab (checks + bench), the GPU kernel tests, compute-sanitizer memcheck and
# racecheck (kernel tests, lab checks), bench_encoder's full table against cuDNN (with the wave column),
# and ncu on the wavefront kernel. Logs in $OUT.   bash .gpu/wave/device-wave.sh [STEPS]
set -u
steps=${1:-env,lab,encoder,tests,sanitize,ncu}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
unpack "$H/pack.tar.xz" /tmp/gw
B=/tmp/gw/bin
use_libs /tmp/gw/lib cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
if has env; then { log env; nvidia-smi; for b in $B/*; do ldd $b | grep -i "not found"; done; } > "$OUT/env.log" 2>&1; grep -E "H100|H200|Driver" "$OUT/env.log" | head -3; fi
if has lab; then
  log lab_lstm_wave; timeout $(tmo 200) $B/lab_lstm_wave > "$OUT/lab_wave.log" 2>&1; echo "exit $?"
  grep -E "FAIL|does not apply|checks:|^\|" "$OUT/lab_wave.log" | cut -c1-220 | head -60
fi
if has encoder; then
  log bench_encoder; timeout $(tmo 200) $B/bench_encoder > "$OUT/bench_encoder.log" 2>&1; echo "exit $?"
  grep -E "^\| 5 x|^\| 4 x|Layer wavefront|max abs\(wave" "$OUT/bench_encoder.log" | cut -c1-400
fi
if has tests; then
  { log test_cuda_kernels; RNNT_TEST_QUICK=1 timeout $(tmo 120) $B/test_cuda_kernels; echo "exit $?"; } > "$OUT/tests.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|encoder k-enc-wave|\[  FAILED|ERROR" "$OUT/tests.log" | cut -c1-240
fi
if has sanitize; then
  { log "memcheck lab checks"; LAB_CHECK_ONLY=1 timeout $(tmo 100) compute-sanitizer --tool memcheck --error-exitcode 9 $B/lab_lstm_wave 2 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
    log "racecheck lab checks"; LAB_CHECK_ONLY=1 timeout $(tmo 120) compute-sanitizer --tool racecheck --error-exitcode 9 $B/lab_lstm_wave 2 2>&1 | grep -vE "^check " | head -60; echo "exit ${PIPESTATUS[0]}"
    log "memcheck test_cuda_kernels (quick)"; RNNT_TEST_QUICK=1 timeout $(tmo 120) compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
    log "racecheck test_cuda_kernels (quick)"; RNNT_CUDA_MAPPED=0 RNNT_TEST_QUICK=1 timeout $(tmo 150) compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -4; echo "exit ${PIPESTATUS[0]}"
  } > "$OUT/sanitize.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|RACECHECK SUMMARY|checks:|Race|Write|Read|at .*cu_wave" "$OUT/sanitize.log" | head -40
fi
if has ncu && command -v ncu >/dev/null; then
  { for b in 1 8; do log "ncu k_wave B=$b"; timeout $(tmo 60) ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis -k regex:k_wave -c 1 $B/lab_lstm_wave 2 $b 300; done; } > "$OUT/ncu.log" 2>&1
  grep -E "^== |Duration|Throughput|Stall|Warp Cycles|L2 Hit|Registers" "$OUT/ncu.log" | cut -c1-150 | head -40
fi
log done
