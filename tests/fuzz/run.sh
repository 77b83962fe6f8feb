#!/usr/bin/env bash
# run.sh TARGET [SECONDS] [libFuzzer flags...] — one fuzz target for a while (default 60 s).
# The seeds in tests/fuzz/corpus/TARGET/ (never modified) are replayed first, then libFuzzer mutates;
# what it finds that is new goes to a work corpus kept in the build folder, so later runs start from
# there. A crash, leak, sanitizer report, timeout (> 10 s for one input) or a memory blow-up (> 2 GiB)
# fails the run; the input is saved under the build folder's artifacts/TARGET/ and its path printed.
#   tests/fuzz/run.sh npy 600            # a longer run
#   tests/fuzz/run.sh model 0 -runs=0    # replay the seeds and the work corpus only
# The binaries come from the clang build: RNNTD_FUZZ_BUILD (set by ctest) or build/tests/fuzz.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
target=${1:?usage: run.sh TARGET [SECONDS] [libFuzzer flags...]}
seconds=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
build=${RNNTD_FUZZ_BUILD:-$root/build/tests/fuzz}
bin=$build/clang/fuzz_$target
seeds=$root/tests/fuzz/corpus/$target
[ -x "$bin" ] || { echo "run.sh: $bin not built (cmake --build build; needs clang, see tests/fuzz/README.md)" >&2; exit 2; }
[ -d "$seeds" ] || { echo "run.sh: no seed corpus $seeds" >&2; exit 2; }
work=$build/work/$target
artifacts=$build/artifacts/$target
mkdir -p "$work" "$artifacts"
dict=()
[ -f "$root/tests/fuzz/dict/$target.dict" ] && dict=(-dict="$root/tests/fuzz/dict/$target.dict")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
time_flag=()
[ "$seconds" -gt 0 ] && time_flag=(-max_total_time="$seconds")
echo "run.sh: fuzz_$target for ${seconds} s, seeds $(ls "$seeds" | wc -l), work corpus $(ls "$work" | wc -l)"
# Output from the code under test is noise here; libFuzzer's own lines and reports go to stderr.
exec "$bin" "${time_flag[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${dict[@]}" "$@" "$work" "$seeds"
