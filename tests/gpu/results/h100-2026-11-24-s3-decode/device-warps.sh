#!/bin/bash
# Run 5: the cluster loop with 16 warps per block (RNNT_CUDA_DEC_CLUSTER_WARPS=16) against 8, and main.
# Carry [".gpu/decode", ".gpu/abnew"]:  bash .gpu/decode/device-warps.sh
steps=all
source .gpu/decode/device-common.sh
export RNNT_TEST_DATA=$PWD/tests/data
for p in abnew decode; do unpack .gpu/$p/pack.tar.xz /tmp/b_$p; done
libs() { export LD_LIBRARY_PATH=; use_libs /tmp/b_$1/lib cublas cuda_runtime cufft; }
bench() { # PACK [VAR=VALUE...]
  local pack=$1; shift; libs $pack
  log "bench_engine $pack $*"
  env "$@" timeout ${BT:-60} /tmp/b_$pack/bin/bench_engine models/en-char-small --batches ${BATCHES:-1,32,256} --seconds 10 \
    --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_cluster"
}
D=/tmp/b_decode; libs decode
log smoke; BT=30 BATCHES=1,17 REPS=1 bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER_WARPS=16
log test_cuda_engine; timeout 150 $D/bin/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "PASSED|FAILED|fail|cluster|within" $OUT/e.log | head -20
log test_cuda_kernels; timeout 120 $D/bin/test_cuda_kernels > $OUT/k.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/k.log
log test_stream; RNNT_TEST_BACKEND=cuda timeout 60 $D/bin/test_stream > $OUT/s.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/s.log | head -3
bench abnew; bench decode
for round in 1 2; do
  bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=16
  bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=16 RNNT_CUDA_DEC_CLUSTER_WARPS=16
  bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER_WARPS=16
done
BATCHES=1 REPS=1 bench decode RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=16 RNNT_CUDA_DEC_CLUSTER_WARPS=16 RNNT_CUDA_DEC_TRACE=1
