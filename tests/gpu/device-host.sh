#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-host.sh here and a `run` carrying
# .gpu/host: issue 16 §3, the host side. Steps (comma list, default all):
#   test    gpu_test_submit (fp32, fp16): two batches in flight == rnnt_runner_decode
#   bench   bench_engine on the shipped model: batch 1 in a runner of 1 and of 256 (what the daemon's
#           lone request ran on), then --async 1 (decode vs submit/collect, two in flight) at 1, 32, 256
#   lone    rnntd --backend cuda fp16 max_batch 256, 2 workers: 1 client of random 10 s utterances,
#           RNNTD_SMALL_RUNNER=0 (before: batch 1 on the 256 runner) then the default (the small runner),
#           A/B/A/B, with the answers' own timings (queue, compute, total)
#   load    the same daemon, 8 x 64 clients of random 10 s utterances, RNNTD_RUNNER_SUBMIT=0 (before:
#           svc_run's copy + the runner's staging) then the default (submit/collect), A/B; vmstat 1 and
#           per-process CPU (top) during each load, to say what the machine was doing
#   scale   top -H under 8 x 64 and 16 x 32 clients, and 16 x 32 without submit (A/B)
#   unit    test_cuda_engine on the shipped model (fp32 parity with the CPU, fp16 agreement, batch
#           invariance) and CUDA test_stream (the encoder's staging order changed)
# Logs in $OUT; BUDGET_S bounds the whole script.
set -u
steps=${1:-test,bench,lone,load,unit}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/hp cublas cuda_runtime cufft
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
echo "cpus $(nproc), load $(cat /proc/loadavg)"
M=models/en-char-small
export RNNT_TEST_DATA=$PWD/tests/data

if has test; then
  for pr in fp32 fp16; do
    log "test_submit cuda $pr"
    RNNT_TEST_BACKEND=cuda RNNT_TEST_PRECISION=$pr timeout $(tmo 120) $B/test_submit > "$OUT/test_submit_$pr.log" 2>&1
    echo "exit $?"; grep -E "^seed|PASSED|FAILED|differs|\[  ERROR" "$OUT/test_submit_$pr.log" | head -5
  done
fi

if has bench; then
  log "bench_engine $M batch 1: runner of 1 vs runner of 256"
  for mb in 1 256; do
    timeout $(tmo 60) $B/bench_engine $M --batches 1 --seconds 10 --reps 15 --extras 0 --max-batch $mb > "$OUT/bench_b1_mb$mb.log" 2>&1
    echo "max_batch $mb: exit $?"; grep -E "^\| 1 " "$OUT/bench_b1_mb$mb.log"
  done
  log "bench_engine $M --async 1 --batches 1,32,256 --reps 8"
  timeout $(tmo 150) $B/bench_engine $M --batches 1,32,256 --seconds 10 --reps 8 --async 1 > "$OUT/bench_async.log" 2>&1
  echo "exit $?"; grep -E "^\|" "$OUT/bench_async.log"
fi

