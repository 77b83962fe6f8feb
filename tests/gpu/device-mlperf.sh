#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-mlperf.sh here and a `run` carrying .gpu/mlperf:
# the whole engine on the random MLPerf-shaped model at batches of 256-2048 (10 s utterances). Logs go to $OUT.
#   bash .gpu/mlperf/device-mlperf.sh STEPS    STEPS: comma list of model,test,bench,async,asyncab,sweep,nsys
# model: the model (models/rnntd_ref, seed 1, /tmp/mlperf); test: test_cuda_engine's runner of RNNT_MAX_BATCH and the
# large-batch test (quick); bench: bench_engine's time split per batch (encoder, decode loop, host; synchronous calls);
# async: bench_engine --async 1 (two batches in flight: host staging hidden) and the device memory per utterance;
# asyncab: the same at ASYNC_AB_BATCHES (default 1024,2048) with RNNT_CUDA_EARLY_ENCODER=0 (the next batch's encoder
# enqueued by the running batch's collect, as before; the async step is the default), or under ASYNC_AB (';'-separated
# "NAME VAR=VAL [VAR=VAL]" settings); ASYNC_REPS (default 4) batches a round, plus one;
# sweep: the large runners under the switches of the encoder's recurrent GEMM (RNNT_CUDA_R_REC rows per call,
# RNNT_CUDA_LSTREAM_SMS) and of the decode loop (the grid loop, tile 2). BATCHES (default 256,512,1024,2048),
# SWEEP_BATCHES (default 2048), SWEEP (';'-separated "NAME VAR=VAL [VAR=VAL]" settings) override.
# nsys: bench_engine --async 1 at NSYS_BATCHES (default 2048) under Nsight Systems (CUDA API, OS runtime, graphs as
# wholes) for each NSYS_AB setting (default: the decoder on the encoder's stream, then on its own), and nsys_gaps.py's
# account of the GPU's idle time (summary in nsys.log, each gap in nsys-timeline-NAME.txt), cuda_api_sum and osrt_sum.
set -u
steps=${1:-model,test,bench,async,sweep}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/mp cublas cuda_runtime
export RNNT_TEST_DATA=$PWD/tests/data
MODEL=/tmp/mlperf
BATCHES=${BATCHES:-256,512,1024,2048}

if has model; then
  log "random MLPerf-shaped model"; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
  (cd models && timeout $(tmo 120) python3 -m rnntd_ref.random_model --preset mlperf --seed 1 --out $MODEL) 2>&1 | tail -2
fi

if has test; then
  { log "test_cuda_engine: test_runner_max (full)"; RNNT_TEST_ONLY=test_runner_max timeout $(tmo 150) $B/test_cuda_engine; echo "exit $?"
    log "test_cuda_engine: ${ENGINE_TESTS:-test_large_batch} (quick)"
    RNNT_TEST_QUICK=1 RNNT_TEST_ONLY="${ENGINE_TESTS:-test_large_batch}" timeout $(tmo 100) $B/test_cuda_engine
    echo "exit $?"
    for prec in ${SUBMIT_PRECS:-fp32 fp16}; do
      log "test_submit on CUDA, $prec (two batches in flight: the next batch's encoder enqueued at submit)"
      RNNT_TEST_BACKEND=cuda RNNT_TEST_PRECISION=$prec timeout $(tmo 100) $B/test_submit; echo "exit $?"
    done; } > "$OUT/test.log" 2>&1
  grep -E "^== |exit |PASSED|FAILED|runners of|batches of|differs|seed" "$OUT/test.log" | cut -c1-240
fi

if has bench && [ -f $MODEL/model.yaml ]; then
  { log "bench_engine $MODEL --batches $BATCHES --seconds 10 --reps 5 --extras 0 (synchronous: the time split)"
    timeout $(tmo 150) $B/bench_engine $MODEL --batches $BATCHES --seconds 10 --reps 5 --extras 0; echo "exit $?"; } \
    > "$OUT/bench.log" 2>&1
  grep -E "^== |^\| [0-9]|exit|^model" "$OUT/bench.log" | cut -c1-200
fi

