#!/bin/bash
# Build the layer wavefront lab, the GPU kernel tests and bench_encoder here (sm_90) and pack them with
# the shared libraries the GPU machine lacks into /work/main/.gpu/wave (ignored there), for `run` with
# carry [".gpu/wave"] and `bash .gpu/wave/device-wave.sh` there.   kernels/dev/stage-wave.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/wave}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
cmake --build "$build" -j2 --target lab_lstm_wave test_cuda_kernels bench_encoder
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/kernels/dev/lab_lstm_wave "$build"/tests/gpu/test_cuda_kernels "$build"/tests/bench/bench_encoder
cp kernels/dev/device-wave.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
