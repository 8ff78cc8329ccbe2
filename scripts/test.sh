#!/usr/bin/env bash
# Runs every test: installs dependencies, builds Release, runs ctest. Tests that need a GPU skip
# with the reason when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release
ctest --preset release

# Host code again under ASan/UBSan (clang-14, no CUDA, no MPI), with the libFuzzer targets for the
# JSON readers run briefly (docs/gate.md). FUSEBENCH_SKIP_ASAN=1 leaves it out of a quick local run.
if [ "${FUSEBENCH_SKIP_ASAN:-0}" != 1 ]; then
  scripts/build.sh asan
  ctest --preset asan
fi
