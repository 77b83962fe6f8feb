#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-serve.sh here and a `run` carrying
# .gpu/serve: the daemon's HTTP throughput (issue 16 §3) with the transport's and the load tool's
# switches A/B in one call. rnntd --backend cuda (fp16, max_batch 256, 2 workers, 8 transport loops) on the
# shipped model; random 10 s utterances (5-15 s) from loadgen.py (--frames 1000 --utterances 16); for
# each load: audio s/s, latency, the server's mean batch, and CPU seconds per thread name of rnntd over the
# measured window (/proc/PID/task), so CPU per request per kind of thread.
#   bash .gpu/serve/device-serve.sh [STEPS]   STEPS: comma list of old,new,delay,tune,prof,ceiling (default old,new,delay)
# old: RNNTD_TP_DIRECT=0 RNNTD_REPLY_TEXT=0 (bodies through the 16 KiB read buffer, answers through
# jansson: the session before's behaviour); new: the defaults; delay: the defaults with max_delay_us 30 ms.
# Each: a lone request (1 client), then 512 clients with loadgen --client http (http.client) and raw.
# prof: the C load client (tests/bench/loadc.c, packed as bin/loadc) against one daemon per PROF entry, with
# per-stage figures per load: CPU per rnntd thread (the busiest HTTP loop too), the engine's occupancy from
# /metrics (compute seconds / window / workers; device busy share), batch sizes, padding, GPU utilisation
# (nvidia-smi, 4 samples/s). ceiling: bench_engine on the shipped model at B 256 with 1, 2, 3 workers (what
# the GPU does on its own with the daemon's runners).
set -u
steps=${1:-old,new,delay}
here=$(cd "$(dirname "$0")" && pwd)
source tests/gpu/device-common.sh
DD=${DD:-/tmp/ds}
open_pack $here/pack.tar.xz $DD cublas cuda_runtime
LG=$here/loadgen.py
M=${MODEL:-models/en-char-small}  # MODEL, BACKEND: a check of this script on a CPU machine
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,utilization.gpu --format=csv,noheader
nproc

