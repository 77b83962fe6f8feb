#!/bin/bash
# Run 5 of the decode3 helper: racecheck of k_dec_grid alone (the final build, run 4's pack), graphs off and results
# through a device buffer (the tool failed in the encoder's cuBLAS GEMM with graphs on in runs 3-4; mapped host writes
# crashed it before: cu_decoder.h). Carry [".gpu/decode3d"]:  bash .gpu/decode3d/device-decode3e.sh
steps=all
source .gpu/decode3d/device-common.sh
budget=${BUDGET_S:-110}
open_pack .gpu/decode3d/pack.tar.xz /tmp/gd cublas cuda_runtime cufft
export RNNT_CUDA_GRAPHS=0 RNNT_CUDA_MAPPED=0 RNNT_CUDA_DECODE=grid
for t in 3 0; do
  log "racecheck k_dec_grid tile $t: bench_engine B 17,130, 2 s utterances"
  RNNT_CUDA_DEC_GRID_TILE=$t timeout $(tmo 45) compute-sanitizer --tool racecheck --kernel-name kns=k_dec_grid \
    --print-limit 5 --error-exitcode 9 $B/bench_engine models/en-char-small --batches 17,130 --seconds 2 --reps 1 \
    --extras 0 > $OUT/racecheck$t.log 2>&1
  echo "exit $?"; grep -v "^model\|^$\|^|---" $OUT/racecheck$t.log | head -24
done
