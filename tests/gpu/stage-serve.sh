#!/bin/bash
# Build rnntd, the C load client loadc and bench_engine with CUDA (sm_90) and stage them, with the libraries
# the GPU machine lacks, the load tool and tests/gpu/device-serve.sh, into /work/main/.gpu/serve/ (ignored by
# git; DEST: another folder): the device copies /work/main, not a worktree, so the script and loadgen.py of
# this checkout travel in the carry [".gpu/serve"].
#   tests/gpu/stage-serve.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/serve}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target rnntd loadc bench_engine
tests/gpu/stage-pack.sh "$dest" "$build"/server/rnntd "$build"/tests/bench/loadc "$build"/tests/bench/bench_engine
cp tests/bench/loadgen.py tests/gpu/device-serve.sh "$dest/"
ls -la "$dest"
