#!/bin/bash
# Run 2 of the decode3 helper (issue 16 §3): the grid loop with the slots' state in shared memory (and, with
# RNNT_CUDA_DEC_GRID_TILE=3, the units' dots on fp32 quadruples), CU_DEC_AUTO taking
# it for 17-128 utterances; its phase clocks; every GPU test; memcheck and racecheck of the large-batch test.
# Carry [".gpu/decode3"]:  bash .gpu/decode3/device-decode3b.sh
steps=all
source .gpu/decode3/device-common.sh
export RNNT_TEST_DATA=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unpack .gpu/decode3/pack.tar.xz /tmp/b_d3
export LD_LIBRARY_PATH=; use_libs /tmp/b_d3/lib cublas cuda_runtime cufft
D=/tmp/b_d3
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-8,16,24,32,64,128,256} $*"
  env "$@" timeout ${BT:-60} $D/bin/bench_engine models/en-char-small --batches ${BATCHES:-8,16,24,32,64,128,256} \
    --seconds 10 --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
BT=40 BATCHES=1,17,256 REPS=1 bench RNNT_CUDA_DECODE=grid
BT=40 BATCHES=1,17,256 REPS=1 bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=3
log "test_cuda_engine large batch"; RNNT_TEST_ONLY=test_large_batch timeout $(tmo 100) $D/bin/test_cuda_engine > $OUT/lb.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED|ERROR|batches of|differs" $OUT/lb.log | head
for round in 1 2; do
  [ $round = 2 ] && export BATCHES=32,128,256
  bench RNNT_CUDA_DECODE=while
  bench RNNT_CUDA_DECODE=grid
  bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=0
  bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=3
  bench
done
unset BATCHES
BATCHES=1,32,256 REPS=1 bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_TRACE=1
BATCHES=1,32,256 REPS=1 bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=3 RNNT_CUDA_DEC_TRACE=1
log test_cuda_engine; timeout $(tmo 200) $D/bin/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "PASSED|FAILED|ERROR|within|batches of" $OUT/e.log | tail -12
log test_cuda_kernels; timeout $(tmo 120) $D/bin/test_cuda_kernels > $OUT/k.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/k.log
log test_stream; RNNT_TEST_BACKEND=cuda timeout $(tmo 60) $D/bin/test_stream > $OUT/s.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/s.log | head -3
for tool in memcheck racecheck; do
  log "compute-sanitizer --tool $tool test_cuda_engine test_large_batch (RNNT_TEST_QUICK=1)"
  RNNT_TEST_QUICK=1 RNNT_TEST_ONLY=test_large_batch timeout $(tmo 120) compute-sanitizer --tool $tool --error-exitcode 9 $D/bin/test_cuda_engine > $OUT/$tool.log 2>&1
  echo "exit $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED|Error|hazard" $OUT/$tool.log | head -5
done
