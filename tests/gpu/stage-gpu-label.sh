#!/bin/bash
# Every ctest test labelled `gpu`, packed for the GPU machine: builds the CUDA tree here (sm_90), reads
# the label's tests (commands and environments) from ctest itself, packs their programs with the
# libraries the GPU machine lacks into DEST (default /work/main/.gpu/label), and writes DEST/tests.tsv
# (name, program, environment) for tests/gpu/device-gpu-label.sh there (`run` with carry [".gpu/label"]).
# So the device runs exactly what `ctest -L gpu` would, with no list kept by hand.
#   tests/gpu/stage-gpu-label.sh [BUILD_DIR]     (default build-cuda)
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
tests/gpu/stage-pack.sh "$dest" "${progs[@]}"
cp tests/gpu/device-gpu-label.sh tests/gpu/device-common.sh "$dest/"
cat "$dest/tests.tsv"
