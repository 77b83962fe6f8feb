#!/bin/bash
# Issue 16 runs: build the GPU tests, benchmarks and rnntd here (sm_90) and pack them, with the shared
# libraries the GPU machine lacks and tests/gpu/device-issue16.sh, into DEST (default
# /work/main/.gpu/gpu-helper: the device tool copies /work/main, and .gpu/ is ignored there), for `run`
# with carry [".gpu/gpu-helper"] and `bash .gpu/gpu-helper/device-issue16.sh STEPS` there.
#   tests/gpu/stage-issue16.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/gpu-helper}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
cmake --build "$build" -j2 --target test_cuda_kernels test_cuda_engine bench_engine bench_encoder lab_lstm_layer rnntd \
  ${EXTRA_TARGETS:-}
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/tests/gpu/test_cuda_kernels "$build"/tests/gpu/test_cuda_engine \
  "$build"/tests/bench/bench_engine "$build"/tests/bench/bench_encoder "$build"/kernels/dev/lab_lstm_layer \
  "$build"/server/rnntd ${EXTRA_BINS:-}
cp tests/gpu/device-issue16.sh tests/gpu/device-common.sh tests/bench/loadgen.py "$dest/"
du -sh "$dest"
