#!/bin/sh
# Build the relocatable TTS engine folder (espeak-ng + mbrola voices, flite, festival + 8 English voices,
# sox, lame) from Debian packages: apt-get download the engines and their library
# closure, dpkg -x them into one root, trim what synthesis does not need, check every program runs
# through the root's own loader, and pack the root as DEST/tts-root.tar.xz (carried to the GPU machine,
# unpacked there by synth.py --engines). The held-out voices (synth.py HELD_OUT: mbrola us2, used only by
# models/eval's unseen-voice test) stay in the unpacked DEST/tts-root but are left out of the archive.
#   models/corpus/build_engines.sh [DEST]      (default: .corpus in the repository root)
# Needs: apt-get (Debian 12 bookworm amd64), dpkg, xz. The mbrola voices are in Debian's non-free and
# contrib components: a private apt configuration under DEST/apt (its own sources list, lists and cache)
# reads them without touching the system's sources (apt-get update of that configuration is run here).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/../../.corpus}
mkdir -p "$dest/tts-debs"
dest=$(cd "$dest" && pwd)
root=$dest/tts-root

ENGINES="espeak-ng flite sox lame festival festvox-kallpc16k festvox-kdlpc16k
festvox-us-slt-hts festvox-rablpc16k festvox-don festvox-us1 festvox-us2 festvox-us3 festvox-en1
mbrola mbrola-us1 mbrola-us2 mbrola-us3 mbrola-en1"
# Voices that only the unseen-voice test may hear (synth.py HELD_OUT): mbrola us2 and us3 (through
# espeak-ng and festival) and festival's rab_diphone. They stay in the unpacked root for models/eval and
# are left out of tts-root.tar.xz, with festival's kal_diphone (the same recordings as flite's kal16):
# the archive, the text, a checkpoint and the working tree must fit one 64 MiB device-tool carry.
NOT_CARRIED="usr/share/mbrola/us2 usr/share/mbrola/us3 usr/share/festival/voices/english/us2_mbrola
usr/share/festival/voices/english/us3_mbrola usr/share/festival/voices/english/rab_diphone
usr/share/festival/voices/english/kal_diphone"
apt_dir=$dest/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
k=/usr/share/keyrings/debian-archive-keyring.gpg
{ echo "deb [signed-by=$k] http://deb.debian.org/debian bookworm bookworm-updates main contrib non-free"
  echo "deb [signed-by=$k] http://deb.debian.org/debian-security bookworm-security main"; } > "$apt_dir/sources.list"
