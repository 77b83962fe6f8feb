#!/bin/bash
# On the GPU machine, from the repository root, after tests/gpu/stage-sanitize.sh here and a `run` carrying its DEST
# (default .gpu/race7): the gpu-labelled tests under compute-sanitizer, a job table (sanitize-jobs.txt: name, tool, ctest
# test, added environment) run JOBS at a time (default 16), the longest first, each within TOOL_TIMEOUT s (default 150)
# and what is left of BUDGET_S (default 170; a job is not started with less than MIN_LEFT_S, default 25, left).
#   bash .gpu/race7/device-sanitize.sh [JOB_TABLE]     ONLY=name,... runs those jobs of the table alone
# Prints one verdict line per job (clean, ERRORS FOUND, TIMED OUT, FAILED, NOT RUN) with the tool's summary and, for
# hazards and errors, their distinct source lines; every log goes back in one $OUT/logs.tar.xz (the device returns a
# limited number of files) beside $OUT/summary.txt. CS= another compute-sanitizer (a stub, for a dry run here).
set -u
steps=x
H=$(cd "$(dirname "$0")" && pwd)
source "$H/device-common.sh"
table=${1:-$H/sanitize-jobs.txt}
open_pack "$H/pack.tar.xz" /tmp/san cublas cuda_runtime cufft
BIN=$B
BASE_BIN=
if [ -f "$H/base/pack.tar.xz" ]; then
  unpack "$H/base/pack.tar.xz" /tmp/san-base
  BASE_BIN=/tmp/san-base/bin
  export LD_LIBRARY_PATH=/tmp/san-base/lib:$LD_LIBRARY_PATH
fi
CS=${CS:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
export OPENBLAS_NUM_THREADS=1
L=$OUT/logs
mkdir -p "$L"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; $CS --version | tail -1; } 2>&1 | tee "$L/env.log"

# job NAME TOOL TEST [VAR=VALUE...]: runs in the background; its log ends with "exit RC after S s"
job() {
  local name=$1 tool=$2 test=$3 bin=$BIN
  shift 3
  if [[ $test == base:* ]]; then
    test=${test#base:}
    bin=$BASE_BIN
  fi
  local row cmd env
  row=$(awk -F'\t' -v t="$test" '$1 == t' "$H/tests.tsv")
  if [ -z "$row" ] || [ -z "$bin" ]; then
    echo "not run: no test $test in tests.tsv, or no base pack" > "$L/$name.log"
    return
  fi
  cmd=$(cut -f2 <<< "$row")
  env=$(cut -f3 <<< "$row")
  local tt
  tt=$(tmo ${TOOL_TIMEOUT:-150})
  ( s0=$SECONDS
    echo "== $name: $tool $test ($env $*) within $tt s ($(date +%T))"
    if [ "$tool" = none ]; then
      env $env "$@" timeout $tt $bin/$cmd
    else
      env $env "$@" timeout $tt $CS --tool $tool --error-exitcode 9 $bin/$cmd
    fi
    echo "exit $? after $((SECONDS - s0)) s" ) > "$L/$name.log" 2>&1 &
}

names=()
while read -r name tool test rest; do
  [[ -z "$name" || $name == \#* ]] && continue
  [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]] && continue
  names+=("$name")
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-16}" ]; do wait -n; done
  if [ $((budget - SECONDS)) -lt "${MIN_LEFT_S:-25}" ]; then
    echo "not run: the script's budget is spent" > "$L/$name.log"
    continue
  fi
  job "$name" "$tool" "$test" $rest
done < "$table"
wait

for name in "${names[@]}"; do
  f=$L/$name.log
  tool=$(sed -n '1s/^== [^:]*: \([a-z]*\) .*/\1/p' "$f")
  verdict=$(san_verdict "$f")
  [ "$tool" = none ] && [ "$verdict" = clean ] && verdict=passed
  echo "$name: $verdict; $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|Internal Sanitizer Error|^\[  FAILED  \]|^\[  PASSED  \]|^exit |^not run' "$f" |
    tr '\n' ' ' | cut -c1-360)"
  # the distinct places: racecheck's pairs ("Race reported between Read access at F+0x.. in FILE:LINE" and the next
  # line's "and Write access at ... in FILE:LINE"), the other tools' error kinds and first frames ("at F+0x.. in FILE:LINE")
  awk '/Race reported between/ { a = $0; getline b; print a " || " b }' "$f" |
    sed -E 's/.*(Error|Warning|ERROR|WARNING).*between ([A-Za-z]+) access.* in ([^ ]*\/)?([^ \/:]+:[0-9]+).*\|\|.*and ([A-Za-z]+) access.* in ([^ ]*\/)?([^ \/:]+:[0-9]+).*/\1: \2 \4 vs \5 \7/' |
    sort | uniq -c | sort -rn | head -6 | sed 's/^/  race /'
  grep -hE "^========= +(Invalid|Uninitialized|Barrier|Out of range|Program hit|Malloc|Cuda API error|Unused)" "$f" |
    sort | uniq -c | sort -rn | head -4 | sed 's/^/  error /'
  grep -hoE "^=========     at .* in [^ ]+:[0-9]+" "$f" | sed -E 's/.* in ([^ ]*\/)?([^ \/]+:[0-9]+)$/\2/' |
    sort | uniq -c | sort -rn | head -4 | sed 's/^/  at /'
done | tee "$OUT/summary.txt"
log done
# one archive back (the tool returns a few files a call)
(cd "$OUT" && tar -cJf logs.tar.xz logs && rm -rf logs)
ls -la "$OUT"
