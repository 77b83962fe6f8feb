#!/bin/bash
# Every ctest test labelled `gpu`, packed for the GPU machine: builds the CUDA tree here (sm_90), reads
# the label's tests (commands and environments) from ctest itself, packs their programs with the
# libraries the GPU machine lacks into DEST (default /work/main/.gpu/label), and writes DEST/tests.tsv
# (name, program, environment) for tests/gpu/device-gpu-label.sh there (`run` with carry [".gpu/label"]).
# So the device runs exactly what `ctest -L gpu` would, with no list kept by hand.
#   tests/gpu/stage-gpu-label.sh [BUILD_DIR]     (default build-cuda)
# The pack also holds the daemon (bin/rnntd) and the scripts of device-gpufe.sh's `daemon` step and
# device-cudastream.sh's `server` step, so one carry also checks the daemon's CUDA audio and stream paths:
#   bash .gpu/label/device-gpufe.sh daemon; bash .gpu/label/device-cudastream.sh server
# and the label under compute-sanitizer (its job table, sanitize-jobs.txt): bash .gpu/label/device-sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/label}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRNNTD_WERROR=ON >/dev/null
cmake --build "$build" -j2
mkdir -p "$dest"
ctest --test-dir "$build" -L gpu --show-only=json-v1 | python3 -c '
import json, os, sys
root, out = sys.argv[1], sys.argv[2]
progs, rows = [], []
for t in json.load(sys.stdin)["tests"]:
    cmd = t["command"]
    if os.path.basename(cmd[0]).startswith("python"):
        # a daemon test in Python (gpu_daemon_devices): its own pack, tests/gpu/stage-devices.sh
        print("not packed here (tests/gpu/stage-devices.sh runs it): " + t["name"], file=sys.stderr)
        continue
    env = next((p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"), [])
    # the test data path is the checkout root on the device too
    env = [e.replace(root + "/", "") for e in env]
    if cmd[0] not in progs:
        progs.append(cmd[0])
    rows.append("\t".join([t["name"], " ".join([os.path.basename(cmd[0])] + cmd[1:]), " ".join(env)]))
open(out + "/tests.tsv", "w").write("\n".join(rows) + "\n")
open(out + "/progs.txt", "w").write("\n".join(progs) + "\n")
' "$PWD" "$dest"
mapfile -t progs < "$dest/progs.txt"
tests/gpu/stage-pack.sh "$dest" "${progs[@]}" "$build"/server/rnntd "$build"/tests/bench/loadc
mkdir -p "$dest/whl"
[ -n "$(ls "$dest"/whl/websockets-*.whl 2>/dev/null)" ] ||
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest/whl" websockets==12.0
cp tests/gpu/device-gpu-label.sh tests/gpu/device-common.sh tests/gpu/device-gpufe.sh tests/gpu/daemon_audio.py \
  tests/gpu/device-cudastream.sh tests/gpu/device-race-decoder.sh tests/gpu/device-sanitize.sh tests/gpu/sanitize-jobs.txt \
  tests/bench/stream_loadgen.py tests/server/test_stream.py tests/server/harness.py "$dest/"
cat "$dest/tests.tsv"
