#!/bin/sh
# Regenerate the golden files of the C tests (tests/data/golden) from the PyTorch reference.
# Deterministic: running it on an unchanged tree rewrites the same bytes (tests/models/test_golden.py
# checks exactly that). Needs a python3 with torch, numpy and PyYAML (Debian: python3-torch python3-yaml).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
# The checkout's .venv (deploy/install-deps.sh --test: the models package, editable) or else Debian's
# python3 started in models/, where `-m rnntd_ref...` finds the package by its folder.
if [ -n "${PYTHON:-}" ]; then py=$PYTHON
elif [ -x "$root/.venv/bin/python" ]; then py=$root/.venv/bin/python
else py=/usr/bin/python3
fi
out="$root/tests/data/golden"
rm -rf "$out"
mkdir -p "$out"
cd "$here"
exec "$py" -m rnntd_ref.golden --out "$out" "$@"
