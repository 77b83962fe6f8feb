#!/bin/bash
# Build the layer wavefront lab (and, with WITH_ENCODER=1, bench_encoder and the GPU kernel tests) here for
# sm_90 and pack them with the shared libraries the GPU machine lacks into /work/main/.gpu/wave5 (ignored
# there), for `run` with carry [".gpu/wave5"] and `bash .gpu/wave5/device-wave5.sh` there.
#   kernels/dev/stage-wave5.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/wave5}
targets="lab_lstm_wave"
bins="$build/kernels/dev/lab_lstm_wave"
if [ "${WITH_ENCODER:-0}" = 1 ]; then
  targets="$targets test_cuda_kernels bench_encoder"
  bins="$bins $build/tests/gpu/test_cuda_kernels $build/tests/bench/bench_encoder"
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
nice cmake --build "$build" -j2 --target $targets
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" $bins
cp kernels/dev/device-wave5.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
