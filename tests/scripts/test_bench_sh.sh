#!/usr/bin/env bash
# scripts/bench.sh on bad input and --help (issue 14 item 12): it exits with the binary's status,
# leaves reports/latest as it was, draws no charts and points to no page; a good run replaces it.
# Runs in a scratch copy of the scripts with a stub build step and the real fusebench binary.
# Usage: test_bench_sh.sh SOURCE_DIR FUSEBENCH_BINARY [FUSEBENCH_ADVISE_BINARY]
set -euo pipefail
src=$1 bin=$(realpath "$2") advise=${3:+$(realpath "$3")}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/scripts" "$work/build/bin" "$work/reports/latest"
cp "$src/scripts/bench.sh" "$work/scripts/"
printf '#!/bin/sh\nexit 0\n' >"$work/scripts/build.sh"  # the binary is already built
# Chart and page stubs that leave a trace when called.
printf '#!/usr/bin/env python3\nimport pathlib, sys; pathlib.Path("%s/charts_called").write_text(" ".join(sys.argv))\n' \
  "$work" >"$work/scripts/plot_crossover.py"
printf '#!/usr/bin/env python3\nimport sys, pathlib; pathlib.Path(sys.argv[-1]).write_text("page")\n' \
  >"$work/scripts/make_html.py"
chmod +x "$work"/scripts/*
ln -s "$bin" "$work/build/bin/fusebench"
if [ -n "$advise" ]; then ln -s "$advise" "$work/build/bin/fusebench-advise"; fi
echo previous >"$work/reports/latest/report.json"
echo previous >"$work/reports/latest/console.txt"

fail=0
check() {  # check WHAT CONDITION...
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}
untouched() {
  [ "$(cat "$work/reports/latest/report.json")" = previous ] &&
    [ "$(cat "$work/reports/latest/console.txt")" = previous ] && [ ! -e "$work/charts_called" ]
}

for args in "--tp=3" "--models=gpt-9" "--timing-target-cv=0"; do
  status=0
  out=$("$work/scripts/bench.sh" --backend=cpu $args 2>&1) || status=$?
  check "bench.sh $args exits 2 (got $status)" [ "$status" = 2 ]
  check "bench.sh $args says no report" grep -q "reports/latest left as it was" <<<"$out"
  check "bench.sh $args does not point to a report" bash -c '! grep -q "report in" <<<"$1"' _ "$out"
  check "bench.sh $args does not point to the page" bash -c '! grep -q "index.html" <<<"$1"' _ "$out"
  check "bench.sh $args leaves reports/latest as it was" untouched
  [ "$fail" = 0 ] || echo "$out"
done

status=0
out=$("$work/scripts/bench.sh" --backend=cpu --list 2>&1) || status=$?
check "bench.sh --list exits 0 (got $status)" [ "$status" = 0 ]
check "bench.sh --list lists" grep -q "^qkv/split/" <<<"$out"
check "bench.sh --list leaves reports/latest as it was" untouched
check "no reports/latest.old is left behind" [ ! -e "$work/reports/latest.old" ]

status=0
out=$("$work/scripts/bench.sh" --help 2>&1) || status=$?
check "bench.sh --help exits 0 (got $status)" [ "$status" = 0 ]
check "bench.sh --help shows the binary's flags" grep -q -- "--timing-target-cv" <<<"$out"
check "bench.sh --help shows what bench.sh adds" grep -q "scripts/bench.sh" <<<"$out"
check "bench.sh --help leaves reports/latest as it was" untouched
check "bench.sh --help says nothing about a report" bash -c '! grep -q "report in" <<<"$1"' _ "$out"

# A good (tiny) run replaces reports/latest, with the console output (stderr too) in console.txt.
status=0
out=$("$work/scripts/bench.sh" --backend=cpu --ops=qkv --variants=fused --tokens=2 --dtypes=fp32 \
  --timing-max-time=0.05 2>&1) || status=$?
check "a good run exits 0 (got $status)" [ "$status" = 0 ]
check "a good run replaces report.json" python3 -c \
  'import json,sys; assert len(json.load(open(sys.argv[1]))["benchmarks"]) == 1' \
  "$work/reports/latest/report.json"
check "console.txt has the backend line (stderr)" grep -q "fusebench: backend cpu" \
  "$work/reports/latest/console.txt"
check "console.txt has the verification lines" grep -q "verification passed" \
  "$work/reports/latest/console.txt"
check "console.txt has no escape codes" bash -c '! grep -q $'"'"'\x1b'"'"' "$1"' _ \
  "$work/reports/latest/console.txt"
check "the charts were drawn" [ -e "$work/charts_called" ]
if [ -n "$advise" ]; then  # when to fuse (docs/advise.md): written, and the charts shade it
  check "advice.json is fusebench-advise's" grep -q '"schema": "fusebench-advice"' \
    "$work/reports/latest/advice.json"
  check "advice.md is written" grep -q "^# When to fuse" "$work/reports/latest/advice.md"
  check "the charts get the advice" grep -q -- "--advice reports/latest/advice.json" "$work/charts_called"
fi
check "no reports/latest.old is left behind" [ ! -e "$work/reports/latest.old" ]
check "the report names its final path" grep -q -- "--report=reports/latest/report.json" \
  "$work/reports/latest/report.json"
[ "$fail" = 0 ] || echo "$out"
exit "$fail"
