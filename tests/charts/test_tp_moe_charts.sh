#!/usr/bin/env bash
# TP or EP on a small CPU run (issue 40): tp_moe's four variants at tp 2 over three token counts,
# then the charts (time against tokens with the cost model's prediction, plot_tp_moe.py) and
# fusebench-advise's ep_vs_tp (the fastest per token count: measured where judged, else modelled).
# Usage: test_tp_moe_charts.sh SOURCE_DIR FUSEBENCH FUSEBENCH_ADVISE OUT_DIR   (exit 77: skipped)
set -euo pipefail
src=$1 bin=$2 advise=$3 out=$4
python3 -c "import matplotlib" 2>/dev/null || { echo "matplotlib not installed: skipped"; exit 77; }
rm -rf "$out"
mkdir -p "$out"
"$bin" --backend=cpu --model-config="$src/tests/configs/tiny-qwen3-moe.json" --ops=tp_moe --tp=2 \
  --tokens=1,4,16 --dtypes=bf16 --routing=zipf:1.2 --timing-max-time=0.05 \
  --report="$out/report.json" >"$out/console.txt" 2>&1 || { tail -20 "$out/console.txt"; exit 1; }
python3 "$src/scripts/plot_crossover.py" "$out/report.json" -o "$out/charts" >/dev/null
for ext in png svg; do
  n=$(find "$out/charts" -name "tp_moe_*_bf16*.$ext" -size +0 | wc -l)
  [ "$n" = 1 ] || { echo "FAIL: $n tp_moe $ext charts"; ls "$out/charts"; exit 1; }
done
"$advise" "$out/report.json" -o "$out/advice.json"
"$advise" "$out/report.json" --format=markdown -o "$out/advice.md"
python3 - "$out/charts/crossover.json" "$out/advice.json" "$out/report.json" <<'PY'
import json, sys
charts, advice, report = (json.load(open(p)) for p in sys.argv[1:4])
cols = charts["tp_moe"]
assert len(cols) == 1, cols
c = cols[0]
assert c["tp"] == 2 and c["variants"] == ["ep_a2a", "ep_ag_rs", "ep_ar", "tp"], c
# The model predicts every token count; the fastest by it is the least predicted pipeline.
pred = {}
for e in report["benchmarks"]:
    if e["name"].startswith("tp_moe/"):
        pred.setdefault(str(e["tokens"]), {})[e["variant"]] = e["moe_ranks"]["predicted"]["pipeline_seconds"]
assert set(c["fastest_modelled"]) == {"1", "4", "16"}, c
for t, v in c["fastest_modelled"].items():
    assert pred[t][v] == min(pred[t].values()), (t, v, pred[t])
# Measured medians only where every entry at the count is judged.
for t in c["fastest_measured"]:
    assert not any(k.endswith("@" + t) for k in c["not_judged"]), (t, c["not_judged"])
(ep,) = advice["ep_vs_tp"]
assert ep["tp"] == 2 and len(ep["points"]) == 3, ep
for p in ep["points"]:
    assert p["label"].startswith(("measured: ", "modelled: ")), p
    if p["basis"] == "modelled":
        assert p["fastest"] == [c["fastest_modelled"][str(p["tokens"])]], (p, c)
    assert set(p["predicted_seconds"]) == {"tp", "ep_ar", "ep_ag_rs", "ep_a2a"}, p
print("tp_moe charts and advice:", [p["label"] for p in ep["points"]], "|", ep["summary"])
PY
grep -q "## TP or EP (tp_moe)" "$out/advice.md" || { echo "FAIL: markdown has no TP-or-EP section"; exit 1; }
echo "test_tp_moe_charts: ok"
