#!/bin/sh
# The public library as a user gets it: `cmake --install --component lib` of this build into a temporary
# prefix, then transcribe.c (in this folder) compiled and linked against the INSTALLED librnnt with
# nothing but `cc transcribe.c $(pkg-config --cflags --libs rnnt)`, run on a shipped sample: its text must be the
# CLI's for the same file. Checks too that librnnt exports only the public API (every exported
# function is declared RNNT_API in the installed headers, and each of those is exported).
#   tests/install/test_installed.sh BUILD_DIR [SANITIZE_FLAGS]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$1
san=${2:-}
model=$root/models/en-char-small
wav=$model/samples/01-flite-kal16.wav
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" --component lib >"$tmp/install.log"
pc=$(find "$tmp/prefix" -name rnnt.pc)
[ -n "$pc" ] || { echo "test_installed: no rnnt.pc installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir=$(pkg-config --variable=libdir rnnt)
# shellcheck disable=SC2046,SC2086
${CC:-cc} $san -Wall -Werror -o "$tmp/transcribe" "$here/transcribe.c" $(pkg-config --cflags --libs rnnt) -Wl,-rpath,"$libdir"
got=$("$tmp/transcribe" "$model" "$wav")
want=$("$build/engine/rnnt-transcribe" --backend cpu --model "$model" "$wav" | cut -f 2-) # FILE<tab>TEXT
echo "installed librnnt: '$got'"
echo "rnnt-transcribe:   '$want'"
[ -n "$got" ] && [ "$got" = "$want" ] || { echo "test_installed: the texts differ"; exit 1; }
# The export table: every defined dynamic symbol (functions, ifuncs, data; not the linker's own) vs the RNNT_API declarations of the installed headers.
so=$(find "$libdir" -name 'librnnt.so.*' -type f | head -n 1)
nm -D --defined-only "$so" | awk '$3 !~ /^(_edata|_end|__bss_start|_init|_fini)$/ {print $3}' | sort >"$tmp/exported"
sed -n 's/^RNNT_API[^(]*[ *]\(rnnt_[a-z0-9_]*\)(.*/\1/p' "$(pkg-config --variable=includedir rnnt)"/rnnt*.h | sort >"$tmp/declared"
if ! cmp -s "$tmp/exported" "$tmp/declared"; then
  echo "test_installed: librnnt's exported functions differ from the RNNT_API declarations (< exported, > declared):"
  diff "$tmp/exported" "$tmp/declared" || true
  exit 1
fi
echo "test_installed: $(wc -l <"$tmp/exported") functions exported, all of them the public API"
