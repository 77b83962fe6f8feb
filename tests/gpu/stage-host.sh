#!/bin/bash
# Packs what tests/gpu/device-host.sh runs on the GPU machine (issue 16 §3, host side) into DEST
# (default /work/main/.gpu/host): test_submit, test_cuda_engine, test_stream, bench_engine, rnntd,
# built here for sm_90 in BUILD_DIR (default build-cuda), with the scripts.
#   tests/gpu/stage-host.sh [BUILD_DIR]      then run `bash .gpu/host/device-host.sh [STEPS]` carrying .gpu/host
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/host}
cmake --build "$build" -j2 --target test_submit test_cuda_engine test_stream bench_engine rnntd
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/tests/engine/test_submit "$build"/tests/gpu/test_cuda_engine \
  "$build"/tests/engine/test_stream "$build"/tests/bench/bench_engine "$build"/server/rnntd
cp tests/gpu/device-host.sh tests/gpu/device-common.sh tests/bench/loadgen.py "$dest/"
