#!/usr/bin/env bash
# coverage.sh [TARGET...] — line and branch coverage of the parsers reached by each target's corpora
# (the committed seeds plus the work corpus of earlier runs.sh runs). Builds the targets once more
# with clang's source-based coverage (build/tests/fuzz/coverage/), replays the inputs, and prints
# llvm-cov's report for the parser files. Needs clang and llvm (llvm-profdata, llvm-cov).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(sed -n 's/^rnntd_fuzz_target(\([a-z0-9_]*\) .*/\1/p' "$root/tests/fuzz/targets.cmake"))
out=$root/build/tests/fuzz/coverage
cc=${CC:-clang}
prof=$(command -v llvm-profdata || ls /usr/lib/llvm-*/bin/llvm-profdata 2>/dev/null | tail -1)
cov=$(command -v llvm-cov || ls /usr/lib/llvm-*/bin/llvm-cov 2>/dev/null | tail -1)
[ -n "$prof" ] && [ -n "$cov" ] || { echo "coverage.sh: needs llvm-profdata and llvm-cov (apt-get install llvm)" >&2; exit 2; }
cmake -S "$root/tests/fuzz/clang" -B "$out" -G Ninja -DCMAKE_C_COMPILER="$cc" -DRNNTD_FUZZ_COVERAGE=ON >/dev/null
cmake --build "$out" -j2 >/dev/null
objects=()
for t in "${targets[@]}"; do
  dirs=("$root/tests/fuzz/corpus/$t")
  [ -d "$root/build/tests/fuzz/work/$t" ] && dirs+=("$root/build/tests/fuzz/work/$t")
  rm -f "$out/$t".profraw
  # Replaying only (-runs=0); the model target writes its files as in a fuzz run.
  LLVM_PROFILE_FILE="$out/$t.profraw" "$out/fuzz_$t" -runs=0 "${dirs[@]}" >/dev/null 2>&1 || true
  n=$(ls "${dirs[@]}" | wc -l)
  echo "== fuzz_$t: $n inputs"
  "$prof" merge -sparse "$out/$t.profraw" -o "$out/$t.profdata"
  "$cov" report "$out/fuzz_$t" -instr-profile="$out/$t.profdata" \
    "$root/engine/npy.c" "$root/engine/safetensors.c" "$root/engine/yaml_doc.c" "$root/engine/model_load.c" \
    "$root/server/body.c" "$root/server/cfg.c" "$root/server/routes.c" 2>/dev/null |
    awk 'NR == 1 || /^-/ || ($4 != "0" && $4 != "") && $1 !~ /^TOTAL/' | grep -v "^-" || true
done
