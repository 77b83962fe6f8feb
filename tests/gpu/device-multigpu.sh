#!/bin/bash
# Issue 18 on a machine with two GPUs (kind nvidia-h200-x2), after tests/gpu/stage-daemon.sh here and a `run`
# carrying .gpu/daemon. Logs and load JSON go to $OUT.
#   1. slots: tests/server/test_devices.py on CUDA with model.devices [0, 1] (one slot per GPU), fp32, shipped model;
#   2. sametext: an fp32 daemon on [0] and one on auto (both GPUs) each transcribe the same 96 random utterances
#      (5-15 s), 24 at a time so batches spread over both GPUs; every transcript must be identical;
#   3. scale: fp16 daemons (max_batch 256, 2 workers per device) on [0] and then on auto under the same load
#      (PROCS loadgen processes x CLIENTS clients of random 10 s utterances for SECS s); throughput and each
#      device's busy share (busy_seconds from /health over the load's wall time).
#   tests/gpu/device-multigpu.sh [STEPS]   STEPS: comma list of slots,sametext,scale (default all three)
set -u
mg_steps=${1:-slots,sametext,scale}
source tests/gpu/device-daemon.sh none   # the pack into $DD, $B, $M, start_daemon, stop_daemon, load, GPU_CONF
steps=$mg_steps
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader

if has slots; then
  log "test_devices.py, model.devices [0, 1], fp32, $M"
  RNNTD_TEST_SLOTS="[0, 1]" RNNTD_BIN=$B/rnntd RNNTD_TEST_BACKEND=cuda RNNTD_MODEL=$M RNNTD_TEST_PRECISION=fp32 \
    PYTHONDONTWRITEBYTECODE=1 timeout $(tmo 150) python3 tests/server/test_devices.py -v > "$OUT/slots.log" 2>&1
  echo "exit $?"; grep -E "^Ran |^OK|FAILED|^FAIL:|^ERROR:" "$OUT/slots.log"
fi

if has sametext; then
  for devs in "[0]" "auto"; do
    log "sametext: fp32 daemon, model.devices $devs"
    if start_daemon cuda "$GPU_CONF
model:
  devices: $devs
  precision: fp32"; then
      timeout $(tmo 120) python3 - "$PORT" "$OUT/sametext-${devs//[\[\]]/}.json" <<'PY'
import concurrent.futures, http.client, json, random, struct, sys
port, out = int(sys.argv[1]), sys.argv[2]
def npy(rows, seed):
    r = random.Random(seed)
    vals = [r.gauss(-4.0, 2.5) for _ in range(rows * 80)]
    head = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 80), }" % rows
    head += " " * (63 - len(head) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + struct.pack("<%df" % len(vals), *vals)
def one(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/transcribe", body=npy(random.Random(i).randint(500, 1500), 1000 + i),
              headers={"Content-Type": "application/x-npy"})
    r = c.getresponse(); d = json.loads(r.read())
    return r.status, d.get("text")
with concurrent.futures.ThreadPoolExecutor(24) as ex:
    res = list(ex.map(one, range(96)))
json.dump(res, open(out, "w"))
print("  %d answers, statuses %s" % (len(res), sorted(set(s for s, _ in res))))
PY
      python3 -c "import json,urllib.request as u; h=json.load(u.urlopen('http://127.0.0.1:$PORT/health')); print('  devices:', [(d['index'], d['ordinal'], d['batches']) for d in h['devices']])"
      stop_daemon cuda
    fi
  done
  python3 - "$OUT/sametext-0.json" "$OUT/sametext-auto.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
print("sametext: %d of %d transcripts identical (one GPU vs two); differing: %s" % (len(a) - len(diff), len(a), diff[:10]))
PY
fi

if has scale; then
  # HTTP_THREADS / MAX_CONN: the transport for a heavier load than device-daemon.sh's (8 threads, 1,024 connections)
  GPU_CONF=$(sed "s/http_threads: 8/http_threads: ${HTTP_THREADS:-8}/; s/max_connections: 1024/max_connections: ${MAX_CONN:-1024}/" <<< "$GPU_CONF")
  for devs in "[0]" "auto"; do
    log "scale: fp16 daemon, model.devices $devs"
    if start_daemon cuda "$GPU_CONF
model:
  devices: $devs"; then
      h0=$(python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/health').read().decode())"); t0=$(date +%s.%N)
      load "gpu-${devs}" ${PROCS:-8} ${CLIENTS:-64} ${SECS:-20}
      h1=$(python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$PORT/health').read().decode())"); t1=$(date +%s.%N)
      python3 - "$h0" "$h1" "$t0" "$t1" <<'PY'
import json, sys
h0, h1 = json.loads(sys.argv[1]), json.loads(sys.argv[2]); wall = float(sys.argv[4]) - float(sys.argv[3])
for a, b in zip(h0["devices"], h1["devices"]):
    print("  device slot %d (GPU %s): %d batches, busy %.1f of %.1f s wall = %.0f%%" % (b["index"], b["ordinal"],
          b["batches"] - a["batches"], b["busy_seconds"] - a["busy_seconds"], wall,
          100 * (b["busy_seconds"] - a["busy_seconds"]) / wall))
print("  mean batch %s" % h1["mean_batch_size"])
PY
      stop_daemon cuda
    fi
  done
fi
