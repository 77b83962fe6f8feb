# Sourced by the tests/gpu/device-*.sh scripts on the GPU machine, after `steps` is set: the output
# folder, step selection, the time budget, the pack and the shared-library path.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
has() { [[ ",$steps," == *",$1,"* ]]; }
log() { echo "== $* ($(date +%T))"; }
budget=${BUDGET_S:-560}  # the whole script stays inside one run's limit
# tmo S: S seconds, or what is left of the budget if less (at least 5)
tmo() { local left=$((budget - SECONDS)); [ $left -lt 5 ] && left=5; echo $(( $1 < left ? $1 : left )); }

# unpack PACK DIR: the programs and libraries a stage-*.sh packed, into DIR/bin and DIR/lib
unpack() { mkdir -p "$2" && tar -C "$2" -xJf "$1"; }

# use_libs STAGED_LIB_DIR PYMODULE...: LD_LIBRARY_PATH = our staged libraries, then wherever this
# machine keeps CUDA's (the toolkit, or the nvidia.* Python wheels next to PyTorch)
use_libs() {
  local libdirs=$1 d m
  shift
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d $d ] && libdirs=$libdirs:$d; done
  for m in "$@"; do
    d=$(python3 -c "import nvidia.$m as x; print(list(x.__path__)[0] + '/lib')" 2>/dev/null) && [ -d "$d" ] && libdirs=$libdirs:$d
  done
  export LD_LIBRARY_PATH=$libdirs:${LD_LIBRARY_PATH:-}
}

# open_pack PACK DIR PYMODULE...: the pack into DIR (unpack), B=DIR/bin (its programs), and the library
# path: DIR/lib first (use_libs DIR/lib PYMODULE...)
open_pack() {
  local pack=$1 dir=$2
  shift 2
  unpack "$pack" "$dir"
  B=$dir/bin
  use_libs "$dir/lib" "$@"
}

# san_verdict LOG: a compute-sanitizer run's verdict from its log, whose last line is "exit RC after S s" (the tool run
# with --error-exitcode 9 under timeout): clean, ERRORS FOUND, TIMED OUT, NOT RUN or FAILED
san_verdict() {
  local rc
  rc=$(sed -n 's/^exit \([0-9]*\) after.*/\1/p' "$1" | tail -1)
  case "$rc" in
    0) echo clean ;;
    9) echo "ERRORS FOUND" ;;
    124) echo "TIMED OUT" ;;
    "") echo "NOT RUN" ;;
    *) echo "FAILED (exit $rc: the test or the tool)" ;;
  esac
}
