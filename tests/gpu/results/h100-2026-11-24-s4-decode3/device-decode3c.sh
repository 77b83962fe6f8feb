#!/bin/bash
# Run 3 of the decode3 helper (issue 16 §3), the final build (main 9def0fe merged): every gpu-labelled ctest test
# (tests/gpu/stage-gpu-label.sh with DEST=/work/main/.gpu/decode3-label), the default decode loop (CU_DEC_AUTO: cluster
# loop up to 16, grid loop f4 above) against the WHILE graph at B 1-256, the grid loop's phase clocks, ncu of
# k_dec_grid at B 256, memcheck of test_large_batch, racecheck of k_dec_grid alone (bench_engine, 2 s utterances).
# Carry [".gpu/decode3-label"]:  bash .gpu/decode3-label/device-decode3c.sh
H=.gpu/decode3-label
BUDGET_S=${BUDGET_S:-230} bash $H/device-gpu-label.sh
steps=all
source $H/device-common.sh
budget=${BUDGET_S:-230}
open_pack $H/pack.tar.xz /tmp/gl cublas cuda_runtime cufft
tar -C /tmp/gl/bin -xJf $H/bench.tar.xz
export RNNT_TEST_DATA=$PWD/tests/data
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,2,4,8,16,24,32,64,128,256} $*"
  env "$@" timeout ${BT:-60} $B/bench_engine models/en-char-small --batches ${BATCHES:-1,2,4,8,16,24,32,64,128,256} \
    --seconds ${SECS:-10} --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
bench RNNT_CUDA_DECODE=while
bench
BATCHES=32,128,256 bench RNNT_CUDA_DECODE=while
BATCHES=32,128,256 bench
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1
log "compute-sanitizer memcheck test_cuda_engine test_large_batch (quick)"
RNNT_TEST_QUICK=1 RNNT_TEST_ONLY=test_large_batch timeout $(tmo 60) compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine > $OUT/memcheck.log 2>&1
echo "exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -3
log "compute-sanitizer racecheck, k_dec_grid only: bench_engine B 17, 130 (2 s utterances), f4 and tile 0"
for t in 3 0; do
  RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=$t timeout $(tmo 40) compute-sanitizer --tool racecheck --kernel-regex kns=k_dec_grid \
    --error-exitcode 9 $B/bench_engine models/en-char-small --batches 17,130 --seconds 2 --reps 1 --extras 0 > $OUT/racecheck$t.log 2>&1
  echo "tile $t exit $?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard" $OUT/racecheck$t.log | head -3
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
log "ncu: k_dec_grid (f4) at B 256"
timeout $(tmo 60) $NCU --clock-control none -k regex:k_dec_grid -s 2 -c 1 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section SchedulerStats $B/bench_engine models/en-char-small --batches 256 --seconds 10 --reps 1 \
  --extras 0 > $OUT/ncugrid.txt 2>&1
echo "exit $?"; grep -E "Duration|Registers Per|Grid Size|Achieved Occ|Warp Cycles Per Issued|Stall|Eligible|Compute \(SM\) T|Memory Throughput" $OUT/ncugrid.txt | head -20
