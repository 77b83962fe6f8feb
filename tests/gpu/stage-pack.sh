#!/bin/bash
# Packs programs built here, with the shared libraries the GPU machine lacks, into DEST/pack.tar.xz
# (one xz archive: the trip is limited to 64 MiB; device-common.sh's unpack opens it there).
#   tests/gpu/stage-pack.sh DEST BINARY...      (called by stage-device.sh and stage-daemon.sh)
set -euo pipefail
dest=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dest/bin" "$dest/lib" "$dest/pack.tar.xz"
mkdir -p "$dest/bin" "$dest/lib"
cp "$@" "$dest/bin/"
libs=$here/../../../shared/gpu/stage-libs.sh  # from /work/main; a worktree elsewhere finds /work/shared
[ -x "$libs" ] || libs=/work/shared/gpu/stage-libs.sh
"$libs" "$@" "$dest/lib"
strip --strip-debug "$dest"/bin/* $(find "$dest/lib" -type f)
# xz -9: a 64 MiB window spans the test programs, whose device code is mostly the same (~3x smaller)
tar -C "$dest" -cf - bin lib | xz -9 -T1 > "$dest/pack.tar.xz"
rm -rf "$dest/bin" "$dest/lib"
du -sh "$dest"
