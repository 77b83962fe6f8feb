#!/bin/bash
# On the GPU machine after a merge of several branches: every gpu-labelled test, the daemon's CUDA audio
# and stream paths, bench_engine on the shipped model, and the daemon's lone-request and 512-client load,
# in one call. Here: tests/gpu/stage-gpu-label.sh build-cuda and
# tests/gpu/stage-pack.sh /work/main/.gpu/bench build-cuda/tests/bench/bench_engine; there:
#   bash tests/gpu/device-merge-check.sh        (run with carry [".gpu/label", ".gpu/bench"])
# MERGE_STEPS picks the steps (default label,gpufe,stream,bench,load); also:
#   race:  the gpu tests under compute-sanitizer: tests/gpu/device-sanitize.sh's job table (sanitize-jobs.txt), every
#          job or those named in SAN_ONLY, within RACE_BUDGET_S (default 150) and SAN_TOOL_TIMEOUT (140) per job;
#   serve: tests/gpu/device-serve.sh prof from the carried .gpu/serve2 (tests/gpu/stage-serve.sh with
#          DEST=/work/main/.gpu/serve2): the lone request and the C load client at 2,048 and 3,072 clients;
#   bench: takes bench_engine from .gpu/bench, or else from .gpu/serve2's pack.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
MERGE_STEPS=${MERGE_STEPS:-label,gpufe,stream,bench,load}
want() { [[ ",$MERGE_STEPS," == *",$1,"* ]]; }
step() { echo "== $1 ($(date +%T))"; }
if want label; then
  step "gpu label"
  BUDGET_S=${LABEL_BUDGET_S:-170} bash .gpu/label/device-gpu-label.sh > "$OUT/label.txt" 2>&1; echo "exit $?"
  tail -24 "$OUT/label.txt"
fi
if want race; then
  # sanitize-jobs.txt's jobs (all, or SAN_ONLY=name,...), many compute-sanitizer processes at once
  step "gpu tests under compute-sanitizer (sanitize-jobs.txt ${SAN_ONLY:-all jobs})"
  mkdir -p "$OUT/san"
  OUT=$OUT/san ONLY=${SAN_ONLY:-} BUDGET_S=${RACE_BUDGET_S:-150} TOOL_TIMEOUT=${SAN_TOOL_TIMEOUT:-140} \
    bash .gpu/label/device-sanitize.sh > "$OUT/san.txt" 2>&1
  echo "exit $?"; cut -c1-240 "$OUT/san/summary.txt" | head -90
fi
if want gpufe; then
  step "daemon audio (CUDA frontend)"
  BUDGET_S=80 bash .gpu/label/device-gpufe.sh daemon > "$OUT/gpufe.txt" 2>&1; echo "exit $?"; tail -5 "$OUT/gpufe.txt"
fi
if want stream; then
  step "WebSocket streams against a CUDA daemon"
  timeout 100 bash .gpu/label/device-cudastream.sh server > "$OUT/stream.txt" 2>&1; echo "exit $?"; tail -5 "$OUT/stream.txt"
fi
if want bench; then
  step "bench_engine on the shipped model"
  bpack=.gpu/bench/pack.tar.xz; [ -f $bpack ] || bpack=.gpu/serve2/pack.tar.xz
  (steps=x; source tests/gpu/device-common.sh; open_pack $bpack /tmp/bench cublas cuda_runtime
   timeout 90 $B/bench_engine models/en-char-small --batches 1,16,32,64,256 --seconds 10 --reps 7 --extras 0) \
    > "$OUT/bench.txt" 2>&1; echo "exit $?"; tail -14 "$OUT/bench.txt"
fi
if want load; then
  step "daemon load: a lone request, then 512 clients"
  PACK=.gpu/label/pack.tar.xz BUDGET_S=160 bash tests/gpu/device-daemon.sh load > "$OUT/load.txt" 2>&1; echo "exit $?"
  tail -30 "$OUT/load.txt"
fi
if want serve; then
  step "daemon over HTTP with the C load client (2 workers, max_delay 30 ms)"
  mkdir -p "$OUT/serve"
  OUT=$OUT/serve BUDGET_S=${SERVE_BUDGET_S:-90} \
    PROF=${SERVE_PROF:-"w2-d30:2:256:30000:8:lone-http/1/1/8/http+c-2048/8/256/12/c+c-3072/8/384/12/c"} \
    bash .gpu/serve2/device-serve.sh prof > "$OUT/serve.txt" 2>&1; echo "exit $?"
  tail -40 "$OUT/serve.txt"
fi
# The device returns at most a few files a call (the session of 2026-11-25 lost the race and serve logs to that
# limit): everything goes back as one archive.
if [ "${MERGE_PACK_LOGS:-1}" = 1 ]; then
  (cd "$OUT" && find . -type f ! -name logs.tar.xz -print0 | tar --null -cJf logs.tar.xz -T - &&
    find . -type f ! -name logs.tar.xz -delete && find . -mindepth 1 -type d -empty -delete)
  ls -la "$OUT"
fi
