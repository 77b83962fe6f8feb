#!/bin/bash
steps=all
source tests/gpu/device-common.sh
for round in 1 2; do for pack in abold abnew; do
  D=/tmp/b_$pack; [ -d $D ] || unpack .gpu/$pack/pack.tar.xz $D
  export LD_LIBRARY_PATH=; use_libs $D/lib cublas cuda_runtime cufft
  log "bench_engine from .gpu/$pack, round $round"
  timeout 60 $D/bin/bench_engine models/en-char-small --batches 1,32,256 --seconds 10 --reps 7 --extras 0 2>&1 | grep -E "^\| [0-9]"
done; done
D=/tmp/b_abnew; export LD_LIBRARY_PATH=; use_libs $D/lib cublas cuda_runtime cufft
export RNNT_TEST_DATA=$PWD/tests/data
log test_cuda_kernels; timeout 100 $D/bin/test_cuda_kernels > $OUT/k.log 2>&1; echo "exit $?"; grep -iE "prob|PASSED|FAILED" $OUT/k.log | head -5
log test_cuda_engine; timeout 100 $D/bin/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "prob|PASSED|FAILED" $OUT/e.log | head -5
log "test_stream CUDA"; RNNT_TEST_BACKEND=cuda timeout 100 $D/bin/test_stream > $OUT/s.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/s.log | head -3
