#!/bin/bash
# One training piece on the GPU machine, as one device-tool `run` from the repository root, with carry
# [".corpus/run"] (the engines, the text and, after the first piece, ckpt.pt: models/README.md steps 3-4).
#   models/train/device-piece.sh DATA_SEED [train.py options...]      e.g.  3   or   4 --final-piece
# Resumes from .corpus/run/ckpt.pt when it exists. Writes $OUT/train/ckpt.pt, $OUT/train/model/ and
# $OUT/logs.tar.xz (train.txt: train.py's output, train/log.jsonl, train/dev_hyps.jsonl, the race logs), and
# prints the piece's summary. Environment:
#   BUDGET_S   training time of the piece (default 535: the piece ends inside one 600 s run)
#   SHARDS     training shards to synthesise (default 30; synthesis runs all piece long on 15 cores)
#   CONFIG     training hyper-parameters (default models/train/en-char-small.train.json)
#   JOBS       synthesiser processes (default 15)
#   PYTHON     the interpreter with torch (default python3)
#   RACE=1     also run tests/gpu/device-daemon.sh $RACE_STEPS (default cli,unit,racecheck) in the
#              background (carry .gpu/race too, staged by tests/gpu/stage-daemon.sh; logs in $OUT/race/)
set -u
seed=$1
shift
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/train"
if [ "${RACE:-0}" = 1 ]; then
  PACK=.gpu/race/pack.tar.xz RACE_TIMEOUT=${RACE_TIMEOUT:-430} BUDGET_S=470 OUT=$OUT/race \
    bash tests/gpu/device-daemon.sh ${RACE_STEPS:-cli,unit,racecheck} > "$OUT/race.txt" 2>&1 &
fi
resume=()
[ -f .corpus/run/ckpt.pt ] && resume=(--resume .corpus/run/ckpt.pt)
"${PYTHON:-python3}" models/train/train.py --model models/train/en-char-small.yaml \
  --config "${CONFIG:-models/train/en-char-small.train.json}" --engines .corpus/run/tts-root.tar.xz \
  --text .corpus/run/text --work /tmp/w --out "$OUT/train" --data-seed "$seed" "${resume[@]}" \
  --max-frames 120000 --max-cells 6000000 --shards "${SHARDS:-30}" --budget-s "${BUDGET_S:-535}" --jobs "${JOBS:-15}" \
  "$@" > "$OUT/train.txt" 2>&1
echo "train.py exit $?"
wait
grep -E '"event": "(start|end|dev|dev_final)"' "$OUT/train/log.jsonl" | cut -c1-400
grep -E '"step": [0-9]+, "loss"' "$OUT/train/log.jsonl" | awk 'NR % 10 == 1' | cut -c1-200 | tail -12
grep -c '"event": "shard"' "$OUT/train/log.jsonl" | sed 's/^/shards taken in: /'
[ "${RACE:-0}" = 1 ] && tail -60 "$OUT/race.txt"
# at most 8 files come back from a run: the checkpoint, the model's 3 files and one archive of the logs
(cd "$OUT" && tar cJf logs.tar.xz train.txt train/log.jsonl train/dev_hyps.jsonl $(ls -d race.txt race 2>/dev/null) &&
  rm -rf race.txt race train.txt train/log.jsonl train/dev_hyps.jsonl)
exit 0
