#!/bin/bash
# One training piece on the GPU machine, as one device-tool `run` from the repository root, with carry
# [RUN] (default .corpus/run: the engines, the text and, after the first piece, ckpt.pt: models/README.md
# steps 3-4).
#   models/train/device-piece.sh DATA_SEED [train.py options...]      e.g.  3   or   4 --final-piece
# Resumes from RUN/ckpt.pt when it exists (and RUN/opt.pt: the optimiser state). Writes $OUT/train/ckpt.pt,
# $OUT/train/opt.pt, $OUT/train/model/ and
# $OUT/logs.tar.xz (train.txt: train.py's output, train/log.jsonl, train/dev_hyps.jsonl, bench.txt, the
# race logs), and prints the piece's summary. Environment:
#   RUN        the carried folder (tts-root.tar.xz, text/, optional ckpt.pt and neural.tar.xz: hibari's
#              acoustic model for synth.py --neural, with text/hibari.jsonl.xz from make_phonemes.py)
#   CODE       where models/ is (default .: the checkout; RUN/code when the code travels with RUN)
#   MODEL      the architecture (default models/train/en-char-small.yaml), NAME the exported model's name
#   BUDGET_S   training time of the piece (default 535: the piece ends inside one 600 s run)
#   SHARDS     training shards to synthesise (default 30; synthesis runs all piece long on 15 cores)
#   CONFIG     training hyper-parameters (default models/train/en-char-small.train.json)
#   JOBS       synthesiser processes (default 15)
#   PYTHON     the interpreter with torch (default python3); the models package (CODE/models/pyproject.toml)
#              is installed into it first, editable and offline (pip --no-index --no-build-isolation: the
#              image's setuptools builds it), and the code runs as python3 -m rnntd_train.train
#   BENCH=1    first time one training step by part (rnntd_train.bench_step, mode fn; BENCH_SHAPES) into bench.txt;
#   BENCH=bg   the same beside the piece's start (the GPU idles while the dev set and the first shard are
#              synthesised, ~35 s), with BENCH_MODES (default fn) and at most BENCH_TIMEOUT s (default 90)
#   MAX_FRAMES, MAX_CELLS  the batch limits (default 120000 frames, 6000000 lattice cells)
#   RACE=1     also run tests/gpu/device-daemon.sh $RACE_STEPS (default cli,unit,racecheck) in the
#              background (carry .gpu/race too, staged by tests/gpu/stage-daemon.sh; logs in $OUT/race/)
set -u
seed=$1
shift
OUT=${OUT:-/tmp/out}
RUN=${RUN:-.corpus/run}
CODE=${CODE:-.}
PY=${PYTHON:-python3}
mkdir -p "$OUT/train"
if ! "$PY" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --no-index \
     -e "$CODE/models" > "$OUT/pip.txt" 2>&1; then
  echo "device-piece: installing the models package from $CODE/models failed:"; tail -20 "$OUT/pip.txt"; exit 1
fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout 150 "$PY" -m rnntd_train.bench_step --model "${MODEL:-$CODE/models/train/en-char-small.yaml}" \
    --modes fn --shapes "${BENCH_SHAPES:-300x400x50,80x1200x150}" --reps 5 --profile > "$OUT/bench.txt" 2>&1
  echo "bench_step exit $?"; tail -25 "$OUT/bench.txt"
elif [ "${BENCH:-0}" = bg ]; then
  (timeout "${BENCH_TIMEOUT:-90}" "$PY" -m rnntd_train.bench_step --model "${MODEL:-$CODE/models/train/en-char-small.yaml}" \
    --modes "${BENCH_MODES:-fn}" --shapes "${BENCH_SHAPES:-300x400x50,80x1200x150}" --reps 5 --profile \
    > "$OUT/bench.txt" 2>&1; echo "bench_step exit $?" >> "$OUT/bench.txt") &
fi
if [ "${RACE:-0}" = 1 ]; then
  PACK=.gpu/race/pack.tar.xz RACE_TIMEOUT=${RACE_TIMEOUT:-430} BUDGET_S=470 OUT=$OUT/race \
    bash tests/gpu/device-daemon.sh ${RACE_STEPS:-cli,unit,racecheck} > "$OUT/race.txt" 2>&1 &
fi
extra=()
[ -f "$RUN/ckpt.pt" ] && extra+=(--resume "$RUN/ckpt.pt")
[ -f "$RUN/opt.pt" ] && extra+=(--resume-opt "$RUN/opt.pt")
[ -f "$RUN/neural.tar.xz" ] && extra+=(--neural "$RUN/neural.tar.xz")
"$PY" -m rnntd_train.train --model "${MODEL:-$CODE/models/train/en-char-small.yaml}" \
  --config "${CONFIG:-$CODE/models/train/en-char-small.train.json}" --engines "$RUN/tts-root.tar.xz" \
  --text "$RUN/text" --work /tmp/w --out "$OUT/train" --data-seed "$seed" "${extra[@]}" \
  --max-frames "${MAX_FRAMES:-120000}" --max-cells "${MAX_CELLS:-6000000}" --shards "${SHARDS:-30}" --budget-s "${BUDGET_S:-535}" --jobs "${JOBS:-15}" \
  --name "${NAME:-en-char-small}" "$@" > "$OUT/train.txt" 2>&1
echo "train.py exit $?"
wait
grep -E '"event": "(start|end|dev|dev_start|dev_final)"' "$OUT/train/log.jsonl" | cut -c1-400
grep -E '"step": [0-9]+, "loss"' "$OUT/train/log.jsonl" | awk 'NR % 10 == 1' | cut -c1-200 | tail -12
grep -c '"event": "shard"' "$OUT/train/log.jsonl" | sed 's/^/shards taken in: /'
grep -E "synth.py: [0-9]+ utterances|voices" "$OUT/train.txt" | head -4
[ "${RACE:-0}" = 1 ] && tail -60 "$OUT/race.txt"
[ "${BENCH:-0}" = bg ] && grep -vE '^ *(---|Name|Self)' "$OUT/bench.txt" | tail -40
# at most 8 files come back from a run: the checkpoint, the model's 3 files and one archive of the logs
(cd "$OUT" && tar cJf logs.tar.xz train.txt train/log.jsonl train/dev_hyps.jsonl $(ls -d bench.txt race.txt race 2>/dev/null) &&
  rm -rf race.txt race train.txt train/log.jsonl train/dev_hyps.jsonl bench.txt)
exit 0
