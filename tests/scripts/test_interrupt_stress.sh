#!/usr/bin/env bash
# Ctrl-C at many moments (issue 27): a small CPU sweep interrupted at every safe point (a real
# SIGINT raised there through FUSEBENCH_TEST_SIGINT_AT_SAFE_POINT: every block and group
# boundary) and by `kill -INT` at spread random times. Each run must exit 130 with a strict-JSON
# report marked interrupted whose entries are exactly the rows printed before the stop, none an
# error, and no sanitizer report; a signal before the sweep began exits 130 with no report.
# Usage: test_interrupt_stress.sh FUSEBENCH_BINARY [RANDOM_RUNS] [SEED]
set -euo pipefail
bin=$1 random_runs=${2:-10} seed=${3:-$RANDOM}
work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
sweep=(--backend=cpu --ops=qkv,gate_up --dtypes=fp32 --tokens=1,4 --cpu-threads=1
  --timing-max-time=0.15 --timing-blocks=2 --seed=7)
fail=0 runs=0

# check_run DIR STATUS WHAT: the run's exit code, its report and its console.
check_run() {
  local dir=$1 status=$2 what=$3
  runs=$((runs + 1))
  if grep -q "Sanitizer\|runtime error:" "$dir/err"; then
    echo "FAIL ($what): sanitizer report"
    cat "$dir/err"
    fail=1
    return
  fi
  if [ "$status" != 130 ]; then
    echo "FAIL ($what): exit $status, expected 130"
    tail -5 "$dir/err"
    fail=1
    return
  fi
  if [ ! -e "$dir/r.json" ]; then
    # Only a signal before the sweep began leaves no report, and says so.
    if ! grep -q "interrupted before the sweep began" "$dir/err"; then
      echo "FAIL ($what): no report, and stderr does not say the sweep had not begun"
      fail=1
    fi
    return
  fi
  if ! python3 - "$dir/r.json" "$dir/out" <<'PY'; then
import json, sys
def refuse(name):
    raise ValueError("not strict JSON: " + name)
report = json.load(open(sys.argv[1]), parse_constant=refuse)
ctx = report["context"]
assert ctx["interrupted"] is True, "context.interrupted is " + repr(ctx.get("interrupted"))
assert "SIGINT" in ctx.get("interrupted_note", ""), ctx.get("interrupted_note")
names = [e["name"] for e in report["benchmarks"]]
for e in report["benchmarks"]:
    assert not e.get("error_occurred"), "an entry is an error: " + e.get("error_message", "")
# Every row shown before the stop is in the report, and nothing else.
rows = [l.split()[0] for l in open(sys.argv[2]) if l.startswith(("qkv/", "gate_up/"))]
assert rows == names, f"rows {rows} != report entries {names}"
PY
    echo "FAIL ($what): report check above"
    fail=1
  fi
}

# 1. A SIGINT at every safe point, until a run goes through its sweep without reaching it.
point=1
while :; do
  dir="$work/safe$point"
  mkdir -p "$dir"
  status=0
  FUSEBENCH_TEST_SIGINT_AT_SAFE_POINT=$point "$bin" "${sweep[@]}" --report="$dir/r.json" \
    >"$dir/out" 2>"$dir/err" || status=$?
  if [ "$status" = 0 ]; then break; fi  # past the last safe point: the sweep completed
  check_run "$dir" "$status" "SIGINT at safe point $point"
  point=$((point + 1))
  if [ "$point" -gt 200 ]; then
    echo "FAIL: more than 200 safe points in a small sweep"
    fail=1
    break
  fi
done
safe_points=$((point - 1))
[ "$safe_points" -ge 4 ] || {
  echo "FAIL: only $safe_points safe point(s) reached"
  fail=1
}

# 2. kill -INT at random times over the whole run (start-up, verification, sweep), seeded.
length=$(python3 -c "import time,subprocess,sys; t=time.time(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(round(time.time()-t, 2))" "$bin" "${sweep[@]}" --verify)
for i in $(seq 1 "$random_runs"); do
  dir="$work/random$i"
  mkdir -p "$dir"
  delay=$(python3 -c "import random,sys; random.seed(int(sys.argv[1])*1000+int(sys.argv[2])); print(round(random.uniform(0.05, float(sys.argv[3])), 2))" "$seed" "$i" "$length")
  "$bin" "${sweep[@]}" --verify --report="$dir/r.json" >"$dir/out" 2>"$dir/err" &
  pid=$!
  sleep "$delay"
  kill -INT "$pid" 2>/dev/null || true
  status=0
  wait "$pid" || status=$?
  if [ "$status" = 0 ]; then continue; fi  # finished before the signal
  check_run "$dir" "$status" "kill -INT after ${delay}s (seed $seed)"
done

echo "interrupt stress: $runs interrupted runs checked ($safe_points safe points, $random_runs" \
  "random times up to ${length}s, seed $seed)"
exit "$fail"
