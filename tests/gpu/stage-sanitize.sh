#!/bin/bash
# The gpu-labelled tests under compute-sanitizer (tests/gpu/device-sanitize.sh): builds and packs the gpu label as
# tests/gpu/stage-gpu-label.sh does (its programs, tests.tsv) into DEST (default /work/main/.gpu/race7), with
# device-sanitize.sh and its job table; BASE_BIN=PROGRAM also packs an earlier build of a test program into DEST/base
# (the table's base:TEST jobs: a hazard before its fix). There: `run` with carry [".gpu/race7"] and
#   bash .gpu/race7/device-sanitize.sh
#   tests/gpu/stage-sanitize.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/race7}
# (stage-gpu-label.sh packs device-sanitize.sh and its job table too)
DEST=$dest tests/gpu/stage-gpu-label.sh "$build"
rm -rf "$dest/base"
[ -z "${BASE_BIN:-}" ] || tests/gpu/stage-pack.sh "$dest/base" "$BASE_BIN"
du -sh "$dest"
