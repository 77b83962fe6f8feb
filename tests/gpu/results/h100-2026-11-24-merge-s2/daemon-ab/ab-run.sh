#!/bin/bash
# A/B: the same HTTP load against rnntd binaries from several packs (same machine, same loadgen)
steps=all
source tests/gpu/device-common.sh
M=models/en-char-small
printf 'server:\n  http_threads: 8\n  max_connections: 1024\nbatching:\n  workers: 2\n  max_batch: 256\n  max_delay_us: 10000\n  max_queue: 4096\nlog:\n  requests: false\n' > /tmp/ab.yaml
for pack in "$@"; do
  D=/tmp/ab_$pack; unpack .gpu/$pack/pack.tar.xz $D
  export LD_LIBRARY_PATH=; use_libs $D/lib cublas cuda_runtime cufft
  log "rnntd from .gpu/$pack"
  $D/bin/rnntd --config /tmp/ab.yaml --model $M --backend cuda --port 0 2> $OUT/rnntd-$pack.log &
  PID=$!; PORT=""
  for _ in $(seq 600); do grep -q 'msg=ready' $OUT/rnntd-$pack.log && { PORT=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' $OUT/rnntd-$pack.log); break; }; sleep 0.1; done
  [ -n "$PORT" ] || { tail -5 $OUT/rnntd-$pack.log; continue; }
  python3 tests/bench/loadgen.py --url http://127.0.0.1:$PORT --frames 1000 --utterances 16 --seed 9 --concurrency 1 --duration 8 --warmup 2 --json 2>&1 | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('  lone: p50 %s p90 %s ms, %d ok' % (r['latency_ms']['p50'], r['latency_ms']['p90'], r['requests_ok']))"
  rm -f /tmp/ab-*.json
  for p in $(seq 8); do
    python3 tests/bench/loadgen.py --url http://127.0.0.1:$PORT --frames 1000 --utterances 16 --seed $p --concurrency 64 --duration 15 --warmup 3 --timeout 60 --json > /tmp/ab-$p.json 2>&1 &
  done
  wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
  python3 - /tmp/ab-*.json <<'PY'
import json, sys
reps = [json.loads(open(f).read().strip().splitlines()[-1]) for f in sys.argv[1:]]
print("  %d ok, %.1f requests/s, %.0f audio s/s; p50 %s; mean batch %s, statuses %s" % (
    sum(r["requests_ok"] for r in reps), sum(r["requests_per_s"] for r in reps), sum(r["audio_s_per_s"] for r in reps),
    [r["latency_ms"]["p50"] for r in reps][:3], reps[0]["server"]["mean_batch_size"], reps[0]["statuses"]))
PY
  kill -TERM $PID; wait $PID; echo "  rnntd exit $?"
done
