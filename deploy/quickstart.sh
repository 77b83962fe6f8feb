#!/usr/bin/env bash
# Quick start: install dependencies, build, and transcribe the shipped samples with the embedded
# default (CPU backend).
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)"
model=models/en-char-small
if [ ! -f "$model/model.yaml" ]; then model=tests/data/golden/hard_bb; fi
samples=("$model"/samples/*.npy)
[ -e "${samples[0]}" ] || samples=("$model"/utt*.npy)
echo "== transcribing ${#samples[@]} sample(s) with $model"
build/engine/rnnt-transcribe --timing --model "$model" "${samples[@]}"
