#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-issue16.sh here and a `run` carrying
# .gpu/gpu-helper: the issue 16 steps. Logs go to $OUT (at most 8 files come back).
#   bash .gpu/gpu-helper/device-issue16.sh STEPS   STEPS: comma list of
#   env,model,tests,sanitize,engine,decode,sweep,encoder,lab,load2
# env: the machine; model: the random MLPerf-shaped model (models/rnntd_ref); tests: test_cuda_kernels and
# test_cuda_engine in full (the engine test on the MLPerf and shipped models too); sanitize: memcheck on
# both quick tests, racecheck on the kernel test; engine: bench_engine under each staging setting (the
# single-chunk, caller-only setting is the old scheme), 1 and 2 workers; encoder: bench_encoder (ours vs
# cuDNN); decode: bench_engine with 1, 2, 4 (default) and 8 decoding steps per WHILE iteration, and
# bench_engine_base (a build of an earlier commit, when packed) for the A/B; sweep: the predictor's rows
# at once (RNNT_CUDA_PRED_ROWS 1/2/4/8) and the fused decoding loop (RNNT_CUDA_DECODE=fused, groups
# 1/2/4/8) on both models; lab: lab_lstm_layer; load2: rnntd (fp16, max_batch 256, 2 workers) over HTTP, 512 clients.
set -u
steps=${1:-env,model,tests,sanitize,engine}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/gh cudnn cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
MODEL=/tmp/mlperf
M=models/en-char-small

