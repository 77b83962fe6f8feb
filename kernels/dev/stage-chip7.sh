#!/bin/bash
# Issue 16 §1, session 7 (helper enc7): build the layer wavefront lab, bench_encoder and test_cuda_kernels here for
# sm_90 and pack them with the shared libraries the GPU machine lacks into /work/main/.gpu/enc7 (ignored there),
# for `run` with carry [".gpu/enc7"] and `bash .gpu/enc7/device-chip7.sh` there.
#   kernels/dev/stage-chip7.sh [BUILD_DIR]      (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/enc7}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
nice cmake --build "$build" -j2 --target lab_lstm_wave test_cuda_kernels bench_encoder
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/kernels/dev/lab_lstm_wave "$build"/tests/gpu/test_cuda_kernels \
  "$build"/tests/bench/bench_encoder
cp kernels/dev/device-chip7.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
