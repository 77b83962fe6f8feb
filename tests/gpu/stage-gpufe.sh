#!/bin/bash
# Issue 12 §2 (the frontend on the GPU): build the GPU frontend's test, the engine test and bench_engine
# here (sm_90) and pack them, with the shared libraries the GPU machine lacks and
# tests/gpu/device-gpufe.sh, into DEST (default /work/main/.gpu/gpufe: the device tool copies
# /work/main, and .gpu/ is ignored there), for `run` with carry [".gpu/gpufe"] and
# `bash .gpu/gpufe/device-gpufe.sh STEPS` there.
#   tests/gpu/stage-gpufe.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/gpufe}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target test_cuda_frontend test_cuda_engine test_cuda_kernels bench_engine rnntd ${EXTRA_TARGETS:-}
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/tests/gpu/test_cuda_frontend "$build"/tests/gpu/test_cuda_engine \
  "$build"/tests/gpu/test_cuda_kernels "$build"/tests/bench/bench_engine "$build"/server/rnntd ${EXTRA_BINS:-}
cp tests/gpu/device-gpufe.sh tests/gpu/device-common.sh tests/gpu/daemon_audio.py "$dest/"
du -sh "$dest"
