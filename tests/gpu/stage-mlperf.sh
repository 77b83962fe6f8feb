#!/bin/bash
# The whole engine at large batch on the MLPerf-shaped model (issue 16 §2 and its whole-engine target): builds
# bench_engine, test_cuda_engine and test_submit here (sm_90) and packs them, with the shared libraries the GPU machine lacks and
# tests/gpu/device-mlperf.sh, into DEST (default /work/main/.gpu/mlperf: the device tool copies /work/main, and .gpu/ is
# ignored there), for `run` with carry [".gpu/mlperf"] and `bash .gpu/mlperf/device-mlperf.sh STEPS` there.
#   tests/gpu/stage-mlperf.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/mlperf}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
nice cmake --build "$build" -j2 --target bench_engine test_cuda_engine test_submit
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/tests/bench/bench_engine "$build"/tests/gpu/test_cuda_engine \
  "$build"/tests/engine/test_submit
cp tests/gpu/device-mlperf.sh tests/gpu/device-common.sh tests/gpu/nsys_gaps.py "$dest/"
du -sh "$dest"
