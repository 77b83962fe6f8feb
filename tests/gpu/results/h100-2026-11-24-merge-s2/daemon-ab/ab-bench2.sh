#!/bin/bash
steps=all
source tests/gpu/device-common.sh
for round in 1 2; do for pack in abold abnew abnew2; do
  D=/tmp/b_$pack; [ -d $D ] || unpack .gpu/$pack/pack.tar.xz $D
  export LD_LIBRARY_PATH=; use_libs $D/lib cublas cuda_runtime cufft
  log "bench_engine from .gpu/$pack, round $round"
  timeout 60 $D/bin/bench_engine models/en-char-small --batches 1,32,256 --seconds 10 --reps 7 --extras 0 2>&1 | grep -E "^\| [0-9]"
done; done