if has env; then
  { log env; nvidia-smi; nproc; free -g | head -2; for b in $B/*; do ldd $b | grep -i "not found"; done; } > "$OUT/env.log" 2>&1
  grep -E "H100|H200|Driver|^[0-9]+$" "$OUT/env.log" | head -4
fi

if has model; then
  log "random MLPerf-shaped model"
  (cd models && timeout $(tmo 240) python3 -m rnntd_ref.random_model --preset mlperf --seed 1 --out $MODEL) 2>&1 | tail -2
fi

if has tests; then
  { log test_cuda_kernels; timeout $(tmo 150) $B/test_cuda_kernels; echo "exit $?"
    log "test_cuda_engine (RNNT_GPU_MODELS: the MLPerf-shaped and shipped models)"
    RNNT_GPU_MODELS=$MODEL:$M timeout $(tmo 260) $B/test_cuda_engine; echo "exit $?"; } > "$OUT/tests.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|\[  FAILED|identical|stage:|ERROR|differ" "$OUT/tests.log" | cut -c1-260
fi

if has sanitize; then
  { for t in test_cuda_kernels test_cuda_engine; do
      log "compute-sanitizer --tool memcheck $t (RNNT_TEST_QUICK=1)"
      OPENBLAS_NUM_THREADS=1 RNNT_TEST_QUICK=1 timeout $(tmo 150) compute-sanitizer --tool memcheck --error-exitcode 9 $B/$t 2>&1 | tail -12
      echo "exit ${PIPESTATUS[0]}"
    done
    log "compute-sanitizer --tool racecheck test_cuda_engine test_generated, every runner on the fused decoding loop (RNNT_TEST_QUICK=1 RNNT_CUDA_MAPPED=0 RNNT_CUDA_GRAPHS=0)"
    RNNT_CUDA_DECODE=fused RNNT_TEST_ONLY=test_generated OPENBLAS_NUM_THREADS=1 RNNT_CUDA_MAPPED=0 RNNT_CUDA_GRAPHS=0 RNNT_TEST_QUICK=1 \
      timeout $(tmo 150) compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine 2>&1 | tail -12
    echo "exit ${PIPESTATUS[0]}"
    log "compute-sanitizer --tool racecheck test_cuda_kernels (RNNT_TEST_QUICK=1 RNNT_CUDA_MAPPED=0)"
    OPENBLAS_NUM_THREADS=1 RNNT_CUDA_MAPPED=0 RNNT_TEST_QUICK=1 timeout $(tmo 120) compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_kernels 2>&1 | tail -12
    echo "exit ${PIPESTATUS[0]}"; } > "$OUT/sanitize.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|RACECHECK SUMMARY|stage:" "$OUT/sanitize.log"
fi

if has engine && [ -f $MODEL/model.yaml ]; then
  # old: the whole batch as one chunk by the calling thread, then one transfer (the scheme before cu_stage)
  { for setting in "old RNNT_CUDA_STAGE_THREADS=0 RNNT_CUDA_STAGE_CHUNK=100000000000" "chunked RNNT_CUDA_STAGE_THREADS=0" \
                   "default RNNT_TEST_QUICK=0" "7-helpers RNNT_CUDA_STAGE_THREADS=7"; do
      set -- $setting
      for mdl in $MODEL $M; do
        log "bench_engine $mdl, staging $1 ($2 ${3:-})"
        env $2 ${3:-} timeout $(tmo 60) $B/bench_engine $mdl --batches 1,32,256 --seconds 10 --reps 7 --workers 2 --extras 0
        echo "exit $?"
      done
    done
    log "bench_engine $MODEL, default staging, with the time split and big blanks off"
    timeout $(tmo 60) $B/bench_engine $MODEL --batches 1,32,256 --seconds 10 --reps 7; echo "exit $?"
  } > "$OUT/bench_engine.log" 2>&1
  grep -E "^== |^\| [0-9]|exit|workers \(" "$OUT/bench_engine.log" | cut -c1-200
fi

if has decode && [ -f $MODEL/model.yaml ]; then
  { for mdl in $M $MODEL; do
      if [ -x $B/bench_engine_base ]; then
        log "bench_engine_base $mdl (${BASE_NOTE:-an earlier build})"
        timeout $(tmo 60) $B/bench_engine_base $mdl --batches 1,32,256 --seconds 10 --reps 7 --extras 0; echo "exit $?"
      fi
      for u in 1 2 8 4; do
        log "bench_engine $mdl, RNNT_CUDA_DECODE_UNROLL=$u"
        RNNT_CUDA_DECODE_UNROLL=$u timeout $(tmo 60) $B/bench_engine $mdl --batches 1,32,256 --seconds 10 --reps 7 --extras 0
        echo "exit $?"
      done
      log "bench_engine $mdl, default, with the time split and big blanks off"
      timeout $(tmo 60) $B/bench_engine $mdl --batches 1,32,256 --seconds 10 --reps 7; echo "exit $?"
    done; } > "$OUT/bench_decode.log" 2>&1
  grep -E "^== |^\| [0-9]|exit" "$OUT/bench_decode.log" | cut -c1-200
fi

if has sweep && [ -f $MODEL/model.yaml ]; then
  { for mdl in $M $MODEL; do
      for setting in "RNNT_CUDA_PRED_ROWS=1" "RNNT_CUDA_PRED_ROWS=2" "RNNT_CUDA_PRED_ROWS=4" "RNNT_CUDA_PRED_ROWS=8" \
                     "RNNT_CUDA_DECODE=fused RNNT_CUDA_DEC_GROUP=1" "RNNT_CUDA_DECODE=fused RNNT_CUDA_DEC_GROUP=2" \
                     "RNNT_CUDA_DECODE=fused RNNT_CUDA_DEC_GROUP=4" "RNNT_CUDA_DECODE=fused RNNT_CUDA_DEC_GROUP=8"; do
        log "bench_engine $mdl, $setting"
        env $setting timeout $(tmo 60) $B/bench_engine $mdl --batches 1,32,256 --seconds 10 --reps 7 --extras 0; echo "exit $?"
      done
    done; } > "$OUT/bench_sweep.log" 2>&1
  grep -E "^== |^\| [0-9]|exit" "$OUT/bench_sweep.log" | cut -c1-200
fi

if has encoder; then
  log bench_encoder; timeout $(tmo 180) $B/bench_encoder > "$OUT/bench_encoder.log" 2>&1; echo "exit $?"; tail -30 "$OUT/bench_encoder.log"
fi

if has lab; then
  log lab; timeout $(tmo 120) $B/lab_lstm_layer ${LAB_ARGS:-} > "$OUT/lab.log" 2>&1; echo "exit $?"; tail -40 "$OUT/lab.log"
fi

if has load2; then
  # rnntd fp16, max_batch 256, 2 workers, shipped model; 8 loadgen processes x 64 clients of random 10 s utterances
  printf 'server:\n  http_threads: 8\n  max_connections: 1024\nbatching:\n  workers: 2\n  max_batch: 256\n  max_delay_us: 10000\n  max_queue: 4096\nlog:\n  requests: false\n' > /tmp/gh/rnntd.yaml
  # LOAD_SETTINGS: "NAME VAR=VAL [VAR=VAL]" entries separated by ';'
  IFS=';' read -ra settings <<< "${LOAD_SETTINGS:-old RNNT_CUDA_STAGE_THREADS=0 RNNT_CUDA_STAGE_CHUNK=100000000000;default RNNT_TEST_QUICK=0}"
  for setting in "${settings[@]}"; do
    set -- $setting
    log "rnntd load, staging $1"
    env $2 ${3:-} $B/rnntd --config /tmp/gh/rnntd.yaml --model $M --backend cuda --port 0 2> "$OUT/rnntd-$1.log" &
    PID=$!; PORT=""
    for _ in $(seq 600); do
      grep -q 'msg=ready' "$OUT/rnntd-$1.log" && { PORT=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' "$OUT/rnntd-$1.log"); break; }
      sleep 0.1
    done
    rm -f /tmp/gh/load-*.json
    for p in $(seq 8); do
      timeout $(tmo 60) python3 "$H/loadgen.py" --url http://127.0.0.1:$PORT --frames 1000 --utterances 16 --seed $p \
        --concurrency 64 --duration 15 --warmup 3 --timeout 60 --json > /tmp/gh/load-$p.json 2>&1 &
    done
    wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
    python3 - /tmp/gh/load-*.json <<'PY'
import json, sys
reps = [json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:]]
print("  %d ok, throughput %.1f requests/s, %.0f audio s/s; p50 %s p99 %s; mean batch %s" % (
    sum(r["requests_ok"] for r in reps), sum(r["requests_per_s"] for r in reps), sum(r["audio_s_per_s"] for r in reps),
    [r["latency_ms"]["p50"] for r in reps], [r["latency_ms"]["p99"] for r in reps], reps[0]["server"]["mean_batch_size"]))
PY
    kill -TERM $PID; wait $PID; echo "rnntd exit $?"
  done 2>&1 | tee "$OUT/load2.log"
fi
log done
