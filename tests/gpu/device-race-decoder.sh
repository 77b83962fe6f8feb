#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-race-decoder.sh here and a `run` carrying
# .gpu/race6: test_cuda_decoder (tests/gpu/test_cuda_decoder.cu: the decoding loop alone on synthetic encoder outputs,
# no encoder and no cuBLAS) plainly and under compute-sanitizer, one verdict line per loop variant and tool.
#   bash .gpu/race6/device-race-decoder.sh [STEPS]     STEPS: comma list of plain,full,racecheck,memcheck,synccheck,
#                                                        initcheck (default plain,racecheck,memcheck)
#   plain:     quick mode (RNNT_TEST_QUICK=1), every variant against the WHILE graph and the CPU twin (ctest's
#              gpu_test_cuda_decoder runs the same outside quick mode);
#   full:      outside quick mode (4 models, batches up to 300, utterances up to 97 frames);
#   racecheck: compute-sanitizer --tool racecheck --error-exitcode 9 on the quick mode, one process per variant
#              (RNNT_TEST_VARIANTS=v RNNT_TEST_REF=none: only that variant's kernels run under the tool, fp32 still
#              against the CPU twin; RNNT_CUDA_MAPPED=0: racecheck crashed on kernel writes to mapped host memory),
#              JOBS (default 8) at a time, each within TOOL_TIMEOUT s (default 240);
#   memcheck, synccheck, initcheck: the same with that tool.
# VARIANTS=a,b,... limits the sanitizer steps to those variants (default all: test_cuda_decoder --list); RACE_ENV adds
# settings to the sanitizer runs (e.g. "RNNT_TEST_SIZES=1,17,130 RNNT_TEST_PRECISION=fp32" to shorten them); PACK
# another pack holding bin/test_cuda_decoder (.gpu/label/pack.tar.xz from stage-gpu-label.sh has it too). Logs in $OUT;
# BUDGET_S (default 560) bounds the whole script.
set -u
steps=${1:-plain,racecheck,memcheck}
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "${PACK:-$H/pack.tar.xz}" /tmp/race-decoder cublas cuda_runtime cufft
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ldd $B/test_cuda_decoder | grep -i "not found"

for mode in plain full; do
  has $mode || continue
  q=1
  [ $mode = full ] && q=0
  log "test_cuda_decoder ($mode)"
  start=$SECONDS
  RNNT_TEST_QUICK=$q timeout $(tmo 300) $B/test_cuda_decoder > "$OUT/$mode.log" 2>&1
  rc=$?
  echo "$mode: exit $rc ($((SECONDS - start)) s)"
  grep -E "^seed|utterances of|PASSED|FAILED|ERROR|near tie" "$OUT/$mode.log" | cut -c1-300 | head -30
done

variants=${VARIANTS:-$($B/test_cuda_decoder --list | tr '\n' ',')}
for tool in racecheck memcheck synccheck initcheck; do
  has $tool || continue
  $CS --version | tail -1
  mkdir -p "$OUT/$tool"
  log "compute-sanitizer --tool $tool, a process per variant, ${JOBS:-8} at a time (RNNT_TEST_QUICK=1 RNNT_TEST_REF=none RNNT_CUDA_MAPPED=0 ${RACE_ENV:-})"
  for v in ${variants//,/ }; do
    while [ $(jobs -rp | wc -l) -ge ${JOBS:-8} ]; do wait -n; done
    if [ $((budget - SECONDS)) -lt 30 ]; then
      echo "not run: the script's budget is spent" > "$OUT/$tool/$v.log"
      continue
    fi
    tt=$(tmo ${TOOL_TIMEOUT:-240})
    ( s0=$SECONDS
      env ${RACE_ENV:-} RNNT_TEST_QUICK=1 RNNT_TEST_VARIANTS=$v RNNT_TEST_REF=none RNNT_CUDA_MAPPED=0 \
        timeout $tt $CS --tool $tool --error-exitcode 9 $B/test_cuda_decoder > "$OUT/$tool/$v.log" 2>&1
      echo "exit $? after $((SECONDS - s0)) s" >> "$OUT/$tool/$v.log" ) &
  done
  wait
  for v in ${variants//,/ }; do
    f="$OUT/$tool/$v.log"
    verdict=$(san_verdict "$f")
    echo "$tool $v: $verdict; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Internal Sanitizer Error|^\[  ERROR   \]|^\[  FAILED  \]|^exit |^not run' "$f" |
      head -6 | tr '\n' ' ' | cut -c1-400)"
  done | tee "$OUT/$tool.log"
done
log done
