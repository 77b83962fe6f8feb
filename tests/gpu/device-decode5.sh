#!/bin/bash
# The decode5 helper's run (issue 16 §3, session 7): the grid loop in slices (RNNT_CUDA_DEC_GRID_SLICES; each slice of
# the blocks owns its utterances and syncs only among itself) against the default and against decode4's candidate
# default (two blocks an SM with counters), in the same call, on the shipped model (bench_engine models/en-char-small
# --seconds 10 --reps 7 --extras 0, decode loop column); phase clocks; then test_cuda_decoder (every loop variant,
# the slices included, bitwise the WHILE graph in fp32 and fp16, fp32 = CPU twin, batch invariance), test_cuda_engine
# (its grid modes with slices: fp32 tokens = the CPU engine), and racecheck / memcheck of the sliced variants.
# Staged by tests/gpu/stage-decode5.sh; carry [".gpu/decode5"]:   BUDGET_S=240 bash .gpu/decode5/device-decode5.sh
steps=all
source .gpu/decode5/device-common.sh
budget=${BUDGET_S:-240}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
open_pack .gpu/decode5/pack.tar.xz /tmp/gd5 cublas cuda_runtime cufft
export RNNT_TEST_DATA=$PWD/tests/data
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,16,32,64,128,256} $*"
  env "$@" timeout $(tmo ${BT:-40}) $B/bench_engine models/en-char-small --batches ${BATCHES:-1,16,32,64,128,256} \
    --seconds 10 --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
{
bench
bench RNNT_CUDA_DEC_GRID_SLICES=64
bench RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_CNT=1
bench RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_OCC=2
bench RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=1
BATCHES=64,128,256 bench RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_OCC=1 RNNT_CUDA_DEC_GRID_CNT=0
BATCHES=128,256 bench RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=1
bench RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_PAIR=1
bench RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_PAIR=1 RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=1
BATCHES=32,64,128,256 bench RNNT_CUDA_DEC_GRID_PAIR=1
BATCHES=32,256 bench RNNT_CUDA_DEC_GRID_SLICES=1
BATCHES=8,16,24 bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_SLICES=64
BATCHES=8,16,24 bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_OCC=2
BATCHES=8,16,24 bench RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=0
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1 RNNT_CUDA_DEC_GRID_SLICES=64
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1 RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=1
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_TRACE=1 RNNT_CUDA_DEC_GRID_SLICES=64 RNNT_CUDA_DEC_GRID_PAIR=1
bench
bench RNNT_CUDA_DEC_GRID_SLICES=64
} 2>&1 | tee $OUT/bench.log
log "test_cuda_decoder (full)"
timeout $(tmo 60) $B/test_cuda_decoder > $OUT/decoder.log 2>&1; echo "exit $?"
grep -E "^seed|PASSED|FAILED|ERROR|near tie" $OUT/decoder.log | cut -c1-300 | head -12
grep -E " grid-sl| grid-pair| grid: " $OUT/decoder.log | cut -c1-260 | head -8
log test_cuda_engine; timeout $(tmo 90) $B/test_cuda_engine > $OUT/engine.log 2>&1; echo "exit $?"
grep -iE "PASSED|FAILED|ERROR|differs" $OUT/engine.log | tail -8
mkdir -p $OUT/san
log "racecheck / memcheck of the sliced variants (test_cuda_decoder, quick, RNNT_TEST_REF=none, RNNT_CUDA_MAPPED=0)"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
tt=$(tmo 100)
for tv in racecheck:grid-sl-cnt1-occ2 racecheck:grid-sl-cnt0-occ1 racecheck:grid-sl1 memcheck:grid-sl-cnt1-occ2 \
          memcheck:grid-sl-cnt0-occ1 memcheck:grid-sl3-tile1 racecheck:grid-pair-occ2 memcheck:grid-pair-sl-vst0; do
  ( RNNT_TEST_QUICK=1 RNNT_TEST_VARIANTS=${tv#*:} RNNT_TEST_REF=none RNNT_CUDA_MAPPED=0 timeout $tt \
      $CS --tool ${tv%%:*} --error-exitcode 9 $B/test_cuda_decoder > $OUT/san/${tv/:/-}.log 2>&1
    echo "exit $?" >> $OUT/san/${tv/:/-}.log ) &
done
wait
for f in $OUT/san/*.log; do echo "$(basename $f): $(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" $f | tr '\n' ' ') $(tail -1 $f)"; done
tar -C $OUT -cJf $OUT/san.tar.xz san && rm -rf $OUT/san
log "done"
# one line a bench: its settings, then B: decode loop / encoder ms
awk -F'|' '/^== bench/ {if (l) print l; l = substr($0, 17); sub(/ \(.*$/, "", l); l = l ":"} /^\| [0-9]/ {gsub(/ /, "", $2); gsub(/ /, "", $5); gsub(/ /, "", $7); l = l " " $2 ":" $7 "/" $5} END {print l}' $OUT/bench.log
