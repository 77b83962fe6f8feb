#!/bin/bash
# On the GPU machine after a merge of several branches: every gpu-labelled test, the daemon's CUDA audio
# and stream paths, bench_engine on the shipped model, and the daemon's lone-request and 512-client load,
# in one call. Here: tests/gpu/stage-gpu-label.sh build-cuda and
# tests/gpu/stage-pack.sh /work/main/.gpu/bench build-cuda/tests/bench/bench_engine; there:
#   bash tests/gpu/device-merge-check.sh        (run with carry [".gpu/label", ".gpu/bench"])
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
step() { echo "== $1 ($(date +%T))"; }
step "gpu label"
BUDGET_S=170 bash .gpu/label/device-gpu-label.sh > "$OUT/label.txt" 2>&1; echo "exit $?"; tail -22 "$OUT/label.txt"
step "daemon audio (CUDA frontend)"
BUDGET_S=80 bash .gpu/label/device-gpufe.sh daemon > "$OUT/gpufe.txt" 2>&1; echo "exit $?"; tail -5 "$OUT/gpufe.txt"
step "WebSocket streams against a CUDA daemon"
timeout 100 bash .gpu/label/device-cudastream.sh server > "$OUT/stream.txt" 2>&1; echo "exit $?"; tail -5 "$OUT/stream.txt"
step "bench_engine on the shipped model"
(steps=x; source tests/gpu/device-common.sh; open_pack .gpu/bench/pack.tar.xz /tmp/bench cublas cuda_runtime
 timeout 90 $B/bench_engine models/en-char-small --batches 1,16,32,64,256 --seconds 10 --reps 7 --extras 0) \
  > "$OUT/bench.txt" 2>&1; echo "exit $?"; tail -14 "$OUT/bench.txt"
step "daemon load: a lone request, then 512 clients"
PACK=.gpu/label/pack.tar.xz BUDGET_S=160 bash tests/gpu/device-daemon.sh load > "$OUT/load.txt" 2>&1; echo "exit $?"
tail -30 "$OUT/load.txt"
