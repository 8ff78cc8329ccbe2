#!/usr/bin/env bash
# Runs every test: installs dependencies, builds Release, runs ctest; then the host code again
# under ASan/UBSan with the fuzzers. Tests that need a GPU skip with the reason when there is
# none. Prints how long each stage took (install, each build, each ctest run) at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

stages=()
stage() {  # stage NAME COMMAND...: runs it and records its wall time
  local name=$1 start=$SECONDS
  shift
  "$@"
  stages+=("$(printf '%-28s %5d s' "$name" $((SECONDS - start)))")
}
report() {
  echo "test.sh: stage times (wall clock):"
  printf '  %s\n' "${stages[@]}"
  echo "  total                        $((SECONDS - total_start)) s"
}
total_start=$SECONDS
trap report EXIT

stage "install (test profile)" scripts/install-deps.sh test
stage "build release" scripts/build.sh release
stage "ctest release" ctest --preset release

# Host code again under ASan/UBSan (clang-14, no CUDA, no MPI), with the libFuzzer targets for the
# input readers run briefly (docs/building.md). FUSEBENCH_SKIP_ASAN=1 leaves it out of a quick
# local run.
if [ "${FUSEBENCH_SKIP_ASAN:-0}" != 1 ]; then
  stage "build asan" scripts/build.sh asan
  stage "ctest asan (and fuzzers)" ctest --preset asan
fi
