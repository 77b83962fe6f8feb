#!/bin/bash
# Issue 19 on the GPU machine: the models converted by rnntd_import (staged by tests/gpu/stage-import.sh
# into .gpu/nemo with the CUDA-enabled rnnt-transcribe) transcribed with --backend cuda in fp32 and
# fp16, each token sequence compared with the framework's (transcripts.json).
#   bash .gpu/nemo/device-import.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
steps=all
source "$here/device-common.sh"
unpack "$here/pack.tar.xz" /tmp/imp
use_libs /tmp/imp/lib cublas cuda_runtime
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd "$here/data"
files=$(python3 -c "import json; d=json.load(open('transcripts.json'))['utterances']; print(' '.join(u['wav'].split('/')[-1] for u in d.values()))")
for prec in fp32 fp16; do
  log "cuda $prec"
  /tmp/imp/bin/rnnt-transcribe --model mlperf --backend cuda --precision $prec --format json $(for f in $files; do echo audio/$f; done) \
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
