#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-daemon.sh here and a `run` carrying
# .gpu/daemon: rnntd serving from the GPU.
#   1. the CLI on the shipped model's samples: CUDA fp32 and fp16 against the CPU on the same machine;
#   2. the daemon's HTTP integration suites (tests/server/test_{api,batching,hostile,lifecycle}.py) with
#      every daemon started with --backend cuda --precision fp32 (transcripts are compared with the CPU
#      CLI's, so they must be token-exact);
#   3. rnntd --backend cuda (fp16, max_batch 256) on the shipped model: the samples over HTTP, then
#      tests/bench/loadgen.py at 1 client and at P processes x C clients of 10 s utterances, and the
#      same load against --backend cpu on this machine's cores for comparison (load2: the GPU daemon
#      with 2 workers, so one batch's host work overlaps the other's GPU work);
#   4. engine: bench_engine on a random MLPerf-shaped model (host time after the runner's input check);
#   5. unit: test_cuda_engine in full (fp32 parity with the CPU engine on the golden models and the shipped
#      model, fp16 agreement, batch invariance);
#   6. quickenv: test_golden in quick mode without a sanitizer, per golden model, under each combination of
#      the switches the racecheck sets (to tell a failure the tool causes from one the switches cause);
#   7. racecheck: compute-sanitizer --tool racecheck on test_cuda_engine (RNNT_TEST_QUICK=1), one process per
#      test and per golden model, in parallel (RACE_TESTS, each within RACE_TIMEOUT s; RACE_ENV as below).
# Logs go to $OUT.   tests/gpu/device-daemon.sh [STEPS]   STEPS: comma list of
#   cli,suite,load,load2,loaddefault,cpuload,realerr,engine,unit,quickenv,racecheck (default cli,suite,load,cpuload)
set -u
steps=${1:-cli,suite,load,cpuload}
source tests/gpu/device-common.sh
DD=${DD:-/tmp/dd}  # another DD lets two runs of this script share a machine
open_pack ${PACK:-.gpu/daemon/pack.tar.xz} $DD cublas cuda_runtime  # PACK: a smaller pack with only the programs a step needs
for b in $B/*; do ldd $b | grep -i "not found"; done
M=models/en-char-small
G=$PWD/tests/data/golden

if has cli; then
  log "rnnt-transcribe on $M/samples: cpu vs cuda fp32 vs cuda fp16"
  for mode in "cpu fp32" "cuda fp32" "cuda fp16"; do
    set -- $mode
    timeout $(tmo 60) $B/rnnt-transcribe --model $M --backend $1 --precision $2 --batch 4 $M/samples/*.npy > $DD/cli.txt 2>&1
    echo "$1 $2: exit $? $(md5sum < $DD/cli.txt | cut -c1-8)"
    { echo "== $1 $2"; cat $DD/cli.txt; } >> "$OUT/cli.txt"
  done
  tail -4 $DD/cli.txt
fi

if has suite; then
  export RNNTD_BIN=$B/rnntd RNNT_CLI=$B/rnnt-transcribe RNNTD_MODEL=$G/hard_bb RNNTD_RELOAD_FROM=$G/hard_f16 \
         RNNTD_RELOAD_TO=$G/soft_bf16 RNNTD_GOLDEN=$G RNNTD_CONF=conf/rnntd.yaml PYTHONDONTWRITEBYTECODE=1 \
         RNNTD_TEST_BACKEND=cuda RNNTD_TEST_PRECISION=fp32
  for t in ${SUITES:-api batching hostile lifecycle}; do
    log "HTTP suite $t against --backend cuda --precision fp32"
    timeout $(tmo 150) python3 tests/server/test_$t.py -v > $DD/suite.log 2>&1
    rc=$?; echo "exit $rc"; grep -E "^Ran |^OK|FAILED|^FAIL:|^ERROR:" $DD/suite.log
    [ $rc = 0 ] || grep -v -E " \.\.\. ok$" $DD/suite.log | tail -40
    { echo "== $t"; cat $DD/suite.log; } >> "$OUT/suite.log"
  done
  unset RNNTD_TEST_BACKEND RNNTD_TEST_PRECISION
fi

# start_daemon BACKEND CONFIG_TEXT: starts rnntd on the shipped model, sets PID and PORT
start_daemon() {
  printf '%s\n' "$2" > $DD/rnntd.yaml
  $B/rnntd --config $DD/rnntd.yaml --model $M --backend $1 --port 0 2> "$OUT/rnntd-$1.log" &
  PID=$!; PORT=""
  for _ in $(seq 600); do
    grep -q 'msg=ready' "$OUT/rnntd-$1.log" && { PORT=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' "$OUT/rnntd-$1.log"); break; }
    kill -0 $PID 2>/dev/null || break
    sleep 0.1
  done
  grep -E "msg=(ready|listening)" "$OUT/rnntd-$1.log" | cut -c1-300
  [ -n "$PORT" ]
}
stop_daemon() {
  kill -TERM $PID; wait $PID; echo "rnntd exit $?"
  grep -c "level=error" "$OUT/rnntd-$1.log" | sed 's/^/error lines: /'
}
# load NAME PROCS CLIENTS SECONDS [FILE.npy...]: P loadgen processes of C clients each; the files, or
# random 10 s utterances (lengths 5-15 s); LOAD_CLIENT: loadgen's --client (http, raw, or c: the packed loadc)
load() {
  local name=$1 procs=$2 clients=$3 secs=$4; shift 4
  log "load $name: $procs processes x $clients clients, $secs s, ${*:-random 10 s utterances}"
  local src="--frames 1000 --utterances 16"; [ $# -gt 0 ] && src="$*"
  rm -f $DD/load-*.json
  for p in $(seq $procs); do
    timeout $(tmo $(( secs + 60 ))) python3 tests/bench/loadgen.py --url http://127.0.0.1:$PORT $src \
      --seed $p --concurrency $clients --duration $secs --warmup 3 --timeout 60 --json \
      --client ${LOAD_CLIENT:-http} --loadc $B/loadc > $DD/load-$p.json 2>&1 &
  done
  wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
  for f in $DD/load-*.json; do echo "$name $(tail -1 $f)"; done >> "$OUT/load.jsonl"
  python3 - $DD/load-*.json <<'PY'
import json, sys
reps = [json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:]]
ok = sum(r["requests_ok"] for r in reps); rps = sum(r["requests_per_s"] for r in reps)
aud = sum(r["audio_s_per_s"] for r in reps)
print("  %s on %s: %d ok, statuses %s, conn errors %d" % (reps[0]["backend"], reps[0]["device"], ok,
      [r["statuses"] for r in reps], sum(r["connection_errors"] for r in reps)))
print("  throughput %.1f requests/s, %.0f audio s/s (RTFx); latency ms p50 %s p90 %s p99 %s (per process)" % (rps, aud,
      [r["latency_ms"]["p50"] for r in reps], [r["latency_ms"]["p90"] for r in reps], [r["latency_ms"]["p99"] for r in reps]))
print("  server: mean batch %s, RTF %s, padding %s" % ([r["server"]["mean_batch_size"] for r in reps][0],
      reps[0]["server"]["real_time_factor"], reps[0]["server"]["padding_share"]))
PY
}
GPU_CONF='server:
  http_threads: 8
  max_connections: 1024
batching:
  max_batch: 256
  max_delay_us: 10000
  max_queue: 4096
log:
  requests: false'

if has load; then
  log "rnntd --backend cuda on $M"
  if start_daemon cuda "$GPU_CONF"; then
    for s in $M/samples/*.npy; do
      python3 - "$PORT" "$s" <<'PY'
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
c.request("POST", "/v1/transcribe", body=open(sys.argv[2], "rb").read(), headers={"Content-Type": "application/x-npy"})
r = c.getresponse(); d = json.loads(r.read())
print(r.status, sys.argv[2].split("/")[-1], repr(d.get("text")), "compute_ms=%s" % d.get("timings_ms", d.get("timings")))
PY
    done
    load gpu-1 1 1 10
    load gpu-256 4 64 20
    load gpu-512 8 64 20
    load gpu-real-512 8 64 20 $M/samples/*.npy
    python3 -c "import json,urllib.request as u; h=json.load(u.urlopen('http://127.0.0.1:$PORT/health')); print('  health:', h['status'], h['backend'], h['device'], h['requests'], 'batches', h['batches'], 'mean batch', h['mean_batch_size'], 'RTF', h['real_time_factor'])"
    stop_daemon cuda
  else
    tail -20 "$OUT/rnntd-cuda.log"
  fi
fi

# realerr: the short-sample load alone under each setting of REALERR_ENVS (';'-separated NAME=VALUE, one
# daemon each), with the daemon's error lines counted by message (to tell which path answers 500)
if has realerr; then
  IFS=';' read -ra variants <<< "${REALERR_ENVS:-RNNTD_SMALL_RUNNER=1}"
  for v in "${variants[@]}"; do
    log "realerr [$v]"
    export "$v"
    if start_daemon cuda "$GPU_CONF"; then
      load "lone-[$v]" 1 1 10
      load "real-[$v]" 8 64 15 $M/samples/*.npy
      stop_daemon cuda
      grep "level=error" "$OUT/rnntd-cuda.log" | sed 's/^ts=[^ ]* //; s/request_id=[^ ]* //; s/id=[0-9a-f-]* //' |
        cut -c1-300 | sort | uniq -c | sort -rn | head -6
      cp "$OUT/rnntd-cuda.log" "$OUT/rnntd-cuda-${v%%=*}-${v#*=}.log"
    fi
    unset "${v%%=*}"
  done
fi

# serve_loads BACKEND CONFIG "LOAD ARGS"...: one daemon, several loads against it
serve_loads() {
  local backend=$1 conf=$2; shift 2
  if start_daemon $backend "$conf"; then
    for spec in "$@"; do load $spec; done   # unquoted: the spec's words (and globs) are load's arguments
    stop_daemon $backend
  else
    tail -20 "$OUT/rnntd-$backend.log"
  fi
}

if has load2; then
  log "rnntd --backend cuda on $M, 2 workers"
  serve_loads cuda "$(printf '%s\n' "$GPU_CONF" | sed "s/  max_batch: 256/  workers: 2\n  max_batch: 256/")" \
    "gpu2w-512 8 64 20" "gpu2w-real-512 8 64 20 $M/samples/*.npy"
fi

if has loaddefault; then
  log "rnntd --backend cuda on $M with the shipped defaults (max_batch 16: fp16 runners use the persistent recurrence)"
  serve_loads cuda "log:
  requests: false" "default-1 1 1 10 $M/samples/*.npy" "default-16 1 16 15 $M/samples/*.npy"
fi

if has cpuload; then
  log "rnntd --backend cpu on $M ($(nproc) cores), same load"
  serve_loads cpu "$(printf '%s\n' "$GPU_CONF" | sed "s/max_batch: 256/max_batch: 4/")" \
    "cpu-64 2 32 20" "cpu-real-64 2 32 15 $M/samples/*.npy"
fi

if has engine; then
  log "random MLPerf-shaped model"
  (cd models && timeout $(tmo 240) python3 -m rnntd_ref.random_model --preset mlperf --seed 1 --out /tmp/mlperf) 2>&1 | tail -2
  log "bench_engine /tmp/mlperf --batches 1,32,256 --seconds 10 --reps 5"
  timeout $(tmo 150) $B/bench_engine /tmp/mlperf --batches 1,32,256 --seconds 10 --reps 5 > "$OUT/bench_engine.log" 2>&1
  echo "exit $?"; sed -n 1,8p "$OUT/bench_engine.log"
fi

if has unit; then
  log "test_cuda_engine (RNNT_GPU_MODELS=$M)"
  RNNT_TEST_DATA=$PWD/tests/data RNNT_GPU_MODELS=$M timeout $(tmo 240) $B/test_cuda_engine > "$OUT/unit.log" 2>&1
  echo "exit $?"; grep -E "PASSED|FAILED|fp16 vs|identical|mismatch" "$OUT/unit.log" | cut -c1-300 | tail -30
fi

if has quickenv; then
  log "test_golden, quick mode, per golden model and switch combination, no sanitizer"
  mkdir -p "$OUT/quickenv"
  # the last combination sets no switch (RNNT_TEST_QUICK=1 is set anyway; env needs a word)
  for envs in "RNNT_CUDA_GRAPHS=0 RNNT_CUDA_DECODE=host RNNT_CUDA_MAPPED=0" "RNNT_CUDA_GRAPHS=0" "RNNT_CUDA_DECODE=host" \
              "RNNT_CUDA_MAPPED=0" "RNNT_CUDA_DECODE=host RNNT_CUDA_MAPPED=0" "RNNT_TEST_QUICK=1"; do
    ( for g in $(ls "$G"); do
        [ -f "$G/$g/golden.safetensors" ] || continue
        f="$OUT/quickenv/${envs// /_}-$g.log"
        env $envs RNNT_TEST_ONLY=test_golden RNNT_TEST_GOLDEN=$g RNNT_TEST_QUICK=1 RNNT_TEST_DATA=$PWD/tests/data \
          OPENBLAS_NUM_THREADS=1 timeout $(tmo 60) $B/test_cuda_engine > "$f" 2>&1
        echo "[$envs] $g: exit $? $(grep -E '^seed|differ|first diff|want status|rror' "$f" | head -4 | tr '\n' ' ' | cut -c1-400)"
      done ) &
  done
  wait
fi

if has racecheck; then
  # RACE_ENV: extra settings; with CUDA graphs on, racecheck aborted inside the tool ("Resource deadlock
  # avoided"), so by default the same kernels run launched one by one
  race_env=${RACE_ENV-RNNT_CUDA_GRAPHS=0 RNNT_CUDA_DECODE=host}
  # One racecheck process per test (RNNT_TEST_ONLY) and, for test_golden, per golden model
  # (RNNT_TEST_GOLDEN), all at once (the tool is slow but a run uses one core), each bounded by
  # RACE_TIMEOUT s, so a slow one shows which it was and the others still report.
  # test_extra_models and test_fp16_agreement are left out: the first needs RNNT_GPU_MODELS, the second
  # only reads what the others counted in the same process.
  jobs=""
  for t in ${RACE_TESTS:-test_generated test_golden test_numeric test_errors}; do
    if [ $t = test_golden ]; then
      for g in $(ls "$G"); do [ -f "$G/$g/golden.safetensors" ] && jobs="$jobs $t:$g"; done
    else
      jobs="$jobs $t:"
    fi
  done
  mkdir -p "$OUT/racecheck"
  log "compute-sanitizer --tool racecheck test_cuda_engine, in parallel:$jobs (RNNT_TEST_QUICK=1 RNNT_CUDA_MAPPED=0 OPENBLAS_NUM_THREADS=1 $race_env)"
  rt=$(tmo ${RACE_TIMEOUT:-300})
  for j in $jobs; do
    t=${j%%:*} g=${j#*:}
    ( env $race_env RNNT_TEST_ONLY=$t RNNT_TEST_GOLDEN=$g RNNT_TEST_DATA=$PWD/tests/data OPENBLAS_NUM_THREADS=1 \
        RNNT_CUDA_MAPPED=0 RNNT_TEST_QUICK=1 timeout $rt compute-sanitizer --tool racecheck --error-exitcode 9 \
        $B/test_cuda_engine > "$OUT/racecheck/$t${g:+-$g}.log" 2>&1
      echo "exit $? after $SECONDS s" >> "$OUT/racecheck/$t${g:+-$g}.log" ) &
  done
  wait
  for f in "$OUT"/racecheck/*.log; do
    echo "== $(basename $f .log): $(grep -E '^/|^\[  (PASSED|FAILED) |RACECHECK SUMMARY|^exit ' $f | tr '\n' ' ')"
  done | tee "$OUT/racecheck.log"
fi
log done
