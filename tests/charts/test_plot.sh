#!/usr/bin/env bash
# The plot script on a CPU-backend report: PNG and SVG written for each model/op, a crossover
# summary with measured values; two reports on one chart; bad input exits 2.
# Usage: test_plot.sh SOURCE_DIR REPORT_DIR
set -euo pipefail
src=$1 dir=$2
out="$dir/charts"
rm -rf "$out"
python3 "$src/scripts/plot_crossover.py" "$dir/report.json" -o "$out"
for op in qkv gate_up; do
  for ext in png svg; do
    f="$out/crossover_qwen3-0.6b_$op.$ext"
    [ -s "$f" ] || { echo "FAIL: $f not written"; exit 1; }
  done
  # A real PNG, not an empty or error file.
  head -c 8 "$out/crossover_qwen3-0.6b_$op.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" ||
    { echo "FAIL: $op PNG has no PNG signature"; exit 1; }
  grep -q "<svg" "$out/crossover_qwen3-0.6b_$op.svg" || { echo "FAIL: $op SVG is not SVG"; exit 1; }
done
python3 - "$out/crossover.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["crossovers"]
assert {x["op"] for x in c} == {"qkv", "gate_up"}, c
assert all(x["variant"] != "split" for x in c)
assert all(len(x["speedup_measured"]) == 3 for x in c), [len(x["speedup_measured"]) for x in c]
kinds = ("cross_up", "cross_down", "multiple", "always_above", "always_below", "not_resolved")
assert all(x["measured"]["kind"] in kinds for x in c), [x["measured"]["kind"] for x in c]
# A curve with no interval resolves nothing; a paired point without one is one not judged
# (contended, or under 6 pairs: a loaded machine), the others are ratios of medians.
for x in c:
    if all(p[2] is None for p in x["speedup_measured"]):
        assert x["measured"]["kind"] == "not_resolved", x
        paired = [p for p in x["speedup_measured"] if p[4] == "paired"]
        assert len(x.get("not_judged", {})) == len(paired), x
print("crossover.json:", [(x["op"], x["variant"], x["measured"]["kind"]) for x in c])
PY
# Several reports on one chart, one with ceilings so the model prediction is drawn: every
# variant then has a prediction whose values follow from the stated formula.
# run-a has no ceilings (no prediction drawn), run-b has given ones.
python3 - "$dir/report.json" "$dir/report_a.json" "$dir/report_b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["context"].pop("ceilings", None)
json.dump(d, open(sys.argv[2], "w"))
d["context"]["ceilings"] = {"peak_flops": 1e11, "bandwidth": 2e10, "source": "test"}
json.dump(d, open(sys.argv[3], "w"))
PY
python3 "$src/scripts/plot_crossover.py" "$dir/report_a.json" "$dir/report_b.json" --labels=run-a,run-b -o "$out/two"
python3 - "$out/two/crossover.json" "$dir/report_b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
assert {x["report"] for x in d["crossovers"]} == {"run-a", "run-b"}
with_model = [x for x in d["crossovers"] if x["report"] == "run-b"]
assert with_model and all(x["model_prediction"] and x["speedup_model"] for x in with_model)
# Recompute one predicted point: max(F/peak, B/bw) + launches * 1 us (CPU default).
ent = {e["name"]: e for e in b["benchmarks"]}
def t(e): return max(e["model_flops"] / 1e11, e["model_bytes"] / 2e10) + e["model_launches"] * 1e-6
x = with_model[0]
tok, s = x["speedup_model"][0]
split = [e for e in b["benchmarks"] if e["op"] == x["op"] and e["variant"] == "split" and e["tokens"] == tok][0]
var = [e for e in b["benchmarks"] if e["op"] == x["op"] and e["variant"] == x["variant"] and e["tokens"] == tok][0]
assert abs(s - t(split) / t(var)) < 1e-9 * s, (s, t(split) / t(var))
assert all(x["model_prediction"] is None for x in d["crossovers"] if x["report"] == "run-a")
print("two reports: ok")
PY
[ -s "$out/two/crossover_qwen3-0.6b_qkv.png" ] || { echo "FAIL: two-report PNG missing"; exit 1; }
# A GPU-like report (synthesised from the CPU one: gpu_name, eager and graph entries, measured
# launches and DRAM bytes, no ceilings): nominal H200 ceilings, both regimes, the eager/graph panel.
python3 - "$dir/report.json" "$dir/gpu_like.json" <<'PY'
import copy, json, sys
d = json.load(open(sys.argv[1]))
d["context"] = {"backend": "cuda", "gpu_name": "NVIDIA H200"}
out = []
for b in d["benchmarks"]:
    for timing, f in (("eager", 1.0), ("graph", 0.6)):
        e = copy.deepcopy(b)
        e["name"] = e["run_name"] = e["name"].replace("timing:eager/", "") .replace("/manual_time", f"/timing:{timing}/manual_time")
        e.update(timing=timing, dtype="bf16", real_time=b["real_time"] * f, launches=b["model_launches"],
                 dram_read_bytes=b["model_bytes"] * 1.1, dram_write_bytes=b["model_bytes"] * 0.05)
        out.append(e)
d["benchmarks"] = out
json.dump(d, open(sys.argv[2], "w"))
PY
python3 "$src/scripts/plot_crossover.py" "$dir/gpu_like.json" -o "$out/gpu" >/dev/null
python3 - "$out/gpu/crossover.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["crossovers"]
assert {x["timing"] for x in c} == {"eager", "graph"}, c
assert all(x["ceilings"]["source"] == "nominal H200" for x in c), [x["ceilings"] for x in c]
print("gpu-like report: ok")
PY
[ -s "$out/gpu/crossover_qwen3-0.6b_qkv.png" ] || { echo "FAIL: gpu-like PNG missing"; exit 1; }
echo '{"benchmarks": 3}' >"$dir/bad.json"
rc=0
python3 "$src/scripts/plot_crossover.py" "$dir/bad.json" -o "$out/bad" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: bad report gave exit $rc, expected 2"; exit 1; }
echo "test_plot: ok"
