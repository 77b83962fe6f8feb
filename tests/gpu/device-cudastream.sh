#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-cudastream.sh here and a `run`
# carrying .gpu/cudastream: issue 13's CUDA stream steps. Logs go to $OUT.
#   bash .gpu/cudastream/device-cudastream.sh STEPS    STEPS: comma list of
#   env,tests,memcheck,server,load
# tests: test_stream on the CUDA backend, fp32 and fp16 (RNNT_CUDA_PERSIST=0); memcheck: compute-sanitizer
# memcheck on its chunking tests; server: tests/server/test_stream.py against rnntd --backend cuda
# --precision fp32; load: rnntd --backend cuda (fp16) and stream_loadgen.py at LEVELS streams (160 ms
# chunks, real time, PROCS client processes), the batcher's batch sizes from /metrics after each level.
set -u
steps=${1:-env,tests,memcheck,server,load}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/cs cublas cuda_runtime cufft
export RNNT_TEST_DATA=$PWD/tests/data
M=$PWD/models/en-char-small
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$H"/whl/*.whl && export PYTHONPATH=/tmp/site
ulimit -n 1048576 2>/dev/null || ulimit -n 65536

if has env; then
  { log env; nvidia-smi; nproc; free -g | head -2; ulimit -n; python3 -c "import websockets; print('websockets', websockets.__version__)"
    for b in $B/*; do ldd $b | grep -i "not found"; done; } > "$OUT/env.log" 2>&1
  grep -E "H100|H200|^[0-9]+$|websockets|not found" "$OUT/env.log" | head -6
fi

if has tests; then
  { log "test_stream, CUDA fp32"; RNNT_TEST_BACKEND=cuda timeout $(tmo 200) $B/test_stream; echo "exit $?"
    log "test_stream, CUDA fp16, RNNT_CUDA_PERSIST=0"
    RNNT_TEST_BACKEND=cuda RNNT_TEST_PRECISION=fp16 RNNT_CUDA_PERSIST=0 timeout $(tmo 200) $B/test_stream; echo "exit $?"; } > "$OUT/tests.log" 2>&1
  grep -E "^== |^exit |seed|PASSED|FAILED|OK \]|identical|labels|rror|differ|gives" "$OUT/tests.log" | cut -c1-300
fi

if has memcheck; then
  { log "compute-sanitizer memcheck test_stream (CUDA fp32; test_chunk_larger_than_runner)"
    RNNT_TEST_BACKEND=cuda RNNT_TEST_ONLY='test_c*' timeout $(tmo 150) compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_stream 2>&1 | tail -15
    echo "exit ${PIPESTATUS[0]}"; } > "$OUT/memcheck.log" 2>&1
  grep -E "^== |exit |ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log"
fi

if has server; then
  { log "tests/server/test_stream.py against rnntd --backend cuda --precision fp32"
    G=$PWD/tests/data/golden
    RNNTD_BIN=$B/rnntd RNNTD_SHIPPED=$M RNNTD_MODEL=$G/hard_bb RNNTD_RELOAD_FROM=$G/hard_f16 RNNTD_RELOAD_TO=$G/soft_bf16 RNNTD_CONF=$PWD/conf/rnntd.yaml RNNTD_TEST_BACKEND=cuda RNNTD_TEST_PRECISION=fp32 \
      PYTHONDONTWRITEBYTECODE=1 timeout $(tmo 150) python3 "$H/test_stream.py" -v 2>&1; echo "exit $?"; } > "$OUT/server.log" 2>&1
  grep -E "^== |^exit |^Ran |^OK|FAILED|^FAIL:|^ERROR:|Error" "$OUT/server.log" | head -20
fi

# run_load WORKERS TICK_MS HTTP_THREADS LEVELS: rnntd --backend cuda --precision fp16 with that many stream
# workers, tick and transport threads, stream_loadgen at each level (comma list), batch sizes after each.
run_load() {
  local D=/tmp/csd; mkdir -p $D
  printf '%s\n' "server:
  http_threads: $3
  max_connections: 100000
streaming:
  max_streams: 100000
  workers: $1
  tick_ms: $2
  max_batch: ${SBATCH:-1024}
log:
  requests: false" > $D/rnntd.yaml
  log "rnntd --backend cuda --precision fp16: $(tr '\n' ' ' < $D/rnntd.yaml)" | tee -a "$OUT/load.log"
  $B/rnntd --config $D/rnntd.yaml --model $M --backend cuda --precision fp16 --port 0 2> $D/rnntd.log &
  PID=$!; PORT=""
  for _ in $(seq 600); do
    grep -q 'msg=ready' $D/rnntd.log && { PORT=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' $D/rnntd.log); break; }
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$PORT" ] || { echo "rnntd did not start"; tail -5 $D/rnntd.log; cat $D/rnntd.log >> "$OUT/rnntd.log"; return; }
  for lv in ${4//,/ }; do
    log "stream_loadgen $lv streams, ${PROCS:-12} processes" | tee -a "$OUT/load.log"
    timeout $(tmo $(( ${DUR:-15} + 90 ))) python3 "$H/stream_loadgen.py" --url ws://127.0.0.1:$PORT/v1/stream --streams $lv \
      --duration ${DUR:-15} --warmup ${WARM:-4} --procs ${PROCS:-12} $M/samples/*.wav 2>&1 | tee -a "$OUT/load.log"
    echo "batch sizes after $lv (cumulative): $(metric)" | tee -a "$OUT/load.log"
  done
  kill -TERM $PID; wait $PID; echo "rnntd exit $?"
  cat $D/rnntd.log >> "$OUT/rnntd.log"
}
metric() { python3 - $PORT <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10); c.request("GET", "/metrics")
lines = [l for l in c.getresponse().read().decode().splitlines() if l.startswith("rnntd_stream_batch_size")]
v = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in lines}
print(" ".join("%s=%g" % (k.replace("rnntd_stream_batch_size", ""), x) for k, x in v.items()))
PY
}

if has load; then
  # CONFIGS: space-separated WORKERS:TICK_MS:HTTP_THREADS:LEVELS
  for cf in ${CONFIGS:-8:20:4:2000,5000}; do
    IFS=: read -r sw tk ht lv <<< "$cf"
    run_load $sw $tk $ht $lv
  done
  grep -c "level=error" "$OUT/rnntd.log" | sed 's/^/rnntd error lines: /'
fi
