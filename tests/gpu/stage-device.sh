#!/bin/bash
# Build the GPU test, lab and benchmark programs here (sm_90) and stage them with the shared libraries the
# GPU machine lacks into .gpu/cuda-backend/ (ignored by git), for `run` with carry [".gpu/cuda-backend"]
# and tests/gpu/device-run.sh there.
#   tests/gpu/stage-device.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=.gpu/cuda-backend
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
cmake --build "$build" -j2 --target test_cuda_kernels test_cuda_engine bench_encoder bench_engine bench_parity lab_lstm_layer
# $dest/parity (test features, made by hand) stays
tests/gpu/stage-pack.sh "$dest" "$build"/tests/gpu/test_cuda_kernels "$build"/tests/gpu/test_cuda_engine \
  "$build"/tests/bench/bench_encoder "$build"/tests/bench/bench_engine "$build"/tests/bench/bench_parity \
  "$build"/kernels/dev/lab_lstm_layer
