#!/bin/bash
# Run 2 of the decode5 helper (issue 16 §3, session 7): the new defaults (the grid loop in slices from 16 utterances, with
# counters at every size, two blocks an SM above 96 and two emitter groups a pass with one) against the old ones set by
# environment, in the same call (bench_engine models/en-char-small --seconds 10 --reps 7 --extras 0, decode loop column);
# the cluster/grid threshold at 8-16 and the occupancy threshold at 80-112; then every gpu-labelled ctest test
# (device-gpu-label.sh from stage-gpu-label.sh's pack) and racecheck / memcheck of the default variants of
# test_cuda_decoder. Staged by tests/gpu/stage-decode5.sh (pack) and DEST=/work/main/.gpu/decode5-label
# tests/gpu/stage-gpu-label.sh; carry [".gpu/decode5", ".gpu/decode5-label"]:
#   BUDGET_S=230 bash .gpu/decode5/device-decode5b.sh
steps=all
source .gpu/decode5/device-common.sh
budget=${BUDGET_S:-230}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
open_pack .gpu/decode5/pack.tar.xz /tmp/gd5 cublas cuda_runtime cufft
export RNNT_TEST_DATA=$PWD/tests/data
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,16,32,64,128,256} $*"
  env "$@" timeout $(tmo ${BT:-40}) $B/bench_engine models/en-char-small --batches ${BATCHES:-1,16,32,64,128,256} \
    --seconds 10 --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
OLDCLU="RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=8 RNNT_CUDA_DEC_CLUSTER_WARPS=16 RNNT_CUDA_DEC_CLUSTER_G=1"
OLDGRID="RNNT_CUDA_DEC_GRID_SLICES=0 RNNT_CUDA_DEC_GRID_PAIR=0"
{
bench
BATCHES=16 bench $OLDCLU
BATCHES=32,64 bench $OLDGRID RNNT_CUDA_DEC_GRID_CNT=1 RNNT_CUDA_DEC_GRID_OCC=1
BATCHES=128 bench $OLDGRID RNNT_CUDA_DEC_GRID_CNT=0 RNNT_CUDA_DEC_GRID_OCC=1
BATCHES=256 bench $OLDGRID RNNT_CUDA_DEC_GRID_CNT=0 RNNT_CUDA_DEC_GRID_OCC=2
BATCHES=8,12,13,14,15,16 bench RNNT_CUDA_DECODE=grid
BATCHES=8,12,13,14,15,16 bench $OLDCLU
BATCHES=80,96,112 bench RNNT_CUDA_DEC_GRID_OCC=1
BATCHES=80,96,112 bench RNNT_CUDA_DEC_GRID_OCC=2
BATCHES=16,32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1
bench
BATCHES=16 bench $OLDCLU
BATCHES=32,64 bench $OLDGRID RNNT_CUDA_DEC_GRID_CNT=1 RNNT_CUDA_DEC_GRID_OCC=1
BATCHES=128 bench $OLDGRID RNNT_CUDA_DEC_GRID_CNT=0 RNNT_CUDA_DEC_GRID_OCC=1
BATCHES=256 bench $OLDGRID RNNT_CUDA_DEC_GRID_CNT=0 RNNT_CUDA_DEC_GRID_OCC=2
} 2>&1 | tee $OUT/bench.log
mkdir -p $OUT/san $OUT/label
log "racecheck / memcheck of the default variants (test_cuda_decoder, quick, RNNT_TEST_REF=none, RNNT_CUDA_MAPPED=0), beside the gpu label"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
tt=$(tmo 110)
for tv in racecheck:grid racecheck:auto memcheck:grid memcheck:auto; do
  ( RNNT_TEST_QUICK=1 RNNT_TEST_VARIANTS=${tv#*:} RNNT_TEST_REF=none RNNT_CUDA_MAPPED=0 timeout $tt \
      $CS --tool ${tv%%:*} --error-exitcode 9 $B/test_cuda_decoder > $OUT/san/${tv/:/-}.log 2>&1
    echo "exit $?" >> $OUT/san/${tv/:/-}.log ) &
done
export LD_LIBRARY_PATH=
OUT=$OUT/label BUDGET_S=$((budget - SECONDS)) bash .gpu/decode5-label/device-gpu-label.sh 2>&1 | tee $OUT/label.txt | grep -E "exit|failed:"
wait
for f in $OUT/san/*.log; do echo "$(basename $f): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $f | tr '\n' ' ') $(tail -1 $f)"; done
tar -C $OUT -cJf $OUT/logs.tar.xz san label && rm -rf $OUT/san $OUT/label
log "done"
# one line a bench: its settings, then B: decode loop / encoder ms
awk -F'|' '/^== bench/ {if (l) print l; l = substr($0, 17); sub(/ \(.*$/, "", l); l = l ":"} /^\| [0-9]/ {gsub(/ /, "", $2); gsub(/ /, "", $5); gsub(/ /, "", $7); l = l " " $2 ":" $7 "/" $5} END {print l}' $OUT/bench.log
