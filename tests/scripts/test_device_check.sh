#!/usr/bin/env bash
# The part of scripts/device-check.sh a CPU machine can run: without .deps it stops at once with a
# message saying how to fetch them, and its exit trap still writes the PASS/FAIL/SKIP table
# (summary.txt) and bundles the logs (logs.tar.gz), leaving at most the 8 files the device tool
# returns. Runs in a scratch copy of the scripts.
# Usage: test_device_check.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo/scripts"
cp "$src/scripts/device-check.sh" "$src/scripts/timing_summary.py" "$src/scripts/summarize_report.py" \
  "$work/repo/scripts/"

fail=0
check() { # check WHAT CONDITION...
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}
rc=0
OUT="$work/out" DEVICE_CHECK_WORK="$work/w" bash "$work/repo/scripts/device-check.sh" >"$work/console" 2>&1 || rc=$?
check "exit 1 without .deps (got $rc)" [ "$rc" -eq 1 ]
check "says how to get .deps" grep -q "run scripts/fetch-device-deps.sh" "$work/console"
check "summary.txt written by the exit trap" [ -s "$work/out/summary.txt" ]
check "the table names the failed step" grep -Eq "^dependencies +FAIL +no .deps" "$work/out/summary.txt"
check "the table's count line" grep -q "^checks: 0 PASS, 1 FAIL, 0 SKIP$" "$work/out/summary.txt"
tar -tzf "$work/out/logs.tar.gz" >"$work/listed" 2>&1 || true
check "logs bundled" grep -qx "w/checks.txt" "$work/listed"
n=$(find "$work/out" -type f | wc -l)
check "at most 8 files under \$OUT (got $n)" [ "$n" -le 8 ]
[ "$fail" -eq 0 ] || cat "$work/console"
exit "$fail"
