#!/bin/bash
# Issue 16 §1, session 6 (helper enc6): build the layer wavefront lab, bench_encoder and test_cuda_kernels here for
# sm_90 and pack them with the shared libraries the GPU machine lacks into /work/main/.gpu/enc6 (ignored there),
# for `run` with carry [".gpu/enc6"] and `bash .gpu/enc6/device-chip6.sh` there.
#   kernels/dev/stage-chip6.sh [BUILD_DIR]      (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/enc6}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
nice cmake --build "$build" -j2 --target lab_lstm_wave test_cuda_kernels bench_encoder
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/kernels/dev/lab_lstm_wave "$build"/tests/gpu/test_cuda_kernels \
  "$build"/tests/bench/bench_encoder
cp kernels/dev/device-chip6.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
