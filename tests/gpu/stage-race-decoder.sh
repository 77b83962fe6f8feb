#!/bin/bash
# The decoding loop's sanitizer runs (tests/gpu/test_cuda_decoder.cu): builds test_cuda_decoder with the CUDA backend
# here (sm_90, RelWithDebInfo, -Werror) and packs it, with the libraries the GPU machine lacks, device-race-decoder.sh
# and device-common.sh into DEST (default /work/main/.gpu/race6), for `run` with carry [".gpu/race6"] and
# `bash .gpu/race6/device-race-decoder.sh [STEPS]` there (~5 MB).
#   tests/gpu/stage-race-decoder.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/race6}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target test_cuda_decoder
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/tests/gpu/test_cuda_decoder
cp tests/gpu/device-race-decoder.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
