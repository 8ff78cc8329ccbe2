#!/usr/bin/env bash
# The CI-sized sweep used by .github/workflows/gpu-regression.yml and scripts/update-baseline.sh:
# one run of build/bin/fusebench into OUT_DIR (report.json, console.txt, crossover charts,
# index.html). Same arguments in both places, so a baseline and a CI run are comparable.
#   scripts/ci_sweep.sh OUT_DIR [extra fusebench args]
#   scripts/ci_sweep.sh --baseline-path REPORT.json   # prints reports/baselines/<device>.json
#   scripts/ci_sweep.sh --baseline-path-for-gpu NAME  # the same for a GPU name (nvidia-smi's)
#   scripts/ci_sweep.sh --args                        # prints the sweep's arguments
set -euo pipefail
cd "$(dirname "$0")/.."

# Two models (small and mid), decode to prefill token counts, bf16. Override with FUSEBENCH_CI_ARGS.
# The CPU GEMM threads are pinned (FUSEBENCH_CI_THREADS, default 1): with `auto` the count follows
# the load at the start, and reports of different counts are not judged (docs/gate.md). --verify
# checks every fused variant against split and a float64 reference before anything is timed.
CI_ARGS=${FUSEBENCH_CI_ARGS:---models=qwen3-0.6b,llama3-8b --ops=qkv,gate_up --tokens=1,8,64,256,1024,4096 --dtypes=bf16}
CI_ARGS="$CI_ARGS --cpu-threads=${FUSEBENCH_CI_THREADS:-1} --verify"

baseline_path() {
  # <device> = the GPU name (or "cpu-<cpu model>") made file-name safe: "NVIDIA H200" -> nvidia-h200.
  python3 - "$1" <<'PY'
import json, re, sys
c = json.load(open(sys.argv[1])).get("context", {})
dev = c.get("gpu_name") if c.get("gpu_name") and c.get("backend") != "cpu" else "cpu-" + str(c.get("cpu_model", "unknown"))
print("reports/baselines/" + re.sub(r"[^a-z0-9]+", "-", dev.lower()).strip("-") + ".json")
PY
}

case "${1:-}" in
  --baseline-path) baseline_path "$2"; exit 0 ;;
  --baseline-path-for-gpu)
    [ -n "${2:-}" ] || { echo "ci_sweep: --baseline-path-for-gpu: no GPU name given (nvidia-smi found none?)" >&2; exit 2; }
    name=$(tr '[:upper:]' '[:lower:]' <<<"$2" | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
    echo "reports/baselines/$name.json"
    exit 0 ;;
  --args) echo "$CI_ARGS"; exit 0 ;;
esac
out=${1:?usage: scripts/ci_sweep.sh OUT_DIR [fusebench args]}
shift
mkdir -p "$out"
echo "ci_sweep: CPU GEMM threads pinned: --cpu-threads=${FUSEBENCH_CI_THREADS:-1} (FUSEBENCH_CI_THREADS)"
[ -x build/bin/fusebench ] || { echo "ci_sweep: build/bin/fusebench missing: cmake --preset release && cmake --build --preset release"; exit 2; }
# shellcheck disable=SC2086  # CI_ARGS is a list of flags
build/bin/fusebench $CI_ARGS --report="$out/report.json" "$@" 2>&1 | tee "$out/console.txt"
python3 scripts/plot_crossover.py "$out/report.json" -o "$out" ||
  echo "ci_sweep: WARNING: charts not written"
python3 scripts/make_html.py "$out/report.json" -o "$out/index.html" || echo "ci_sweep: WARNING: no index.html"
echo "ci_sweep: $out/report.json (baseline for this device: $(baseline_path "$out/report.json"))"
