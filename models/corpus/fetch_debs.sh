#!/bin/sh
# Download the Debian packages the corpus is built from (text sources, TTS engines and their
# library closure, evaluation recordings) into DEST/debs and unpack the text ones into DEST/src.
# Needs apt-get (a Debian 12 "bookworm" amd64 machine with `apt-get update` done) and dpkg.
#   models/corpus/fetch_debs.sh [DEST]      (default: .corpus in the repository root)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/../../.corpus}
mkdir -p "$dest/debs" "$dest/src"
dest=$(cd "$dest" && pwd)

# Text: the KJV bible (+ its reader), the World English Bible (SWORD), fortunes, WordNet glosses,
# GCIDE/Devil/Jargon dictionaries; r-cran-stringr only for the Harvard sentences (evaluation only);
# pocketsphinx-testdata for real recordings (evaluation only).
TEXT="bible-kjv bible-kjv-text sword-text-web fortunes fortunes-min fortune-anarchism
fortunes-bofh-excuses wordnet-base dict-gcide dict-devil dict-jargon r-cran-stringr pocketsphinx-testdata"

cd "$dest/debs"
# apt-get download drops privileges to _apt when it can; a root-owned folder just warns.
# shellcheck disable=SC2086
apt-get download $TEXT 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
for p in $TEXT; do
    f=$(ls "$dest"/debs/"${p}"_*.deb 2>/dev/null | head -1)
    [ -n "$f" ] || { echo "fetch_debs.sh: package $p was not downloaded" >&2; exit 1; }
    dpkg -x "$f" "$dest/src"
done
echo "fetch_debs.sh: text packages unpacked in $dest/src"
