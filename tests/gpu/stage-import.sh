#!/bin/bash
# Issue 19: stage the CUDA-enabled CLI, the MLPerf fixture converted by rnntd_import and its audio into
# DEST (default /work/main/.gpu/nemo) for `run` with carry [".gpu/nemo"] and `bash .gpu/nemo/device-import.sh`;
# for its `nemo` step also test_nemo, test_cuda_kernels and test_cuda_engine with the data they read
# (this checkout's NeMo conversions, NeMo's transcripts and clips, the golden models) under DEST/root.
#   tests/gpu/stage-import.sh [BUILD_DIR]     (default build-cuda)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
dest=${DEST:-/work/main/.gpu/nemo}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target rnnt-transcribe
mkdir -p "$dest"
cmake --build "$build" -j2 --target bench_engine test_nemo test_cuda_kernels test_cuda_engine
tests/gpu/stage-pack.sh "$dest" "$build"/engine/rnnt-transcribe "$build"/tests/bench/bench_engine "$build"/tests/engine/test_nemo \
  "$build"/tests/gpu/test_cuda_kernels "$build"/tests/gpu/test_cuda_engine
rm -rf "$dest/root" && mkdir -p "$dest/root/tests/data/nemo/models"
cp -r tests/data/nemo/imported "$dest/root/tests/data/nemo/"
cp -r tests/data/golden "$dest/root/tests/data/"
cp tests/data/nemo/models/index.json "$dest/root/tests/data/nemo/models/"
python3 - "$dest/root" <<'PY'
import json, os, shutil, sys
for c in json.load(open("tests/data/nemo/models/index.json"))["clips"]:
    os.makedirs(os.path.join(sys.argv[1], os.path.dirname(c)), exist_ok=True)
    shutil.copy(c, os.path.join(sys.argv[1], c))
PY
rm -rf "$dest/data" && mkdir -p "$dest/data/audio"
py=/usr/bin/python3; [ -x .venv/bin/python ] && py=$PWD/.venv/bin/python
(cd models && $py -m rnntd_import.mlperf ../tests/data/mlperf/rnnt-small.pt "$dest/data/mlperf" --force)
cp tests/data/mlperf/transcripts.json "$dest/data/"
python3 - "$dest/data/audio" <<'PY'
import json, shutil, sys
for u in json.load(open("tests/data/mlperf/transcripts.json"))["utterances"].values():
    shutil.copy(u["wav"], sys.argv[1])
PY
cp tests/gpu/device-import.sh tests/gpu/device-common.sh "$dest/"
du -sh "$dest"
