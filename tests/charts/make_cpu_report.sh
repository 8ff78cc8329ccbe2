#!/usr/bin/env bash
# ctest fixture: a small report from the CPU backend, for the chart, HTML and compare.py tests.
# Usage: make_cpu_report.sh FUSEBENCH_BINARY OUT_DIR
set -euo pipefail
bin=$1 out=$2
rm -rf "$out"
mkdir -p "$out"
"$bin" --backend=cpu --models=qwen3-0.6b --ops=qkv,gate_up --tokens=1,16,256 --dtypes=fp32 \
  --report="$out/report.json" >"$out/console.txt" 2>&1 ||
  { tail -20 "$out/console.txt"; exit 1; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['benchmarks']) >= 12, len(d['benchmarks'])" \
  "$out/report.json"
echo "make_cpu_report: $out/report.json"
