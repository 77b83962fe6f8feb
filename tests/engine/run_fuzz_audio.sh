#!/bin/sh
# Build tests/engine/fuzz_audio.c with clang's libFuzzer (+ ASan/UBSan) and fuzz the audio path for
# SECONDS (default 20) from the shipped sample WAVs; exit 77 (ctest: skipped) where clang or its fuzzer
# runtime is missing (Debian: clang libclang-rt-14-dev). A crash, leak or sanitizer report fails it and
# leaves the input in OUT/crash-*.
#   tests/engine/run_fuzz_audio.sh [SECONDS] [OUT]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-20}
out=${2:-$root/build-fuzz}
cc=${FUZZ_CC:-clang}
command -v "$cc" >/dev/null 2>&1 || { echo "run_fuzz_audio: no $cc: skipped"; exit 77; }
mkdir -p "$out/corpus"
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' >"$out/probe.c"
"$cc" -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>/dev/null || { echo "run_fuzz_audio: $cc has no libFuzzer runtime: skipped"; exit 77; }
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -std=c11 -Wno-psabi"
libs="$(pkg-config --libs sndfile soxr vorbis ogg fftw3f yaml-0.1 jansson) -lm -lpthread"
# the engine's sources that the audio path and the frontend need (model loading included)
srcs="audio.c status.c dtype.c frontend.c model_load.c yaml_doc.c safetensors.c"
set --
for s in $srcs; do set -- "$@" "$root/engine/$s"; done
# shellcheck disable=SC2086
"$cc" $flags $(pkg-config --cflags sndfile) -I"$root/include" -I"$root/engine/shared" -I"$root/engine" "$here/fuzz_audio.c" "$@" $libs -o "$out/fuzz_audio"
cp "$root"/models/en-char-small/samples/*.wav "$out/corpus/" 2>/dev/null || true
cd "$out"
rc=0
RNNT_FUZZ_MODEL="$root/models/en-char-small" ASAN_OPTIONS=detect_leaks=1 \
  ./fuzz_audio -max_total_time="$secs" -max_len=200000 -rss_limit_mb=2048 -print_final_stats=1 corpus >fuzz.log 2>&1 || rc=$?
# libmpg123 prints its complaints about broken MP3 frames to stderr: leave them out of the summary
grep -v -E '^(Warning: |Note: |\[src/libmpg123)' fuzz.log | tail -25
echo "run_fuzz_audio: libFuzzer exit status $rc"
exit "$rc"
