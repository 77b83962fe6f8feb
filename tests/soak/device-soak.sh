#!/bin/bash
# On the GPU machine, from the repository root: the soak test (tests/soak/soak.py) against rnntd on the
# CUDA backend with the shipped model and configuration, after the engine's GPU tests on the shipped
# model. The pack comes from tests/gpu/stage-issue16.sh (DEST=/work/main/.gpu/coord here); run with
# carry [".gpu/coord"]:
#   bash tests/soak/device-soak.sh [SOAK_SECONDS]      (default 300; logs and the soak's files in $OUT)
set -u
steps=tests,soak
H=${PACK_DIR:-.gpu/coord}
source tests/gpu/device-common.sh
unpack "$H/pack.tar.xz" /tmp/soakpack
B=/tmp/soakpack/bin
use_libs /tmp/soakpack/lib cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
secs=${1:-300}

if has tests; then
  { log "test_cuda_engine (RNNT_GPU_MODELS: the shipped model)"
    RNNT_GPU_MODELS=models/en-char-small timeout $(tmo 200) $B/test_cuda_engine; echo "exit $?"; } > "$OUT/tests.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|identical" "$OUT/tests.log" | cut -c1-260
fi

if has soak; then
  # More valid clients than on the 2-core machine: a GPU worker drains far faster.
  log "soak ${secs} s, CUDA backend (conf/rnntd.yaml: backend auto, fp16)"
  timeout $(tmo $((secs + 90))) python3 tests/soak/soak.py --bin $B/rnntd --model models/en-char-small \
    --config conf/rnntd.yaml --duration "$secs" --valid 32 --malformed 4 --slow 8 --out "$OUT/soak" 2>&1 |
    tail -40
  echo "exit ${PIPESTATUS[0]}"
fi