APT_OPTS="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null
-o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir/cache"
# shellcheck disable=SC2086
apt-get $APT_OPTS update > "$apt_dir/update.log" 2>&1 || { cat "$apt_dir/update.log" >&2; exit 1; }
# Packages of the closure synthesis never touches (installers, PAM, audio servers, X11).
SKIP='^(adduser|alsa-utils|cdebconf|debconf|dpkg|install-info|kmod|passwd|tar|sysvinit-utils|lsb-base|sgml-base|libpam.*|libsemanage.*|libselinux1|libsepol2|libaudit.*|libcap-ng0|libdebian-installer4|libnewt0.52|libslang2|libtextwrap1|libelogind0|libkmod2|libsox-fmt-(alsa|ao|oss|pulse)|libao.*|libatopology2|readline-common)$'
# shellcheck disable=SC2086
pkgs=$(apt-cache $APT_OPTS depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances --no-pre-depends $ENGINES 2>/dev/null \
        | grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$SKIP")
cd "$dest/tts-debs"
# shellcheck disable=SC2086
apt-get $APT_OPTS download $pkgs 2>&1 | grep -v '^W: Download is performed unsandboxed' || true

rm -rf "$root"
mkdir -p "$root"
for f in "$dest"/tts-debs/*.deb; do dpkg -x "$f" "$root"; done

# Trim: documentation, man pages, locales, non-English espeak-ng dictionaries, headers.
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/locale" \
       "$root/usr/share/lintian" "$root/usr/include" "$root/usr/share/bug" "$root/etc/init.d" \
       "$root/usr/lib/x86_64-linux-gnu/gconv" "$root/usr/share/zoneinfo" "$root/var"
ed="$root/usr/lib/x86_64-linux-gnu/espeak-ng-data"
find "$ed" -maxdepth 1 -name '*_dict' ! -name 'en_dict' -delete
# festival's dictionary sources (the compiled .out files are what it reads), sox's
# format modules (sox finds them only in /usr/lib: synthesis uses its built-in WAV, GSM and A-law codecs)
rm -f "$root"/usr/share/festival/dicts/oald/cuvoald710-0.2.scm
rm -rf "$root/usr/lib/x86_64-linux-gnu/sox" "$root/usr/lib/file"
# flite runs as its one-voice programs (flite_cmu_us_VOICE): the all-voices `flite` links the talking
# clock too (1.7 MB packed); programs synthesis never runs go
rm -f "$root/usr/bin/flite" "$root/usr/bin/flite_time" "$root/usr/bin/flite_cmu_time_awb" "$root"/usr/bin/opus* \
      "$root/usr/bin/play" "$root/usr/bin/rec" "$root/usr/bin/festival_client"
# espeak-ng's mbrola tables and voice files: English ones only
find "$ed/mbrola_ph" -type f ! -name 'en1_*' ! -name 'us_*' ! -name 'us3_*' -delete
find "$ed/voices/mb" -type f ! -name 'mb-en1' ! -name 'mb-us[123]' -delete

# festival hard-codes /usr/share/festival in three Scheme files: make them relative to FESTDATADIR... 
# festival has no such variable for these, so the synthesiser rewrites the paths at unpack time
# (synth.py fix_festival_paths); here only check they are still where we expect them.
for f in languages.scm lexicons.scm voices.scm; do
    grep -q '/usr/share/festival' "$root/usr/share/festival/$f" || { echo "no path in $f" >&2; exit 1; }
done

ld="$root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
lp="$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu/pulseaudio"
# Prune the shared libraries no program loads (those of sox's format modules, X11, ...): the closure of
# every program we run, as the root's loader resolves it, is kept.
PROGS="espeak-ng flite_cmu_us_kal flite_cmu_us_kal16 flite_cmu_us_awb flite_cmu_us_rms flite_cmu_us_slt sox festival mbrola lame"
keep=$(for p in $PROGS; do "$ld" --library-path "$lp" --list "$root/usr/bin/$p" 2>/dev/null; done |
       sed -n 's/.*=> \([^ ]*\) .*/\1/p' | xargs -r readlink -f | sort -u)
for f in $(find "$root/lib/x86_64-linux-gnu" "$root/usr/lib/x86_64-linux-gnu" -maxdepth 2 -name '*.so*' -type f); do
    case "$f" in */ld-linux-x86-64.so.2*) continue ;; esac
    echo "$keep" | grep -qxF "$(readlink -f "$f")" || rm -f "$f"
done
find "$root" -xtype l -delete      # links to what was pruned

# Every program must start through the root's own loader with the root's libraries only.
for p in $PROGS text2wave; do
    [ -e "$root/usr/bin/$p" ] || { echo "build_engines.sh: missing $p" >&2; exit 1; }
done
# The check looks at where each library resolves: a library found outside the root (on this host's
# default paths) would be missing on the GPU machine or come from another glibc.
for p in $PROGS; do
    if ! out=$("$ld" --library-path "$lp" --list "$root/usr/bin/$p" 2>&1) ||
       echo "$out" | grep -q 'not found' ||
       echo "$out" | grep '=>' | grep -v "=> $root/" | grep -q .; then
        echo "$out" | grep -v "=> $root/" >&2
        echo "build_engines.sh: $p needs libraries from outside the engine root" >&2; exit 1
    fi
done
for h in $NOT_CARRIED; do [ -e "$root/$h" ] || { echo "build_engines.sh: no $h" >&2; exit 1; }; done
# shellcheck disable=SC2046
tar -C "$dest" $(for h in $NOT_CARRIED; do printf ' --exclude=tts-root/%s' "$h"; done) -cJf "$dest/tts-root.tar.xz" tts-root
echo "build_engines.sh: $(du -sh "$root" | cut -f1) root, $(du -h "$dest/tts-root.tar.xz" | cut -f1) packed"
