#!/bin/bash
# model.devices on one GPU (issue 18): builds rnntd with CUDA (sm_90) and packs it, with the libraries the
# GPU machine lacks and the daemon test (tests/server/test_devices.py + harness.py), into DEST (default
# /work/main/.gpu/multigpu), for `run` with carry [".gpu/multigpu"] and `bash .gpu/multigpu/device-devices.sh`.
#   tests/gpu/stage-devices.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/multigpu}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON -DRNNTD_CUDA=ON >/dev/null
cmake --build "$build" -j2 --target rnntd
mkdir -p "$dest"
tests/gpu/stage-pack.sh "$dest" "$build"/server/rnntd
cp tests/gpu/device-devices.sh tests/gpu/device-common.sh tests/server/test_devices.py tests/server/harness.py "$dest/"
ls -la "$dest"
