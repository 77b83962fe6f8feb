#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-devices.sh here and a `run` carrying
# .gpu/multigpu: tests/server/test_devices.py on the CUDA backend, model.devices [0, 0] (two runner sets on
# one GPU), fp32 on a golden model and on the shipped model (ctest gpu_daemon_devices runs the same), then
# fp16 on the shipped model. One log each in $OUT. BUDGET_S (default 120) bounds the whole script.
set -u
steps=all
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
budget=${BUDGET_S:-120}
open_pack "$H/pack.tar.xz" /tmp/dv cublas cuda_runtime cufft
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
export RNNTD_BIN=$B/rnntd RNNTD_TEST_BACKEND=cuda PYTHONDONTWRITEBYTECODE=1
fails=0
for run in "golden_fp32 tests/data/golden/hard_bb fp32" "shipped_fp32 models/en-char-small fp32" \
           "shipped_fp16 models/en-char-small fp16"; do
  set -- $run
  log "$1"
  start=$SECONDS
  RNNTD_MODEL=$2 RNNTD_TEST_PRECISION=$3 timeout $(tmo 100) python3 "$H/test_devices.py" -v > "$OUT/$1.log" 2>&1
  rc=$?
  echo "$1: exit $rc ($((SECONDS - start)) s)"; tail -4 "$OUT/$1.log"
  [ $rc -eq 0 ] || { fails=$((fails + 1)); tail -30 "$OUT/$1.log"; }
done
echo "failed: $fails"
