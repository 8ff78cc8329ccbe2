#!/usr/bin/env bash
# The built fusebench-gate on a real CPU-backend report: its exit statuses as CI sees them.
# Usage: test_gate_cli.sh GATE_BINARY REPORT_DIR
set -uo pipefail
gate=$1 dir=$2
out="$dir/gate"
rm -rf "$out"
mkdir -p "$out"
r="$dir/report.json"
fails=0
expect() {  # expect STATUS DESCRIPTION ARGS...
  local want=$1 what=$2
  shift 2
  "$gate" "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $what: exit $rc, expected $want"
    cat "$out/stdout" "$out/stderr" | tail -5
    fails=$((fails + 1))
  else
    echo "ok: $what (exit $rc)"
  fi
}
edit() {  # edit OUT PYTHON-EXPR-ON-d
  python3 - "$r" "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[3])
open(sys.argv[2], "w").write(d if isinstance(d, str) else json.dumps(d))
PY
}
edit "$out/launch.json" 'd["benchmarks"][0]["model_launches"] += 1'
expect 1 "model_launches changed" "$r" "$out/launch.json"
grep -q "CHANGED" "$out/stdout" || { echo "FAIL: no CHANGED row"; fails=$((fails + 1)); }
# Time (docs/gate.md, "The time rule"): the ratio of the medians with its 95% interval, from each
# median's own interval (time_median_ci_low/high); the CPU default threshold is 15%. The entries
# are made judgeable (a loaded machine may have left them contended or on few samples, which the
# gate rightly does not judge; that rule has its own tests) and their intervals set to +-HALF.
judged='def scaled(b, factor, half):
    b["timing_stop"] = "converged"; b["samples"] = max(b.get("samples", 0), 50)
    if "speedup_pairs" in b: b["speedup_pairs"] = max(b["speedup_pairs"], 50)
    b["real_time"] *= factor; b["time_median"] = b.get("time_median", b["real_time"] * 1e-6) * factor
    b["time_median_ci_low"] = b["time_median"] * (1 - half); b["time_median_ci_high"] = b["time_median"] * (1 + half)
for b in d["benchmarks"]: scaled(b, 1, 0.01)'
edit "$out/quiet.json" "$judged"
expect 0 "report against itself" "$out/quiet.json" "$out/quiet.json" --summary-md "$out/summary.md"
grep -q "## fusebench gate: PASS" "$out/summary.md" || { echo "FAIL: summary"; fails=$((fails + 1)); }
edit "$out/slow.json" "$judged
scaled(d[\"benchmarks\"][1], 2, 0.01)"
expect 1 "2x slower, medians known to 1%" "$out/quiet.json" "$out/slow.json"
grep -q "SLOWER" "$out/stdout" || { echo "FAIL: no SLOWER row"; fails=$((fails + 1)); }
expect 3 "2x slower with --ignore-time: NOT JUDGED" "$out/quiet.json" "$out/slow.json" --ignore-time
edit "$out/drift.json" "$judged
scaled(d[\"benchmarks\"][1], 1.1, 0.01)"
expect 0 "10% slower: within the CPU default threshold (15%)" "$out/quiet.json" "$out/drift.json"
expect 1 "10% slower with --time-threshold=5" "$out/quiet.json" "$out/drift.json" --time-threshold=5
edit "$out/fast.json" "$judged
scaled(d[\"benchmarks\"][1], 1 / 40, 0.01)"
expect 0 "40x faster: reported, not failed" "$out/quiet.json" "$out/fast.json"
grep -q "FASTER" "$out/stdout" || { echo "FAIL: no FASTER row"; fails=$((fails + 1)); }
edit "$out/noisy_base.json" "$judged
for b in d[\"benchmarks\"]: scaled(b, 1, 0.6)"
edit "$out/noisy.json" "$judged
for b in d[\"benchmarks\"]: scaled(b, 1, 0.6)
scaled(d[\"benchmarks\"][1], 2, 0.6)"
expect 0 "2x slower, medians known to 60% only: the ratio's interval spans 1.5" "$out/noisy_base.json" "$out/noisy.json"
edit "$out/fewer.json" 'd["benchmarks"].pop()'
expect 1 "benchmark missing from current" "$r" "$out/fewer.json"
expect 1 "new benchmark in current: ungated, NEW" "$out/fewer.json" "$r"
edit "$out/quiet_fewer.json" "$judged
d[\"benchmarks\"].pop()"
expect 0 "new benchmark with --allow-new" "$out/quiet_fewer.json" "$out/quiet.json" --allow-new
edit "$out/nan.json" 'd = json.dumps(d).replace("\"real_time\": ", "\"real_time\": NaN, \"x\": ", 1)'
expect 2 "NaN in current" "$r" "$out/nan.json"
grep -q "nan.json" "$out/stderr" || { echo "FAIL: message does not name the file"; fails=$((fails + 1)); }
head -c 100 "$r" >"$out/truncated.json"
expect 2 "truncated JSON" "$r" "$out/truncated.json"
edit "$out/gpu.json" 'd["context"]["backend"] = "cuda"; d["context"]["gpu_name"] = "NVIDIA H200"'
expect 2 "different device" "$r" "$out/gpu.json"
edit "$out/quiet_gpu.json" "$judged
d[\"context\"][\"backend\"] = \"cuda\"; d[\"context\"][\"gpu_name\"] = \"NVIDIA H200\""
expect 0 "different device allowed" "$out/quiet.json" "$out/quiet_gpu.json" --allow-device-mismatch
expect 2 "no such file" "$r" "$out/does-not-exist.json"
expect 2 "usage error" "$r"
[ "$fails" -eq 0 ] && echo "test_gate_cli: ok" || { echo "test_gate_cli: $fails failure(s)"; exit 1; }
