#!/bin/bash
# Issue 19 on the GPU machine: the models converted by rnntd_import (staged by tests/gpu/stage-import.sh
# into .gpu/nemo with the CUDA-enabled rnnt-transcribe) transcribed with --backend cuda in fp32 and
# fp16, each token sequence compared with the framework's (transcripts.json).
# bench: bench_engine on the MLPerf RNN-T architecture (2 x 1024 LSTM, time stacking x 2, 3 x 1024,
# 2 x 320 predictor, 512 joint, 29 outputs, max_symbols 30, no big blanks) with random weights, soft
# activations (the reference's) beside the same model with hard activations.
# nemo: gpu_test_nemo (NeMo's converted transducers give NeMo's greedy tokens on CUDA fp32), the
# LayerNorm kernel against its CPU twin, and test_cuda_engine on the golden soft_proj_ln and the two
# NeMo conversions (CUDA fp32 tokens = CPU's; fp16 agreement; graphs, persistent and fused paths).
#   bash .gpu/nemo/device-import.sh [tokens,bench,nemo]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
steps=${1:-tokens}
source "$here/device-common.sh"
open_pack "$here/pack.tar.xz" /tmp/imp cublas cuda_runtime
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if has tokens; then
cd "$here/data"
files=$(python3 -c "import json; d=json.load(open('transcripts.json'))['utterances']; print(' '.join(u['wav'].split('/')[-1] for u in d.values()))")
for prec in fp32 fp16; do
  log "cuda $prec"
  $B/rnnt-transcribe --model mlperf --backend cuda --precision $prec --format json $(for f in $files; do echo audio/$f; done) \
    > "$OUT/mlperf-cuda-$prec.jsonl" 2> "$OUT/mlperf-cuda-$prec.err"; echo "rc $?"
  python3 - "$OUT/mlperf-cuda-$prec.jsonl" <<'PY'
import json, sys
ref = json.load(open("transcripts.json"))["utterances"]
got = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
same = 0
for (name, u), g in zip(ref.items(), got):
    ids = [t["id"] for t in g["tokens"]]
    ok = ids == u["tokens"]
    same += ok
    print(f"{name}: {'same' if ok else 'DIFFERENT'} ({len(ids)} tokens, reference {len(u['tokens'])})")
print(f"{same} of {len(ref)} utterances token for token equal to the reference ({len(got)} decoded)")
PY
done
cd - >/dev/null
fi

if has nemo; then
  R=$here/root/tests/data
  log "gpu_test_nemo"
  ( export RNNT_TEST_DATA=$R RNNT_TEST_BACKEND=cuda; timeout $(tmo 120) $B/test_nemo ) > "$OUT/test_nemo.log" 2>&1
  echo "exit $?"; grep -E "clips|PASSED|FAILED|rror" "$OUT/test_nemo.log"
  log "test_cuda_kernels test_layer_norm"
  ( export RNNT_TEST_ONLY=test_layer_norm; timeout $(tmo 120) $B/test_cuda_kernels ) > "$OUT/test_layer_norm.log" 2>&1
  echo "exit $?"; grep -E "layer norm|PASSED|FAILED|rror" "$OUT/test_layer_norm.log"
  log "test_cuda_engine: golden soft_proj_ln, the NeMo conversions"
  for t in test_golden test_extra_models; do
    ( export RNNT_TEST_DATA=$R RNNT_TEST_ONLY=$t RNNT_TEST_GOLDEN=soft_proj_ln \
        RNNT_GPU_MODELS=$R/nemo/imported/char-plain:$R/nemo/imported/char-multiblank:$R/nemo/imported/bpe-multiblank; timeout $(tmo 200) $B/test_cuda_engine ) \
      > "$OUT/test_cuda_engine-$t.log" 2>&1
    echo "$t exit $?"; grep -E "PASSED|FAILED|rror|identical|golden|fp16|model" "$OUT/test_cuda_engine-$t.log" | head -20
  done
fi

if has bench; then
  for act in soft hard; do
    log "random MLPerf architecture, $act"
    (cd models && timeout $(tmo 60) python3 -m rnntd_ref.random_model --preset mlperf --big-blanks none --max-symbols 30 \
        --activation $act --calib-utts 8 --seed 1 --out /tmp/mlperf-$act) > "$OUT/model-$act.log" 2>&1
    tail -1 "$OUT/model-$act.log"
  done
  for act in soft hard; do
    for prec in fp16 fp32; do
      log "bench_engine $act $prec"
      timeout $(tmo 40) $B/bench_engine /tmp/mlperf-$act --backend cuda --precision $prec --batches 1,256 \
          --seconds 3 --reps 3 --extras 0 > "$OUT/bench-$act-$prec.log" 2>&1; echo "exit $?"
      grep -E "^\| [0-9]|^model|^Engine" "$OUT/bench-$act-$prec.log" | cut -c1-240
    done
  done
fi
log done
