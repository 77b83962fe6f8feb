#!/bin/bash
# The decode helper's device run (issue 16 §3): GPU tests of this build, then bench_engine on the shipped
# model from main 34f5eb6 (abnew, the pack of h100-2026-11-24-merge-s2/daemon-ab) and this build (decode),
# the WHILE loop and RNNT_CUDA_DECODE=cluster, alternated in one call (the previous session's build, abold,
# when carried too; the trip's 64 MiB did not hold all three). On the device, from the checkout root,
# carry [".gpu/decode", ".gpu/abnew"]:  bash .gpu/decode/device-decode.sh
steps=all
source .gpu/decode/device-common.sh
export RNNT_TEST_DATA=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for p in abold abnew decode; do [ -f .gpu/$p/pack.tar.xz ] && unpack .gpu/$p/pack.tar.xz /tmp/b_$p; done
libs() { export LD_LIBRARY_PATH=; use_libs /tmp/b_$1/lib cublas cuda_runtime cufft; }
bench() { # PACK [VAR=VALUE...]
  local pack=$1; shift; libs $pack
  log "bench_engine $pack $*"
  env "$@" timeout ${BT:-60} /tmp/b_$pack/bin/bench_engine models/en-char-small --batches ${BATCHES:-1,32,256} --seconds 10 \
    --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_cluster"
}
D=/tmp/b_decode; libs decode
log smoke; BT=30 BATCHES=1,17 REPS=1 bench decode RNNT_CUDA_DECODE=cluster; smoke=$?
log test_cuda_kernels; timeout 120 $D/bin/test_cuda_kernels > $OUT/k.log 2>&1; echo "exit $?"; grep -iE "prob|PASSED|FAILED|fail" $OUT/k.log | head
log test_cuda_engine; timeout 150 $D/bin/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "PASSED|FAILED|fail|cluster|within" $OUT/e.log | head -20
log test_stream; RNNT_TEST_BACKEND=cuda timeout 60 $D/bin/test_stream > $OUT/s.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/s.log | head -3
for round in 1 2; do
  bench abnew; bench decode; bench decode RNNT_CUDA_DECODE=cluster; bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=16
done
[ -d /tmp/b_abold ] && bench abold
for c in 8 16; do for nb in 1 32 256; do
  BATCHES=$nb REPS=1 bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=$c RNNT_CUDA_DEC_TRACE=1 | cat
done; done
