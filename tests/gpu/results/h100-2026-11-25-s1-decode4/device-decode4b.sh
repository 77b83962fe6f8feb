#!/bin/bash
# Run 2 of the decode4 helper (issue 16 §3): the grid loop's kernel built for 1 block an SM (~195 registers, as in run 1)
# against the build for 2 (128 registers, the occupancy main had), with the counters' batch rule (counters up to 64
# utterances), in the same call, B 1-256; phase clocks of the 2-block build; then every gpu-labelled ctest test
# (device-gpu-label.sh, from the pack of stage-gpu-label.sh). Carry [".gpu/decode4", ".gpu/decode4-label"]:
#   BUDGET_S=200 bash .gpu/decode4/device-decode4b.sh
steps=all
source .gpu/decode4/device-common.sh
budget=${BUDGET_S:-200}
open_pack .gpu/decode4/pack.tar.xz /tmp/gd4 cublas cuda_runtime cufft
bench() { # [VAR=VALUE...]
  log "bench_engine ${BATCHES:-1,8,24,32,64,128,256} $*"
  env "$@" timeout $(tmo ${BT:-40}) $B/bench_engine models/en-char-small --batches ${BATCHES:-1,8,24,32,64,128,256} \
    --seconds 10 --reps ${REPS:-7} --extras 0 2>&1 | grep -E "^\| [0-9]|rror|cuda|dec_grid"
}
bench RNNT_CUDA_DEC_GRID_OCC=1
bench RNNT_CUDA_DEC_GRID_OCC=2
BATCHES=24,32,64,128,256 bench RNNT_CUDA_DEC_GRID_OCC=1
BATCHES=24,32,64,128,256 bench RNNT_CUDA_DEC_GRID_OCC=2
BATCHES=24,64,128,256 bench RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=1
BATCHES=24,64,128,256 bench RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_GRID_CNT=0
BATCHES=32,256 REPS=1 bench RNNT_CUDA_DEC_GRID_OCC=2 RNNT_CUDA_DEC_TRACE=1
export LD_LIBRARY_PATH=
BUDGET_S=$((budget - SECONDS)) bash .gpu/decode4-label/device-gpu-label.sh
