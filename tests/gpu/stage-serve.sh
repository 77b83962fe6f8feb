#!/bin/bash
# Build rnntd with CUDA (sm_90) and stage it, with the libraries the GPU machine lacks, the load tool and
# tests/gpu/device-serve.sh, into /work/main/.gpu/serve/ (ignored by git): the device copies /work/main,
# not a worktree, so the script and loadgen.py of this checkout travel in the carry [".gpu/serve"].
#   tests/gpu/stage-serve.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/serve}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2 --target rnntd
tests/gpu/stage-pack.sh "$dest" "$build"/server/rnntd
cp tests/bench/loadgen.py tests/gpu/device-serve.sh "$dest/"
ls -la "$dest"
