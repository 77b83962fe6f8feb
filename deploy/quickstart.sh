#!/usr/bin/env bash
# Quick start: install dependencies, build, start the rnntd daemon on the shipped model with the
# embedded default backend (CPU unless a GPU build finds a GPU), transcribe the shipped samples over
# HTTP, and stop the daemon again.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)"

# The shipped model and its samples; a golden test model (random weights) only if they are missing.
shopt -s nullglob
model=models/en-char-small
samples=("$model"/samples/*.npy)
if [ ! -f "$model/model.yaml" ] || [ ${#samples[@]} -eq 0 ]; then
  model=tests/data/golden/hard_bb
  samples=("$model"/utt*.npy)
fi

log=$(mktemp)
build/server/rnntd --model "$model" --port 0 2>"$log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 600); do
  if grep -q 'msg=ready' "$log"; then port=$(sed -n 's/.*msg=listening .*port=\([0-9]*\).*/\1/p' "$log"); break; fi
  if ! kill -0 $pid 2>/dev/null; then cat "$log" >&2; echo "quickstart: rnntd exited" >&2; exit 1; fi
  sleep 0.1
done
[ -n "$port" ] || { cat "$log" >&2; echo "quickstart: rnntd did not become ready" >&2; exit 1; }
echo "== rnntd is serving $model on 127.0.0.1:$port ($(sed -n 's/.*msg=ready.* backend=\([a-z]*\).*/\1/p' "$log") backend)"
for s in "${samples[@]}"; do
  ref="${s%.npy}.txt"
  curl -sS -H 'Content-Type: application/x-npy' --data-binary @"$s" \
       "http://127.0.0.1:$port/v1/transcribe" |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-40s %s" % (sys.argv[1], r["text"] if "text" in r else r))' "$(basename "$s")"
  [ -f "$ref" ] && printf '%-40s %s\n' "  (reference)" "$(cat "$ref")"
done
curl -sS "http://127.0.0.1:$port/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); print("== health: %s, %d requests ok, %.2f s of audio, real-time factor %.4f" % (h["status"], h["requests"]["ok"], h["audio_seconds"], h["real_time_factor"]))'
