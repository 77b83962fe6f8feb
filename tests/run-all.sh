#!/usr/bin/env bash
# The whole test suite from a fresh checkout: dependencies, a warnings-as-errors build and every ctest
# test, then the C suites again built with AddressSanitizer + UndefinedBehaviorSanitizer (leaks included;
# the Python-only suites, labels models and train, and the deployment recipes, label deploy, run once),
# then a short run of each fuzz target.
# GPU tests (label gpu) skip where no GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh --test
jobs=$(nproc)
cmake -S . -B build -G Ninja -DRNNTD_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" -LE fuzz
cmake -S . -B build-asan -G Ninja -DRNNTD_WERROR=ON -DRNNTD_SANITIZE=address,undefined -DRNNTD_CUDA=OFF >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "models|train|deploy"
# A short run of every libFuzzer target (label fuzz, tests/fuzz/README.md; skipped with the reason
# without clang): RNNTD_FUZZ_SECONDS (30) each, two at a time.
ctest --test-dir build --output-on-failure -j"$jobs" -L fuzz