start_daemon() { # NAME ENV...: rnntd on $M with $DD/rnntd.yaml, sets PID and PORT
  local name=$1; shift
  env "$@" $B/rnntd --config /tmp/hp/rnntd.yaml --model $M --backend cuda --port 0 2> "$OUT/rnntd-$name.log" &
  PID=$!; PORT=""
  for _ in $(seq 600); do
    grep -q 'msg=ready' "$OUT/rnntd-$name.log" && { PORT=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' "$OUT/rnntd-$name.log"); break; }
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$PORT" ] || { tail -5 "$OUT/rnntd-$name.log"; return 1; }
}
stop_daemon() { kill -TERM $PID; wait $PID; echo "  rnntd exit $? error lines $(grep -c level=error "$OUT/rnntd-$1.log")"; }
# one_load NAME PROCS CLIENTS SECONDS: loadgen processes against $PORT (random 10 s utterances, 5-15 s)
one_load() {
  local name=$1 procs=$2 clients=$3 secs=$4
  rm -f /tmp/hp/load-*.json
  (vmstat 1 $((secs + 4)) > "$OUT/vmstat-$name.log") &
  local vm=$!
  (sleep $((secs / 2 + 3)); top -b -n 1 -H -w 200 | head -${TOP_LINES:-25} > "$OUT/top-$name.log") &
  for p in $(seq $procs); do
    timeout $(tmo $((secs + 60))) python3 $H/loadgen.py --url http://127.0.0.1:$PORT --frames 1000 --utterances 16 \
      --seed $p --concurrency $clients --duration $secs --warmup 3 --timeout 60 --json > /tmp/hp/load-$p.json 2>&1 &
  done
  wait $(jobs -p | grep -v -e "^$PID$" -e "^$vm$") 2>/dev/null
  kill $vm 2>/dev/null; wait $vm 2>/dev/null
  for f in /tmp/hp/load-*.json; do echo "$name $(tail -1 $f)"; done >> "$OUT/load.jsonl"
  python3 - $name /tmp/hp/load-*.json <<'PY'
import json, sys
reps = [json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[2:]]
ok = sum(r["requests_ok"] for r in reps); aud = sum(r["audio_s_per_s"] for r in reps)
print("  %s: %d ok, %.0f audio s/s, %.1f req/s; p50 %s p90 %s p99 %s ms; mean batch %s; in server p50 %s" % (sys.argv[1], ok,
      aud, sum(r["requests_per_s"] for r in reps), [r["latency_ms"]["p50"] for r in reps], [r["latency_ms"]["p90"] for r in reps],
      [r["latency_ms"]["p99"] for r in reps], reps[0]["server"]["mean_batch_size"], reps[0].get("server_timings_ms_p50")))
PY
  awk 'NR > 3 { us += $13; sy += $14; id += $15; r += $1; n++ } END { if (n) printf "  vmstat: run queue %.1f, cpu user %.0f%% sys %.0f%% idle %.0f%%\n", r / n, us / n, sy / n, id / n }' "$OUT/vmstat-$name.log"
}
cat > /tmp/hp/rnntd.yaml <<'Y'
server:
  http_threads: 8
  max_connections: 1024
batching:
  workers: 2
  max_batch: 256
  max_delay_us: 10000
  max_queue: 4096
log:
  requests: false
Y

if has lone; then
  for round in 1 2; do
    for mode in before after; do
      log "lone request, $mode (round $round)"
      envs="RNNTD_SMALL_RUNNER=0"; [ $mode = after ] && envs="RNNTD_SMALL_RUNNER=1"
      start_daemon lone-$mode $envs || continue
      one_load lone-$mode-$round 1 1 10
      stop_daemon lone-$mode
    done
  done
fi

if has load; then
  for mode in before after; do
    log "8 x 64 clients, $mode"
    envs="RNNTD_RUNNER_SUBMIT=0"; [ $mode = after ] && envs="RNNTD_RUNNER_SUBMIT=1"
    start_daemon load-$mode $envs || continue
    one_load load-$mode 8 64 20
    stop_daemon load-$mode
  done
fi
if has scale; then
  # who is busy under load: threads of rnntd and of the Python clients (top -H, mid-load), with 8 and 16
  # client processes, then the 16-process load without submit/collect (A/B)
  for spec in "after 8 64" "after 16 32" "before 16 32"; do
    set -- $spec
    envs="RNNTD_RUNNER_SUBMIT=0"; [ $1 = after ] && envs="RNNTD_RUNNER_SUBMIT=1"
    log "scale: $2 x $3 clients, $1"
    start_daemon scale-$1-$2 $envs || continue
    python3 - "$PORT" <<'PY'
import http.client, json, random, struct, array, sys
n, dim = 1000, 80
r = random.Random(1)
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, dim)
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
body = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + array.array("f", [r.gauss(-4.0, 2.5) for _ in range(n * dim)]).tobytes()
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
c.request("POST", "/v1/transcribe", body=body, headers={"Content-Type": "application/x-npy"})
d = c.getresponse().read()
print("  one 10 s random request: body %d bytes, reply %d bytes, %d tokens" % (len(body), len(d), len(json.loads(d)["tokens"])))
PY
    TOP_LINES=40 one_load scale-$1-$2x$3 $2 $3 12
    sed -n '1,5p;7,40p' "$OUT/top-scale-$1-$2x$3.log" | cut -c1-150
    stop_daemon scale-$1-$2
  done
fi

if has threads; then
  # CPU time per thread name of rnntd over a 10 s load of 8 x 64 clients (/proc/PID/task/*/stat: utime +
  # stime in clock ticks, before and after), to say which threads the daemon's time goes to
  log "threads: 8 x 64 clients, CPU seconds per thread name"
  if start_daemon threads RNNTD_RUNNER_SUBMIT=1; then
    snap() { for t in /proc/$PID/task/*; do awk '{ sub(/^[0-9]+ \(/, ""); n = $0; sub(/\).*/, "", n); sub(/^[^)]*\) /, ""); print n, $12 + $13 }' $t/stat 2>/dev/null; done; }
    (sleep 5; snap > /tmp/hp/snap0; sleep 10; snap > /tmp/hp/snap1) &
    sn=$!
    one_load threads 8 64 12
    wait $sn
    python3 - /tmp/hp/snap0 /tmp/hp/snap1 $(getconf CLK_TCK) <<'PY'
import sys, collections
def rd(f):
    d = collections.defaultdict(float); c = collections.Counter()
    for l in open(f):
        n, v = l.rsplit(" ", 1); d[n] += float(v); c[n] += 1
    return d, c
a, _ = rd(sys.argv[1]); b, c = rd(sys.argv[2]); hz = float(sys.argv[3])
for n in sorted(b, key=lambda k: -(b[k] - a.get(k, 0))):
    print("  %-16s threads %2d  CPU %.2f s over 10 s" % (n, c[n], (b[n] - a.get(n, 0)) / hz))
PY
    stop_daemon threads
  fi
fi

if has unit; then
  log "test_cuda_engine (RNNT_GPU_MODELS=$M)"
  RNNT_GPU_MODELS=$M timeout $(tmo 200) $B/test_cuda_engine > "$OUT/test_cuda_engine.log" 2>&1
  echo "exit $?"; grep -E "PASSED|FAILED" "$OUT/test_cuda_engine.log" | tail -3
  log "test_stream cuda"
  RNNT_TEST_BACKEND=cuda timeout $(tmo 150) $B/test_stream > "$OUT/test_stream.log" 2>&1
  echo "exit $?"; grep -E "PASSED|FAILED" "$OUT/test_stream.log" | tail -2
fi
log done
