#!/usr/bin/env bash
# Installs what rnntd needs to build and test on Debian 12 or Ubuntu 24.04 (idempotent).
# The CUDA toolkit is optional and not installed here: with nvcc on PATH the build adds the GPU backend.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
pkgs=(
  build-essential cmake ninja-build pkg-config git curl
  libopenblas-dev libjansson-dev libyaml-dev libcmocka-dev libsystemd-dev
  python3 python3-numpy python3-yaml python3-torch systemd xz-utils
)
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
