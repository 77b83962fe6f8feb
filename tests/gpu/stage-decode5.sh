#!/bin/bash
# The decode5 helper's GPU run (issue 16 §3, session 7): builds bench_engine, test_cuda_decoder and test_cuda_engine with
# the CUDA backend here (sm_90, RelWithDebInfo, -Werror) and packs them, with the libraries the GPU machine lacks,
# device-decode5.sh and device-common.sh into DEST (default /work/main/.gpu/decode5), for `run` with carry
# [".gpu/decode5"] and `BUDGET_S=240 bash .gpu/decode5/device-decode5.sh` there (run 2: device-decode5b.sh, which also
# needs DEST=/work/main/.gpu/decode5-label tests/gpu/stage-gpu-label.sh).
#   tests/gpu/stage-decode5.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/decode5}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
nice cmake --build "$build" -j2 --target bench_engine test_cuda_decoder test_cuda_engine
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/tests/bench/bench_engine "$build"/tests/gpu/test_cuda_decoder \
  "$build"/tests/gpu/test_cuda_engine
cp tests/gpu/device-decode5.sh tests/gpu/device-decode5b.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
