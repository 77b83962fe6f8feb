#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-gpu-label.sh here and a `run`
# carrying .gpu/label: every `gpu`-labelled ctest test, as ctest would run it (same program, arguments,
# environment), one log each in $OUT, then a summary line per test. MEMCHECK=NAME,... also runs those
# tests under compute-sanitizer memcheck. BUDGET_S (default 560) bounds the whole script.
set -u
steps=all
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
open_pack "$H/pack.tar.xz" /tmp/gl cublas cuda_runtime cufft
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
fails=0
while IFS=$'\t' read -r name cmd env; do
  [ -n "$name" ] || continue
  log "$name"
  start=$SECONDS
  ( export $env; timeout $(tmo 300) $B/$cmd ) > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc ($((SECONDS - start)) s)"; [ $rc -eq 0 ] || { fails=$((fails + 1)); tail -15 "$OUT/$name.log"; }
  if [[ ",${MEMCHECK:-}," == *",$name,"* ]]; then
    ( export $env; timeout $(tmo 200) compute-sanitizer --tool memcheck --error-exitcode 9 $B/$cmd ) \
      > "$OUT/$name.memcheck.log" 2>&1
    echo "$name memcheck: exit $? $(grep -h 'ERROR SUMMARY' "$OUT/$name.memcheck.log" | tail -1)"
  fi
done < "$H/tests.tsv"
echo "failed: $fails"
