#!/bin/bash
# Issue 13 (CUDA streams) runs: build test_stream and rnntd with the CUDA backend here (sm_90) and pack them,
# with the libraries the GPU machine lacks, the websockets wheel the load generator needs (Python 3.12
# there) and tests/gpu/device-cudastream.sh, into DEST (default /work/main/.gpu/cudastream), for `run`
# with carry [".gpu/cudastream"] and `bash .gpu/cudastream/device-cudastream.sh STEPS` there.
#   tests/gpu/stage-cudastream.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/cudastream}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target test_stream rnntd
mkdir -p "$dest/whl"
[ -n "$(ls "$dest"/whl/websockets-*.whl 2>/dev/null)" ] ||
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 -d "$dest/whl" websockets==12.0
tests/gpu/stage-pack.sh "$dest" "$build"/tests/engine/test_stream "$build"/server/rnntd
cp tests/gpu/device-cudastream.sh tests/gpu/device-common.sh tests/bench/stream_loadgen.py tests/server/test_stream.py \
  tests/server/harness.py "$dest/"
du -sh "$dest"
