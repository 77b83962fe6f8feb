#!/bin/bash
# Run 3 of the decode2 helper (issue 16 §3): the build of main e3a4019 merged into this branch: GPU tests
# (test_cuda_engine, CUDA test_stream, test_cuda_kernels), bench_engine's decode loop on the shipped model at
# B 1-32 for the default (CU_DEC_AUTO: a slot per cluster, 16 blocks up to 6 utterances, 8 up to 16) against the
# WHILE graph, alternated; phase clocks at B 1 (memcheck: run 2, same kernels). Carry [".gpu/decode2"]:  bash .gpu/decode2/device-decode2c.sh
steps=all
source .gpu/decode2/device-common.sh
export RNNT_TEST_DATA=$PWD/tests/data
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
unpack .gpu/decode2/pack.tar.xz /tmp/b_d2
export LD_LIBRARY_PATH=; use_libs /tmp/b_d2/lib cublas cuda_runtime cufft
D=/tmp/b_d2
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,2,4,6,7,8,12,16,24,32} $*"
  env "$@" timeout ${BT:-60} $D/bin/bench_engine models/en-char-small --batches ${BATCHES:-1,2,4,6,7,8,12,16,24,32} \
    --seconds 10 --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_cluster"
}
log test_cuda_engine; timeout 150 $D/bin/test_cuda_engine > $OUT/e.log 2>&1; echo "exit $?"; grep -iE "PASSED|FAILED|ERROR|within" $OUT/e.log | tail -6
log test_stream; RNNT_TEST_BACKEND=cuda timeout 60 $D/bin/test_stream > $OUT/s.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/s.log | head -3
log test_cuda_kernels; timeout 120 $D/bin/test_cuda_kernels > $OUT/k.log 2>&1; echo "exit $?"; grep -E "PASSED|FAILED" $OUT/k.log
for round in 1; do
  bench RNNT_CUDA_DECODE=while
  bench
done
BATCHES=1 REPS=1 bench RNNT_CUDA_DEC_TRACE=1
