#!/usr/bin/env bash
# The CI-sized sweep used by .github/workflows/gpu-regression.yml and scripts/update-baseline.sh:
# one run of build/bin/fusebench into OUT_DIR (report.json, console.txt, crossover charts,
# index.html). Same arguments in both places, so a baseline and a CI run are comparable.
#   scripts/ci_sweep.sh OUT_DIR [extra fusebench args]
#   scripts/ci_sweep.sh --baseline-path REPORT.json   # prints reports/baselines/<device>.json
set -euo pipefail
cd "$(dirname "$0")/.."

# Two models (small and mid), decode to prefill token counts, bf16. Override with FUSEBENCH_CI_ARGS.
CI_ARGS=${FUSEBENCH_CI_ARGS:---models=qwen3-0.6b,llama3-8b --ops=qkv,gate_up --tokens=1,8,64,256,1024,4096 --dtypes=bf16}

baseline_path() {
  # <device> = the GPU name (or "cpu-<cpu model>") made file-name safe: "NVIDIA H200" -> nvidia-h200.
  python3 - "$1" <<'PY'
import json, re, sys
c = json.load(open(sys.argv[1])).get("context", {})
dev = c.get("gpu_name") if c.get("gpu_name") and c.get("backend") != "cpu" else "cpu-" + str(c.get("cpu_model", "unknown"))
print("reports/baselines/" + re.sub(r"[^a-z0-9]+", "-", dev.lower()).strip("-") + ".json")
PY
}

if [ "${1:-}" = "--baseline-path" ]; then
  baseline_path "$2"
  exit 0
fi
out=${1:?usage: scripts/ci_sweep.sh OUT_DIR [fusebench args]}
shift
mkdir -p "$out"
[ -x build/bin/fusebench ] || { echo "ci_sweep: build/bin/fusebench missing: cmake --preset release && cmake --build --preset release"; exit 2; }
# shellcheck disable=SC2086  # CI_ARGS is a list of flags
build/bin/fusebench $CI_ARGS --report="$out/report.json" "$@" 2>&1 | tee "$out/console.txt"
python3 scripts/plot_crossover.py "$out/report.json" -o "$out" ||
  echo "ci_sweep: WARNING: charts not written"
python3 scripts/make_html.py "$out/report.json" -o "$out/index.html" || echo "ci_sweep: WARNING: no index.html"
echo "ci_sweep: $out/report.json (baseline for this device: $(baseline_path "$out/report.json"))"
