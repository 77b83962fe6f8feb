#!/bin/bash
# Run 4 of the decode3 helper: the f4 projection reading the staged fp16 rows (no fp32 copy: run 3's 8 KB more shared
# memory per block shrank L1 and B 24-32 lost ~1 ms), its tests (test_cuda_engine: every grid variant bitwise), the
# decode loop default vs WHILE, and racecheck's hazard report for k_dec_grid (run 3 counted 1, log not returned).
# Carry [".gpu/decode3d"]:  bash .gpu/decode3d/device-decode3d.sh
steps=all
source .gpu/decode3d/device-common.sh
budget=${BUDGET_S:-150}
open_pack .gpu/decode3d/pack.tar.xz /tmp/gd cublas cuda_runtime cufft
export RNNT_TEST_DATA=$PWD/tests/data
log test_cuda_engine; timeout $(tmo 60) $B/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "PASSED|FAILED|ERROR|batches of" $OUT/e.log | tail -4
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-16,24,32,64,128,256} $*"
  env "$@" timeout 40 $B/bench_engine models/en-char-small --batches ${BATCHES:-16,24,32,64,128,256} \
    --seconds 10 --reps 7 --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
bench RNNT_CUDA_DECODE=while
bench
BATCHES=24,32,256 bench RNNT_CUDA_DECODE=while
BATCHES=24,32,256 bench
log "racecheck k_dec_grid, tile 0, bench_engine B 17 (2 s)"
RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=0 timeout $(tmo 40) compute-sanitizer --tool racecheck --kernel-regex kns=k_dec_grid \
  --print-limit 3 $B/bench_engine models/en-char-small --batches 17 --seconds 2 --reps 1 --extras 0 > $OUT/racecheck.log 2>&1
echo "exit $?"; grep -v "^| \|^model" $OUT/racecheck.log | head -40
