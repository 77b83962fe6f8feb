#!/bin/bash
# Issue 16 §2 (encoder helper): build the kernel tests, lab_lstm_layer and bench_encoder here (sm_90) and pack
# them with the shared libraries the GPU machine lacks into /work/main/.gpu/encoder (ignored there), for `run`
# with carry [".gpu/encoder"] and `bash .gpu/encoder/device-encoder.sh STEPS` there.
#   kernels/dev/stage-encoder.sh [BUILD_DIR]      (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/encoder}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_KERNEL_LAB=ON >/dev/null
cmake --build "$build" -j2 --target lab_lstm_layer test_cuda_kernels bench_encoder ${EXTRA_TARGETS:-}
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/kernels/dev/lab_lstm_layer "$build"/tests/gpu/test_cuda_kernels \
  "$build"/tests/bench/bench_encoder ${EXTRA_BINS:-}
cp kernels/dev/device-encoder.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