# start_daemon NAME CONFIG_TEXT [ENV...]: rnntd on the shipped model; sets PID and PORT
start_daemon() {
  local name=$1 conf=$2; shift 2
  printf '%s\n' "$conf" > $DD/rnntd.yaml
  env "$@" $B/rnntd --config $DD/rnntd.yaml --model $M --backend ${BACKEND:-cuda} --port 0 2> "$OUT/rnntd-$name.log" &
  PID=$!; PORT=""
  for _ in $(seq 600); do
    grep -q 'msg=ready' "$OUT/rnntd-$name.log" && { PORT=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' "$OUT/rnntd-$name.log"); break; }
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  log "rnntd $name [$*] port $PORT"
  [ -n "$PORT" ]
}
stop_daemon() {
  kill -TERM $PID; wait $PID; echo "  rnntd exit $?, error lines $(grep -c 'level=error' "$OUT/rnntd-$1.log")"
}
# CPU seconds per thread name of rnntd, "name seconds" lines, then (THREADS=1) "name@tid seconds" per thread
thread_cpu() {
  for t in /proc/$PID/task/*; do echo "$(cat $t/comm) ${t##*/} $(awk '{print $14+$15}' $t/stat)"; done 2>/dev/null |
    awk -v hz=$(getconf CLK_TCK) -v each=${THREADS:-0} '{a[$1]+=$3; if (each) b[$1 "@" $2]=$3}
      END {for (k in a) printf "%s %.2f\n", k, a[k]/hz; for (k in b) printf "%s %.2f\n", k, b[k]/hz}' | sort
}
# metrics FILE: the counters of /metrics the per-stage figures use
metrics() {
  python3 -c "import sys, urllib.request as u; sys.stdout.write(u.urlopen('http://127.0.0.1:$PORT/metrics', timeout=5).read().decode())" 2>/dev/null | grep -E "^rnntd_(device_busy_seconds_total|compute_seconds_total|batches_total|batch_utterances_total|frames_total|padding_frames_total|audio_seconds_total|workers|http_loop_connections)[{ ]" > $1
}
# load NAME PROCS CLIENTS SECONDS CLIENT: P loadgen processes x C clients of random 10 s utterances
load() {
  local name=$1 procs=$2 clients=$3 secs=$4 client=$5
  rm -f $DD/load-*.json $DD/smi.txt $DD/top.txt
  local pids=""
  for p in $(seq $procs); do
    timeout $(tmo $(( secs + 40 ))) python3 $LG --url http://127.0.0.1:$PORT --frames 1000 --utterances 16 --seed $p \
      --concurrency $clients --duration $secs --warmup 3 --timeout 60 --client $client --loadc $B/loadc --json > $DD/load-$p.json 2>&1 &
    pids="$pids $!"
  done
  sleep 5                      # generation of the utterances (~1 s) and the 3 s warm-up
  local smi=""
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 250 > $DD/smi.txt 2>/dev/null & smi=$!
  fi
  local t0=$(date +%s.%N)
  THREADS=1 thread_cpu > $DD/cpu0; metrics $DD/m0
  vmstat 1 $(( secs - 2 )) > $DD/vmstat.txt    # secs - 3 seconds
  THREADS=1 thread_cpu > $DD/cpu1; metrics $DD/m1
  local win=$(awk -v a=$t0 -v b=$(date +%s.%N) 'BEGIN {print b - a}')
  top -H -b -d 1 -n 2 -w 200 | awk '/^top -/ {n++} n == 2' | head -40 > "$OUT/top-$name.txt"
  [ -n "$smi" ] && kill $smi
  wait $pids
  for f in $DD/load-*.json; do echo "$name $(tail -1 $f)"; done >> "$OUT/load.jsonl"
  python3 - "$name" $win $DD/cpu0 $DD/cpu1 $DD/vmstat.txt $DD/m0 $DD/m1 $DD/smi.txt $DD/load-*.json <<'PY' | tee -a "$OUT/summary.txt"
import json, os, sys
name, win, f0, f1, fv, fm0, fm1, fsmi = sys.argv[1], float(sys.argv[2]), *sys.argv[3:9]
rd = lambda f: {l.split()[0]: float(l.split()[1]) for l in open(f) if l.strip()}
c0, c1 = rd(f0), rd(f1)
cpu = {k: c1[k] - c0.get(k, 0) for k in c1}
def mrd(f):
    out = {}
    for l in open(f) if os.path.exists(f) else []:
        k, v = l.rsplit(" ", 1)
        out[k] = float(v)
    return out
m0, m1 = mrd(fm0), mrd(fm1)
md = {k: m1[k] - m0.get(k, 0) for k in m1}
smi = [float(l) for l in open(fsmi) if l.strip().replace(".", "").isdigit()] if os.path.exists(fsmi) else []
reps = []
for f in sys.argv[9:]:
    try:
        reps.append(json.loads(open(f).read().strip().splitlines()[-1]))
    except Exception as e:
        print("  %s: no report (%s): %s" % (f, e, open(f).read()[-300:]))
if not reps:
    sys.exit(0)
rps = sum(r["requests_per_s"] for r in reps); aud = sum(r["audio_s_per_s"] for r in reps)
vm = [l.split() for l in open(fv) if l.split() and l.split()[0].isdigit()][1:]
us = sum(int(v[12]) for v in vm) / max(1, len(vm)); sy = sum(int(v[13]) for v in vm) / max(1, len(vm))
idle = sum(int(v[14]) for v in vm) / max(1, len(vm))
per = lambda k: cpu.get(k, 0) / (rps * win) * 1e3 if rps else 0
print("%-22s %8.0f audio s/s %7.1f req/s  ok %d  statuses %s conn errors %d" % (name, aud, rps,
      sum(r["requests_ok"] for r in reps), sorted({k for r in reps for k in r["statuses"]}), sum(r["connection_errors"] for r in reps)))
print("   latency p50 %s ms; in server p50 queue/compute/total %s" % ([r["latency_ms"]["p50"] for r in reps][:4],
      reps[0]["server_timings_ms_p50"]))
print("   server: mean batch %s, padding %s; answers' mean batch %s" % (reps[0]["server"]["mean_batch_size"],
      reps[0]["server"]["padding_share"], round(sum(r["mean_batch_size"] for r in reps) / len(reps), 1)))
print("   rnntd CPU over %.0f s: http %.1f s (%.3f ms/request), worker %.1f s, stage %.1f s, prep %.1f s; client CPU %s ms/request; "
      "vmstat user %.0f%% sys %.0f%% idle %.0f%%" % (win, cpu.get("rnntd-http", 0), per("rnntd-http"), cpu.get("rnntd-worker", 0),
      cpu.get("rnnt-stage", 0), cpu.get("rnntd-prep", 0), [r.get("client_cpu_ms_per_request") for r in reps][:2], us, sy, idle))
http = sorted((v for k, v in cpu.items() if k.startswith("rnntd-http@")), reverse=True)
wk = sorted((v for k, v in cpu.items() if k.startswith("rnntd-worker@")), reverse=True)
if http:
    print("   per thread over %.0f s: http loops %s s (busiest %.0f%% of a core), workers %s s" % (win,
          [round(v, 2) for v in http], 100 * http[0] / win, [round(v, 2) for v in wk]))
lc = [int(v) for k, v in m1.items() if k.startswith("rnntd_http_loop_connections")]
if lc:
    print("   connections per HTTP loop: %s" % lc)
b = md.get("rnntd_batches_total", 0)
nw = m1.get("rnntd_workers", 0) or 1
busy = sum(v for k, v in md.items() if k.startswith("rnntd_device_busy_seconds_total"))
if b:
    print("   engine over %.0f s: %d batches, mean %.1f, compute %.1f ms mean per batch, occupancy %.2f of %d workers, "
          "device busy %.0f%%, padding %.1f%%, audio %.0f s/s; GPU utilisation %s%% (mean of %d samples)" % (win, b,
          md.get("rnntd_batch_utterances_total", 0) / b, 1e3 * md.get("rnntd_compute_seconds_total", 0) / b,
          md.get("rnntd_compute_seconds_total", 0) / win / nw, nw, 100 * busy / win,
          100 * md.get("rnntd_padding_frames_total", 0) / max(1, md.get("rnntd_frames_total", 0) + md.get("rnntd_padding_frames_total", 0)),
          md.get("rnntd_audio_seconds_total", 0) / win, round(sum(smi) / len(smi)) if smi else "-", len(smi)))
PY
}
GPU_CONF='server:
  http_threads: 8
  max_connections: 2048
