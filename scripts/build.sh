#!/usr/bin/env bash
# Installs what is missing, then configures and builds a CMake preset (default: release).
# Shared by scripts/bench.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
scripts/install-deps.sh
. scripts/env.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
