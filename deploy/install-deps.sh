#!/usr/bin/env bash
# Installs what rnntd needs to build and test on Debian 12 or Ubuntu 24.04 (idempotent).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH the build adds the GPU backend.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
pkgs=(
  build-essential cmake ninja-build pkg-config git curl
  libopenblas-dev libmicrohttpd-dev libjansson-dev libyaml-dev libcmocka-dev libsystemd-dev
  python3 python3-numpy python3-yaml python3-torch systemd xz-utils
)
pkgs+=(python3-venv) # the schemathesis venv below
# libFuzzer targets (tests/fuzz): clang and its sanitizer/fuzzer runtimes (skipped without them).
. /etc/os-release
case "${ID}-${VERSION_ID:-}" in
  debian-12) pkgs+=(clang libclang-rt-14-dev) ;;
  ubuntu-24.04) pkgs+=(clang libclang-rt-18-dev) ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "install-deps: all packages present"

# schemathesis (PyPI, pinned) for the OpenAPI contract test (tests/server/test_schema.py), in a venv
# of the invoking user's cache, so it needs no root and leaves the system Python alone.
SCHEMATHESIS_VERSION=4.32.5
st_venv=${XDG_CACHE_HOME:-$HOME/.cache}/rnntd/schemathesis
if [ "$("$st_venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $SCHEMATHESIS_VERSION" ]; then
  echo "install-deps: installing schemathesis $SCHEMATHESIS_VERSION from PyPI into $st_venv"
  rm -rf "$st_venv"
  if ! { /usr/bin/python3 -m venv "$st_venv" &&
         "$st_venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"; }; then
    # Not fatal: the contract test then says it is skipped and why.
    echo "install-deps: WARNING: could not install schemathesis; tests/server/test_schema.py will be skipped" >&2
    rm -rf "$st_venv"
  fi
fi
[ -x "$st_venv/bin/schemathesis" ] && echo "install-deps: schemathesis $SCHEMATHESIS_VERSION in $st_venv"
true
