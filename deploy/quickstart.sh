#!/usr/bin/env bash
# Quick start: install what the daemon and the CLI need (deploy/install-deps.sh: needs root or sudo for
# apt-get; without either it prints the command to run as root and stops), build rnntd and
# rnnt-transcribe, transcribe the shipped sample WAVs with the CLI, start the rnntd daemon on the shipped
# model with the default backend (CPU unless a GPU build finds a GPU), transcribe the samples' features
# over HTTP beside their references, and stop the daemon again.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
echo "== configuring and building rnntd and rnnt-transcribe in build/ (a minute or two the first time)"
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)" --target rnntd rnnt-transcribe

# The shipped model and its samples; a golden test model (random weights) only if they are missing.
shopt -s nullglob
model=models/en-char-small
samples=("$model"/samples/*.npy)
wavs=("$model"/samples/*.wav)
if [ ! -f "$model/model.yaml" ] || [ ${#samples[@]} -eq 0 ]; then
  model=tests/data/golden/hard_bb
  samples=("$model"/utt*.npy)
  wavs=()
fi
tsv="$model/samples/samples.tsv"
# reference NAME: the reference transcript of a sample from samples.tsv (column "reference"), if any
reference() {
  [ -f "$tsv" ] || return 0
  awk -F'\t' -v f="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "reference") c = i; next }
                        $1 == f && c { print $c }' "$tsv"
}

if [ ${#wavs[@]} -gt 0 ]; then
  echo "== rnnt-transcribe on the sample WAVs (the engine decodes the audio and computes the features)"
  build/engine/rnnt-transcribe --model "$model" --backend cpu "${wavs[@]}" | while IFS=$'\t' read -r file text; do
    name=$(basename "$file" .wav)
    printf '%-40s %s\n' "$name.wav" "$text"
    ref=$(reference "$name")
    [ -z "$ref" ] || printf '%-40s %s\n' "  (reference)" "$ref"
  done
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
echo "== rnntd is serving $model on 127.0.0.1:$port ($(sed -n 's/.*msg=ready.* backend=\([a-z]*\).*/\1/p' "$log") backend): the samples' features over HTTP"
for s in "${samples[@]}"; do
  name=$(basename "$s" .npy)
  curl -sS -H 'Content-Type: application/x-npy' --data-binary @"$s" \
       "http://127.0.0.1:$port/v1/transcribe" |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("%-40s %s" % (sys.argv[1], r["text"] if "text" in r else r))' "$name.npy"
  ref=$(reference "$name")
  [ -z "$ref" ] || printf '%-40s %s\n' "  (reference)" "$ref"
done
curl -sS "http://127.0.0.1:$port/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); print("== health: %s, %d requests ok, %.2f s of audio, real-time factor %.4f" % (h["status"], h["requests"]["ok"], h["audio_seconds"], h["real_time_factor"]))'
cat <<EOF
== the binaries: $(pwd)/build/server/rnntd and $(pwd)/build/engine/rnnt-transcribe
   transcribe your own recording (WAV, FLAC, Ogg, MP3; any rate and channels):
     build/engine/rnnt-transcribe --model $model YOUR_RECORDING.wav
     build/engine/rnnt-transcribe --model $model --format srt YOUR_RECORDING.mp3 > subtitles.srt
EOF
