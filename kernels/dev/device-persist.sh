#!/bin/bash
# On the GPU machine (after tests/gpu/stage-device.sh here, `run` with carry [".gpu/cuda-backend"]):
# tests, lab, encoder benchmark through tests/gpu/device-run.sh, then ncu on the persistent kernel.
#   kernels/dev/device-persist.sh [STEPS for device-run.sh]   (BUDGET_S as there)
set -u
OUT=${OUT:-/tmp/out}
BUDGET_S=${BUDGET_S:-250} tests/gpu/device-run.sh "${1:-env,tests,lab,encoder}"
B=/tmp/cb/bin L=/tmp/cb/lib
export LD_LIBRARY_PATH=$L:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if [ -n "${NCU:-}" ] && command -v ncu >/dev/null; then
  { for b in ${NCU_B:-1 32}; do
      echo "== ncu: persistent kernel (counter) H=1024 B=$b T=300"
      timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        -k regex:k_persist -c 1 $B/lab_lstm_layer 5 1024 $b 300
    done; } > "$OUT/ncu.log" 2>&1
  grep -E "^== |Duration|Throughput|L2 Hit|Stall|Warp Cycles|Mem Busy|Max Bandwidth|L1/TEX Hit" "$OUT/ncu.log" | cut -c1-150 | head -50
fi
