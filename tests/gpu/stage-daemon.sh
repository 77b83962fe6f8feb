#!/bin/bash
# Build rnntd, rnnt-transcribe, bench_engine and test_cuda_engine with CUDA (sm_90) and stage them with the shared libraries the GPU
# machine lacks into .gpu/daemon/ (ignored by git), for `run` with carry [".gpu/daemon"] and
# tests/gpu/device-daemon.sh there. A build folder of its own, so it never races stage-device.sh.
# Also .gpu/race/: test_cuda_engine and rnnt-transcribe (9 MB instead of 12), for the engine test, the CLI
# parity and the racecheck in a run that shares its carry with a training piece (device-daemon.sh with
# PACK=.gpu/race/pack.tar.xz, steps cli,unit,racecheck).
#   tests/gpu/stage-daemon.sh [BUILD_DIR]     (default build-cuda-daemon)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda-daemon}
dest=.gpu/daemon
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target rnntd rnnt-transcribe bench_engine test_cuda_engine loadc
tests/gpu/stage-pack.sh "$dest" "$build"/server/rnntd "$build"/engine/rnnt-transcribe "$build"/tests/bench/bench_engine "$build"/tests/bench/loadc \
  "$build"/tests/gpu/test_cuda_engine
tests/gpu/stage-pack.sh .gpu/race "$build"/tests/gpu/test_cuda_engine "$build"/engine/rnnt-transcribe
