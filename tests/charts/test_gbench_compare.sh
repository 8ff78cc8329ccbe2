#!/usr/bin/env bash
# Our report loads in Google Benchmark's own tools/compare.py (Debian package libbenchmark-tools,
# /usr/share/benchmark/compare.py; needs scipy). The current report has one entry made 2x
# slower: compare.py must list every entry and show that one at +1.0 (it never fails on a
# regression itself, so the delta is checked here). Exits 77 (skip) when compare.py is absent.
# Usage: test_gbench_compare.sh REPORT_DIR
set -euo pipefail
dir=$1
compare=${GBENCH_COMPARE:-/usr/share/benchmark/compare.py}
if [ ! -f "$compare" ]; then
  echo "SKIP: $compare not found (Debian package libbenchmark-tools; scripts/install-deps.sh installs it)"
  exit 77
fi
python3 -c "import scipy" 2>/dev/null || { echo "FAIL: compare.py needs scipy (scripts/requirements.txt)"; exit 1; }
out="$dir/compare"
rm -rf "$out"
mkdir -p "$out"
python3 - "$dir/report.json" "$out/slower.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["benchmarks"][0]["real_time"] *= 2
json.dump(d, open(sys.argv[2], "w"))
PY
python3 "$compare" --no-color --dump_to_json "$out/diff.json" benchmarks "$dir/report.json" "$out/slower.json" \
  >"$out/compare.txt"
cat "$out/compare.txt" | head -5
python3 - "$dir/report.json" "$out/diff.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
diff = {d["name"]: d for d in json.load(open(sys.argv[2]))}
names = [b["name"] for b in report["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
missing = [n for n in names if n not in diff]
assert not missing, f"compare.py dropped {missing}"
first = diff[names[0]]["measurements"][0]
assert abs(first["time"] - 1.0) < 1e-9, first
others = [diff[n]["measurements"][0]["time"] for n in names[1:]]
assert all(abs(t) < 1e-12 for t in others), others
print(f"compare.py read {len(names)} entries; {names[0]} at +{first['time']:.4f}")
PY
echo "test_gbench_compare: ok"
