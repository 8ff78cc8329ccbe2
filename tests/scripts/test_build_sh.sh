#!/usr/bin/env bash
# scripts/bench.sh builds and installs only what a run needs (issue 23): build.sh --run asks
# install-deps.sh for the run profile and builds the four binaries, no tests; the default mode
# (scripts/test.sh) installs everything and builds the whole tree. Runs build.sh and bench.sh in a
# scratch copy with stand-ins for install-deps.sh, cmake and the binary; install-deps.sh's
# profiles are read from the real script (--print installs nothing).
# Usage: test_build_sh.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/scripts" "$work/stubs" "$work/build/bin"
cp "$src/scripts/build.sh" "$src/scripts/bench.sh" "$work/scripts/"
: >"$work/scripts/env.sh"
printf '#!/bin/sh\necho "install-deps $*" >>"%s/log"\n' "$work" >"$work/scripts/install-deps.sh"
printf '#!/bin/sh\necho "cmake $*" >>"%s/log"\n' "$work" >"$work/stubs/cmake"
chmod +x "$work/scripts/install-deps.sh" "$work/stubs/cmake"
export PATH="$work/stubs:$PATH"

fail=0
check() {  # check WHAT CONDITION...
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}
logged() { grep -qxF -- "$1" "$work/log"; }
not_logged() { ! grep -qF -- "$1" "$work/log"; }

# --run: the run profile, the four binaries, the tests never asked for.
: >"$work/log"
"$work/scripts/build.sh" --run release >/dev/null
check "build.sh --run installs the run profile" logged "install-deps run"
check "build.sh --run builds the four binaries alone" \
  logged "cmake --build --preset release --target fusebench fusebench-region fusebench-gate fusebench-advise"
check "build.sh --run does not turn the tests on" not_logged "FUSEBENCH_BUILD_TESTS=ON"
# Default: everything, tests on.
: >"$work/log"
"$work/scripts/build.sh" asan >/dev/null
check "build.sh installs the test profile" logged "install-deps test"
check "build.sh configures the tests" logged "cmake --preset asan -DFUSEBENCH_BUILD_TESTS=ON"
check "build.sh builds the whole tree" logged "cmake --build --preset asan"
status=0
"$work/scripts/build.sh" --bogus >/dev/null 2>&1 || status=$?
check "build.sh refuses an unknown flag (exit 2, got $status)" [ "$status" = 2 ]

# bench.sh builds with --run (a stand-in binary that refuses its input ends the run at once).
: >"$work/log"
printf '#!/bin/sh\necho "fusebench: error: stand-in" >&2\nexit 2\n' >"$work/build/bin/fusebench"
chmod +x "$work/build/bin/fusebench"
"$work/scripts/bench.sh" --backend=cpu >/dev/null 2>&1 || true
check "bench.sh installs the run profile" logged "install-deps run"
check "bench.sh builds the binaries alone" \
  logged "cmake --build --preset release --target fusebench fusebench-region fusebench-gate fusebench-advise"

# The profiles: a run needs no test tools; the tests need everything the run needs and them.
run_packages=$("$src/scripts/install-deps.sh" run --print)
test_packages=$(FUSEBENCH_NO_CHROMIUM=0 "$src/scripts/install-deps.sh" test --print)
for p in clang-14 libclang-rt-14-dev shellcheck chromium libbenchmark-tools libgtest-dev; do
  check "the run profile leaves out $p" bash -c "! grep -qx -- '$p' <<<'$run_packages'"
  check "the test profile has $p" grep -qx -- "$p" <<<"$test_packages"
done
for p in $run_packages; do
  check "the test profile has the run profile's $p" grep -qx -- "$p" <<<"$test_packages"
done
for p in libbenchmark-dev libopenmpi-dev cmake; do
  check "the run profile has $p" grep -qx -- "$p" <<<"$run_packages"
done
check "install-deps.sh refuses an unknown profile" bash -c "! '$src/scripts/install-deps.sh' bogus --print 2>/dev/null"

if [ "$fail" = 0 ]; then echo "test_build_sh: all checks passed"; fi
exit "$fail"