if has async && [ -f $MODEL/model.yaml ]; then
  { log "bench_engine $MODEL --batches $BATCHES --seconds 10 --reps ${ASYNC_REPS:-4} --async 1"
    timeout $(tmo 150) $B/bench_engine $MODEL --batches $BATCHES --seconds 10 --reps ${ASYNC_REPS:-4} --async 1; echo "exit $?"; } \
    > "$OUT/async.log" 2>&1
  grep -E "^== |^\| [0-9]|exit" "$OUT/async.log" | cut -c1-200
fi

# bench_settings LOG SETTINGS BATCHES ARGS...: bench_engine $MODEL --batches BATCHES --seconds 10 ARGS once for each
# ';'-separated setting "NAME VAR=VALUE...", with its variables, each within 60 s; the log in $OUT/LOG, its rows printed
bench_settings() {
  local logf=$1 batches=$3 setting
  local -a settings
  IFS=';' read -ra settings <<< "$2"
  shift 3
  local -a args=("$@")
  { for setting in "${settings[@]}"; do
      set -- $setting
      log "bench_engine $MODEL --batches $batches ${args[*]}, $1 (${*:2})"
      env "${@:2}" timeout $(tmo 60) $B/bench_engine $MODEL --batches $batches --seconds 10 "${args[@]}"
      echo "exit $?"
    done; } > "$OUT/$logf" 2>&1
  grep -E "^== |^\| [0-9]|exit" "$OUT/$logf" | cut -c1-200
}

if has asyncab && [ -f $MODEL/model.yaml ]; then
  bench_settings asyncab.log "${ASYNC_AB:-late RNNT_CUDA_EARLY_ENCODER=0}" "${ASYNC_AB_BATCHES:-1024,2048}" \
    --reps "${ASYNC_REPS:-4}" --async 1
fi

if has sweep && [ -f $MODEL/model.yaml ]; then
  bench_settings sweep.log "${SWEEP:-rrec512 RNNT_CUDA_R_REC=512;rrec1024 RNNT_CUDA_R_REC=1024;rrec2048 RNNT_CUDA_R_REC=2048;sms66 RNNT_CUDA_LSTREAM_SMS=66;sms0 RNNT_CUDA_LSTREAM_SMS=0;rrec512-sms66 RNNT_CUDA_R_REC=512 RNNT_CUDA_LSTREAM_SMS=66;grid2 RNNT_CUDA_DECODE=grid RNNT_CUDA_DEC_GRID_TILE=2}" \
    "${SWEEP_BATCHES:-2048}" --reps 3 --extras 0
fi
if has nsys && [ -f $MODEL/model.yaml ]; then
  NSYS=${NSYS:-$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
    /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)}
  IFS=';' read -ra settings <<< "${NSYS_AB:-before RNNT_CUDA_DEC_STREAM=0;after RNNT_CUDA_DEC_STREAM=1}"
  { echo "nsys: ${NSYS:-not found}"; [ -n "$NSYS" ] && $NSYS --version
    for setting in "${settings[@]}"; do
      [ -n "$NSYS" ] || break
      set -- $setting
      log "nsys: bench_engine $MODEL --batches ${NSYS_BATCHES:-2048} --reps 4 --async 1, $1 (${*:2})"
      env "${@:2}" timeout $(tmo 120) $NSYS profile -t cuda,osrt --cuda-graph-trace=graph -s none --cpuctxsw=none \
        --force-overwrite true -o /tmp/nsys-$1 $B/bench_engine $MODEL --batches ${NSYS_BATCHES:-2048} --seconds 10 \
        --reps 4 --async 1
      echo "exit $?"
      timeout $(tmo 90) $NSYS export -t sqlite --force-overwrite true -o /tmp/nsys-$1.sqlite /tmp/nsys-$1.nsys-rep \
        > /dev/null 2>&1; echo "export exit $?"
      timeout $(tmo 60) python3 $H/nsys_gaps.py /tmp/nsys-$1.sqlite --timeline $OUT/nsys-timeline-$1.txt
      timeout $(tmo 60) $NSYS stats -r cuda_api_sum,osrt_sum /tmp/nsys-$1.sqlite 2>&1 | grep -v "^ *$" | head -50 \
        | cut -c1-180
    done; } > "$OUT/nsys.log" 2>&1
  grep -E "^== |^\| [0-9]|exit|span|ms in|graphs over" "$OUT/nsys.log" | cut -c1-200
fi
log done
