#!/bin/bash
# Run 1 of the decode4 helper (issue 16 §3): the grid loop's f4 staging 16 bytes a thread + the cell state loaded
# before the dot products (RNNT_CUDA_DEC_GRID_VST=1, the new default) against the element-by-element staging (=0) and
# against per-slot counters instead of two of the three grid barriers a step (RNNT_CUDA_DEC_GRID_CNT=1) in the same call,
# B 1-256; phase clocks of both; test_cuda_engine (every grid variant bitwise the WHILE graph, fp32 = CPU);
# memcheck of test_large_batch; one racecheck try of k_dec_grid with cuBLAS kept off its Hopper kernels' workspace.
# Carry [".gpu/decode4"]:  BUDGET_S=240 bash .gpu/decode4/device-decode4a.sh
steps=all
source .gpu/decode4/device-common.sh
budget=${BUDGET_S:-240}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
open_pack .gpu/decode4/pack.tar.xz /tmp/gd4 cublas cuda_runtime cufft
export RNNT_TEST_DATA=$PWD/tests/data
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,8,32,64,128,256} $*"
  env "$@" timeout $(tmo ${BT:-40}) $B/bench_engine models/en-char-small --batches ${BATCHES:-1,8,32,64,128,256} \
    --seconds 10 --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
bench RNNT_CUDA_DEC_GRID_VST=0
bench
bench RNNT_CUDA_DEC_GRID_CNT=1
BATCHES=24,32,64,128,256 bench RNNT_CUDA_DEC_GRID_VST=0
BATCHES=24,32,64,128,256 bench
BATCHES=24,32,64,128,256 bench RNNT_CUDA_DEC_GRID_CNT=1
BATCHES=24,32,64,128,256 bench RNNT_CUDA_DECODE=while
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_GRID_VST=0 RNNT_CUDA_DEC_TRACE=1
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_GRID_CNT=1 RNNT_CUDA_DEC_TRACE=1
log test_cuda_engine; timeout $(tmo 90) $B/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"
grep -iE "PASSED|FAILED|ERROR|within|batches of|differs" $OUT/e.log | tail -12
log "memcheck test_cuda_engine test_large_batch (RNNT_TEST_QUICK=1)"
RNNT_TEST_QUICK=1 RNNT_TEST_ONLY=test_large_batch timeout $(tmo 100) compute-sanitizer --tool memcheck --error-exitcode 9 \
  $B/test_cuda_engine > $OUT/memcheck.log 2>&1
echo "exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED|Error" $OUT/memcheck.log | head -5
log "racecheck k_dec_grid: bench_engine B 17, 1 s, graphs and mapped results off, CUBLAS_WORKSPACE_CONFIG=:0:0, counters"
RNNT_CUDA_GRAPHS=0 RNNT_CUDA_MAPPED=0 RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_CNT=1 CUBLAS_WORKSPACE_CONFIG=:0:0 timeout $(tmo 45) \
  compute-sanitizer --tool racecheck --kernel-name kns=k_dec_grid --print-limit 5 --error-exitcode 9 \
  $B/bench_engine models/en-char-small --batches 17 --seconds 1 --reps 1 --extras 0 > $OUT/racecheck.log 2>&1
echo "exit $?"; grep -v "^model\|^$\|^|---" $OUT/racecheck.log | head -16
