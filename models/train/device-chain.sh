#!/bin/bash
# One training piece of a chain of device-tool runs, the next run started while the machine is still warm
# (idle_release_s), so that a piece resumes from the last one's fp32 weights *and* AdamW moments, which do
# not fit the carry beside the engines (28 MB). Run from the repository root of the main checkout:
#   bash RUN/device-chain.sh DATA_SEED CONFIG BUDGET_S        (the device tool: carry [RUN])
# RUN (default .gpu/model3): tts-root.tar.xz, neural.tar.xz, text/ (models/README.md step 3), ckpt.pt.xz
#   (the chain's first checkpoint: rnntd_train.ckpt_from_model of a model directory, xz), patch/ (the
#   models/train files changed since the checkout, copied over it).
# STATE (default .gpu/model3-state, ignored by git and not carried, so it stays on a warm machine): the
#   last piece's ckpt.pt and opt.pt; when it exists the piece resumes from it, else from RUN/ckpt.pt.xz
#   with the config's fill steps.
# SEED_CKPT: the chain's first checkpoint somewhere else than RUN/ckpt.pt.xz, e.g. carried by an earlier call
#   on the same warm machine when it does not fit the carry beside the engines (a larger model's: models/README.md).
# SEED_OPT: with SEED_CKPT on a machine without STATE, the AdamW moments that go with it (save_opt's opt.pt as xz,
#   carried by a call of its own): the piece then resumes them instead of running the config's fill steps.
# TTS: the engines' archive somewhere else than RUN/tts-root.tar.xz, carried by an earlier call on the same warm
#   machine when it does not fit the carry beside RUN (main's tree + 45.9 MB went over 64 MiB on 2026-11-25).
# TRAIN_ARGS: more train.py options, e.g. "--graph-warmup-stream new" (the old policy) or "--t-quant 192".
# FINAL=0: not the last piece of a schedule (no --final-piece: the config's warm-up and sqrt decay).
# MODEL, NAME, MAX_FRAMES, MAX_CELLS, BENCH...: passed on to device-piece.sh (its header).
# A file of $OUT/train over 16 MiB less 64 KiB (a larger model's ckpt.pt and opt.pt: 48 MB each for 12 M
# parameters) comes back split (FILE.partN, N = 0, 1, ...; `cat FILE.part? > FILE` joins them; the output
# prints its sha256): the device tool returns at most 8 files of at most 16 MiB. The model's F16 export
# then stays behind when it is over that size too (rnntd_train.export_ckpt makes it from ckpt.pt).
set -u
seed=$1 config=$2 budget=$3
RUN=${RUN:-.gpu/model3}
STATE=${STATE:-.gpu/model3-state}
SEED=${SEED_CKPT:-$RUN/ckpt.pt.xz}
SEED_OPT=${SEED_OPT:-}
OUT=${OUT:-/tmp/out}
t0=$(date +%s)
[ -d "$RUN/patch" ] && cp "$RUN"/patch/*.py models/train/
R=/tmp/chain-run
rm -rf "$R" /tmp/w && mkdir -p "$R"
for f in neural.tar.xz text; do ln -s "$(realpath "$RUN/$f")" "$R/$f"; done
ln -s "$(realpath "${TTS:-$RUN/tts-root.tar.xz}")" "$R/tts-root.tar.xz"
if [ -f "$STATE/ckpt.pt" ] && [ -f "$STATE/opt.pt" ]; then
  cp "$STATE/ckpt.pt" "$STATE/opt.pt" "$R/"
  echo "device-chain: resuming from the warm machine's state ($STATE: weights and AdamW moments)"
elif [ -f "$SEED" ]; then
  xz -dc "$SEED" > "$R/ckpt.pt"
  if [ -n "$SEED_OPT" ] && [ -f "$SEED_OPT" ]; then
    xz -dc "$SEED_OPT" > "$R/opt.pt"
    echo "device-chain: no state on this machine: resuming from $SEED and the AdamW moments $SEED_OPT"
  else
    echo "device-chain: no state on this machine: resuming from $SEED (fill steps)"
  fi
else
  echo "device-chain: no state on this machine and no $SEED: training from scratch"
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
RUN=$R CODE=. BUDGET_S=$budget CONFIG=$config bash models/train/device-piece.sh "$seed" \
  $([ "${FINAL:-1}" = 1 ] && echo --final-piece) ${TRAIN_ARGS:-}
if [ -f "$OUT/train/ckpt.pt" ] && [ -f "$OUT/train/opt.pt" ]; then
  mkdir -p "$STATE" && cp "$OUT/train/ckpt.pt" "$OUT/train/opt.pt" "$STATE/" && echo "device-chain: state kept in $STATE"
fi
part=$((16 * 1024 * 1024 - 65536))
if [ -f "$OUT/train/model/weights.safetensors" ] && [ "$(stat -c %s "$OUT/train/model/weights.safetensors")" -gt $part ]; then
  rm -rf "$OUT/train/model"
  echo "device-chain: the F16 export is over 16 MiB: left behind (export it from ckpt.pt)"
fi
for f in "$OUT"/train/ckpt.pt "$OUT"/train/opt.pt; do
  [ -f "$f" ] || continue
  size=$(stat -c %s "$f")
  if [ "$size" -gt $part ]; then
    n=$(( (size + part - 1) / part ))
    sum=$(sha256sum "$f" | cut -c1-64)
    split -n "$n" -d -a 1 "$f" "$f.part" && rm -f "$f"
    echo "device-chain: $(basename "$f") ($size bytes, sha256 $sum) split in $n"
  fi
done
grep -hE '"event": "(graphs_released|graph_bound_raised|shards_stopped|shape_out_of_memory|channel_failed)"' \
  <(tar xJOf "$OUT/logs.tar.xz" train/log.jsonl 2>/dev/null) | cut -c1-300 | tail -8
echo "device-chain: wall $(( $(date +%s) - t0 )) s"
