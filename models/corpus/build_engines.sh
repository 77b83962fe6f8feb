#!/bin/sh
# Build the relocatable TTS engine folder (espeak-ng, flite, festival + 3 voices, sox) from Debian
# packages: apt-get download the engines and their library closure, dpkg -x them into one root, trim
# what synthesis does not need, check every program runs through the root's own loader, and pack the
# root as DEST/tts-root.tar.xz (carried to the GPU machine, unpacked there by synth.py --engines).
#   models/corpus/build_engines.sh [DEST]      (default: .corpus in the repository root)
# Needs: apt-get (Debian 12 bookworm amd64, after apt-get update), dpkg, xz.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/../../.corpus}
mkdir -p "$dest/tts-debs"
dest=$(cd "$dest" && pwd)
root=$dest/tts-root

ENGINES="espeak-ng flite sox libsox-fmt-base festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts"
# Packages of the closure synthesis never touches (installers, PAM, audio servers, X11).
SKIP='^(adduser|alsa-utils|cdebconf|debconf|dpkg|install-info|kmod|passwd|tar|sysvinit-utils|lsb-base|sgml-base|libpam.*|libsemanage.*|libselinux1|libsepol2|libaudit.*|libcap-ng0|libdebian-installer4|libnewt0.52|libslang2|libtextwrap1|libelogind0|libkmod2|libsox-fmt-(alsa|ao|oss|pulse)|libao.*|libatopology2|readline-common)$'
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances --no-pre-depends $ENGINES 2>/dev/null \
        | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$SKIP")
cd "$dest/tts-debs"
# shellcheck disable=SC2086
apt-get download $pkgs 2>&1 | grep -v '^W: Download is performed unsandboxed' || true

rm -rf "$root"
mkdir -p "$root"
for f in "$dest"/tts-debs/*.deb; do dpkg -x "$f" "$root"; done

# Trim: documentation, man pages, locales, non-English espeak-ng dictionaries, headers.
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/locale" \
       "$root/usr/share/lintian" "$root/usr/include" "$root/usr/share/bug" "$root/etc/init.d" \
       "$root/usr/lib/x86_64-linux-gnu/gconv" "$root/usr/share/zoneinfo" "$root/var"
ed="$root/usr/lib/x86_64-linux-gnu/espeak-ng-data"
find "$ed" -maxdepth 1 -name '*_dict' ! -name 'en_dict' -delete
rm -rf "$ed/mbrola_ph" "$ed/voices/mb"

# festival hard-codes /usr/share/festival in three Scheme files: make them relative to FESTDATADIR... 
# festival has no such variable for these, so the synthesiser rewrites the paths at unpack time
# (synth.py fix_festival_paths); here only check they are still where we expect them.
for f in languages.scm lexicons.scm voices.scm; do
    grep -q '/usr/share/festival' "$root/usr/share/festival/$f" || { echo "no path in $f" >&2; exit 1; }
done

# Every program must start through the root's own loader with the root's libraries only.
ld="$root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
lp="$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu/pulseaudio"
for p in espeak-ng flite flite_cmu_us_awb sox festival text2wave; do
    [ -e "$root/usr/bin/$p" ] || { echo "build_engines.sh: missing $p" >&2; exit 1; }
done
# The check looks at where each library resolves: a library found outside the root (on this host's
# default paths) would be missing on the GPU machine or come from another glibc.
for p in espeak-ng flite sox festival; do
    if ! out=$("$ld" --library-path "$lp" --list "$root/usr/bin/$p" 2>&1) ||
       echo "$out" | grep -q 'not found' ||
       echo "$out" | grep '=>' | grep -v "=> $root/" | grep -q .; then
        echo "$out" | grep -v "=> $root/" >&2
        echo "build_engines.sh: $p needs libraries from outside the engine root" >&2; exit 1
    fi
done
tar -C "$dest" -cJf "$dest/tts-root.tar.xz" tts-root
echo "build_engines.sh: $(du -sh "$root" | cut -f1) root, $(du -h "$dest/tts-root.tar.xz" | cut -f1) packed"
