#!/bin/bash
# The decode2 helper's device run (issue 16 §3): GPU tests of this build, then bench_engine's decode loop on the
# shipped model at B 1-32: the WHILE graph, the default (CU_DEC_AUTO), and the cluster loop (16 blocks of 16
# warps; 8 blocks of 16 warps) with the batched-load dot products and f-row cache (this build) against its
# one-load-at-a-time dots (RNNT_CUDA_DEC_CLUSTER_CHAIN=1 RNNT_CUDA_DEC_CLUSTER_FCACHE=0: main 8130d73's loop),
# alternated in one call. On the device, from the checkout root, carry [".gpu/decode2"]:
#   bash .gpu/decode2/device-decode2.sh
steps=all
source .gpu/decode2/device-common.sh
export RNNT_TEST_DATA=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unpack .gpu/decode2/pack.tar.xz /tmp/b_d2
export LD_LIBRARY_PATH=; use_libs /tmp/b_d2/lib cublas cuda_runtime cufft
D=/tmp/b_d2
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,2,4,6,8,12,16,32} $*"
  env "$@" timeout ${BT:-60} $D/bin/bench_engine models/en-char-small --batches ${BATCHES:-1,2,4,6,8,12,16,32} --seconds 10 \
    --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_cluster"
}
CL16="RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER=16 RNNT_CUDA_DEC_CLUSTER_WARPS=16"
OLD="RNNT_CUDA_DEC_CLUSTER_CHAIN=1 RNNT_CUDA_DEC_CLUSTER_FCACHE=0"
log smoke; BT=30 BATCHES=1,3,17 REPS=1 bench
log test_cuda_engine; timeout 150 $D/bin/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "PASSED|FAILED|fail|within" $OUT/e.log | tail -4
log test_cuda_kernels; timeout 120 $D/bin/test_cuda_kernels > $OUT/k.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/k.log
for round in 1 2; do
  bench RNNT_CUDA_DECODE=while
  bench
  bench $CL16 $OLD
  bench $CL16 RNNT_CUDA_DEC_CLUSTER_FCACHE=0
  bench $CL16
  BATCHES=12,16,32 bench RNNT_CUDA_DECODE=cluster RNNT_CUDA_DEC_CLUSTER_WARPS=16
done
for v in "$OLD" "RNNT_CUDA_DEC_CLUSTER_FCACHE=0" ""; do
  BATCHES=1 REPS=1 bench $CL16 $v RNNT_CUDA_DEC_TRACE=1
done
log test_cuda_engine RNNT_CUDA_DEC_CLUSTER_FCACHE=0
RNNT_CUDA_DEC_CLUSTER_FCACHE=0 timeout 100 $D/bin/test_cuda_engine > $OUT/e0.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/e0.log
log "compute-sanitizer --tool memcheck test_cuda_engine (RNNT_TEST_QUICK=1)"
RNNT_TEST_QUICK=1 timeout $(tmo 120) compute-sanitizer --tool memcheck --error-exitcode 9 $D/bin/test_cuda_engine > $OUT/mc.log 2>&1
echo "exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/mc.log | tail -3
