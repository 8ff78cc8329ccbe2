#!/usr/bin/env bash
# Installs what is missing, then configures and builds a CMake preset (default: release).
#   scripts/build.sh [--run] [PRESET]
#   default (scripts/test.sh): installs everything the tests need (install-deps.sh test) and
#     builds the whole tree, tests included.
#   --run (scripts/bench.sh): installs what a run needs (install-deps.sh run) and builds the four
#     binaries alone: fusebench, fusebench-region, fusebench-gate, fusebench-advise. Without
#     GoogleTest the preset is configured without its tests (FUSEBENCH_BUILD_TESTS=OFF, which
#     the default mode turns back on).
set -euo pipefail
cd "$(dirname "$0")/.."
run=0 preset=release
for arg in "$@"; do
  case "$arg" in
    --run) run=1 ;;
    -*)
      echo "build: unknown flag '$arg' (valid: --run, then a preset name)" >&2
      exit 2
      ;;
    *) preset=$arg ;;
  esac
done
binaries=(fusebench fusebench-region fusebench-gate fusebench-advise)

if [ "$run" = 1 ]; then
  scripts/install-deps.sh run
else
  scripts/install-deps.sh test
fi
. scripts/env.sh
configure=(-DFUSEBENCH_BUILD_TESTS=ON)
if [ "$run" = 1 ]; then
  # Tests configured where GoogleTest is there (not built here): a checkout set up for tests
  # stays set up; one that never was does not need GoogleTest to run.
  configure=()
  if ! pkg-config --exists gtest 2>/dev/null && [ ! -f /usr/include/gtest/gtest.h ]; then
    configure=(-DFUSEBENCH_BUILD_TESTS=OFF)
    echo "build: GoogleTest not installed: configuring without the tests (scripts/test.sh" \
      "installs it and builds them)"
  fi
fi
cmake --preset "$preset" "${configure[@]}" >/dev/null
if [ "$run" = 1 ]; then
  cmake --build --preset "$preset" --target "${binaries[@]}"
else
  cmake --build --preset "$preset"
fi