batching:
  workers: 2
  max_batch: 256
  max_delay_us: 10000
  max_queue: 4096
log:
  requests: false'

OLD="RNNTD_TP_DIRECT=0 RNNTD_REPLY_TEXT=0"   # the transport and answers of the session before (same binary)
if has old; then
  if start_daemon old "$GPU_CONF" $OLD; then
    load old-lone-http 1 1 8 http
    load old-http-512 8 64 12 http
    load old-raw-512 8 64 12 raw
    stop_daemon old
  fi
fi
if has new; then
  if start_daemon new "$GPU_CONF"; then
    load new-lone-http 1 1 8 http
    load new-http-512 8 64 12 http
    load new-raw-512 8 64 12 raw
    stop_daemon new
  fi
fi
if has delay; then
  if start_daemon delay30 "$(printf '%s\n' "$GPU_CONF" | sed 's/max_delay_us: 10000/max_delay_us: 30000/')"; then
    load "delay30-raw-512" 8 64 12 raw
    load "delay30-raw-1024" 8 128 12 raw
    stop_daemon delay30
  fi
fi
# tune: one daemon per TUNE entry "NAME:WORKERS:MAX_BATCH:MAX_DELAY_US:PROCS:CLIENTS" (space-separated), one raw
# load each (batch forming and runner size as configuration: how full the batches get while the GPU is busy)
if has tune; then
  for t in ${TUNE:-"w2-b256-d30-1024:2:256:30000:8:128" "w3-b256-d30-1024:3:256:30000:8:128" "w2-b512-d30-1024:2:512:30000:8:128"}; do
    IFS=: read -r name w mb d procs clients <<< "$t"
    conf="$(printf '%s\n' "$GPU_CONF" | sed "s/  workers: 2/  workers: $w/; s/max_batch: 256/max_batch: $mb/; s/max_delay_us: 10000/max_delay_us: $d/")"
    if start_daemon "$name" "$conf"; then
      load "$name" $procs $clients 12 raw
      stop_daemon "$name"
    fi
  done
fi
# prof: one daemon per PROF entry "NAME:WORKERS:MAX_BATCH:MAX_DELAY_US:HTTP_THREADS:LOADS[:ENV]", LOADS a
# '+'-separated list of LABEL/PROCS/CLIENTS/SECONDS/CLIENT (CLIENT: http, raw or c), ENV a ','-separated list
# of NAME=VALUE for the daemon
if has prof; then
  for t in ${PROF:-"w2-d10-h8:2:256:10000:8:lone-http/1/1/8/http+lone-c/1/1/8/c+c-512/8/64/12/c+c-1024/8/128/12/c"}; do
    IFS=: read -r name w mb d ht loads envs <<< "$t"
    conf="$(printf '%s\n' "$GPU_CONF" | sed "s/  workers: 2/  workers: $w/; s/max_batch: 256/max_batch: $mb/; s/max_delay_us: 10000/max_delay_us: $d/; s/http_threads: 8/http_threads: $ht/; s/max_connections: 2048/max_connections: 4096/")"
    if start_daemon "$name" "$conf" ${envs//,/ }; then
      IFS=+ read -ra ls <<< "$loads"
      for l in "${ls[@]}"; do
        IFS=/ read -r label procs clients secs client <<< "$l"
        load "$name-$label" $procs $clients $secs $client
      done
      stop_daemon "$name"
    fi
  done
fi
# ceiling: the engine alone on the shipped model, the daemon's runner size, 1-3 workers of one device
if has ceiling; then
  log "bench_engine $M --batches ${CEIL_BATCHES:-256} --workers 1,2,3 --max-batch 256 --seconds 10 --reps 6 --extras 0"
  timeout $(tmo 120) $B/bench_engine $M --batches ${CEIL_BATCHES:-256} --workers 1,2,3 --max-batch 256 --seconds 10 --reps 6 \
    --extras 0 > "$OUT/bench_engine.txt" 2>&1
  echo "exit $?"; cat "$OUT/bench_engine.txt"
fi
log done
