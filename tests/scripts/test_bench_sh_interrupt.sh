#!/usr/bin/env bash
# Ctrl-C during scripts/bench.sh (issue 23): after a complete run, an interrupted one leaves
# reports/latest exactly as it was and puts what it measured in reports/last-interrupted/:
# report.json strict JSON with context.interrupted: true, console.txt to the end; bench.sh exits
# 130. Runs in a scratch copy of the scripts with a stub build step (the binary is built) and the
# real fusebench binary; the Ctrl-C is a SIGINT to bench.sh's process group, as a terminal sends.
# Usage: test_bench_sh_interrupt.sh SOURCE_DIR FUSEBENCH_BINARY
set -euo pipefail
src=$1 bin=$(realpath "$2")
work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
mkdir -p "$work/scripts" "$work/build/bin"
cp "$src/scripts/bench.sh" "$work/scripts/"
printf '#!/bin/sh\nexit 0\n' >"$work/scripts/build.sh"
printf '#!/usr/bin/env python3\n' >"$work/scripts/plot_crossover.py"  # charts: not under test
printf '#!/usr/bin/env python3\nimport sys, pathlib; pathlib.Path(sys.argv[-1]).write_text("page")\n' \
  >"$work/scripts/make_html.py"
chmod +x "$work"/scripts/*
ln -s "$bin" "$work/build/bin/fusebench"
fail=0
check() {  # check WHAT COMMAND...
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}
# shellcheck disable=SC2317  # called through check
strict_json_interrupted() {  # strict_json_interrupted FILE: NaN/Infinity refused
  python3 - "$1" <<'PY'
import json, sys
def refuse(name):
    raise ValueError("not strict JSON: " + name)
report = json.load(open(sys.argv[1]), parse_constant=refuse)
ctx = report["context"]
assert ctx["interrupted"] is True, ctx.get("interrupted")
assert "SIGINT" in ctx["interrupted_note"], ctx["interrupted_note"]
assert report["benchmarks"], "the groups with blocks in hand are reported"
for e in report["benchmarks"]:
    assert not e.get("error_occurred"), e
PY
}

# A complete run: reports/latest, context.interrupted false.
status=0
out=$("$work/scripts/bench.sh" --backend=cpu --ops=qkv --variants=fused --tokens=2 --dtypes=fp32 \
  --timing-max-time=0.05 2>&1) || status=$?
check "the complete run exits 0 (got $status)" [ "$status" = 0 ]
check "the complete run's report says interrupted: false" python3 -c \
  'import json,sys; assert json.load(open(sys.argv[1]))["context"]["interrupted"] is False' \
  "$work/reports/latest/report.json"
[ "$fail" = 0 ] || {
  echo "$out"
  exit 1
}
cp -a "$work/reports/latest" "$work/latest.before"

# An interrupted run: Ctrl-C once a block has been measured.
set -m  # bench.sh in a process group of its own, signals at their defaults, as from a terminal
(cd "$work" && exec scripts/bench.sh --backend=cpu --ops=qkv --dtypes=fp32 \
  --tokens=1,2,4,8,16,32 --timing-max-time=1 >"$work/bench.out" 2>&1) &
pid=$!
set +m
started() {  # this run has set the complete one aside and measured a block
  [ -e "$work/reports/latest.old" ] &&
    grep -q "^measuring " "$work/reports/latest/console.txt" 2>/dev/null
}
for _ in $(seq 1 600); do  # up to 60 s
  if started; then break; fi
  sleep 0.1
done
check "a block was measured before the Ctrl-C" started
kill -INT -- "-$pid"
status=0
wait "$pid" || status=$?
check "the interrupted bench.sh exits 130 (got $status)" [ "$status" = 130 ]
check "reports/latest is the complete run's, unchanged" diff -r "$work/latest.before" \
  "$work/reports/latest"
check "reports/last-interrupted/report.json is strict JSON marked interrupted" \
  strict_json_interrupted "$work/reports/last-interrupted/report.json"
check "console.txt goes on to fusebench's last line" grep -q "^fusebench: interrupted: stopped by SIGINT" \
  "$work/reports/last-interrupted/console.txt"
check "bench.sh says where the run went" grep -q "reports/last-interrupted/" "$work/bench.out"
check "no reports/latest.old is left behind" [ ! -e "$work/reports/latest.old" ]
[ "$fail" = 0 ] || cat "$work/bench.out"
exit "$fail"
