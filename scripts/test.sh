#!/usr/bin/env bash
# Runs every test: installs dependencies, builds Release, runs ctest. Tests that need a GPU skip
# with the reason when there is none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh

cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release
