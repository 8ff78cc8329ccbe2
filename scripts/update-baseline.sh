#!/usr/bin/env bash
# Makes a report the regression baseline for its device: reports/baselines/<device>.json, which
# the GPU workflow gates against (docs/gate.md). Run on the GPU the baseline is for.
#   scripts/update-baseline.sh             # runs the CI-sized sweep (scripts/ci_sweep.sh) first
#   scripts/update-baseline.sh REPORT.json # adopts an existing report (e.g. a CI artifact)
#   --force: accept a report with failed entries or from a modified (-dirty) checkout
set -euo pipefail
cd "$(dirname "$0")/.."
force=0
report=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n 2,7p "$0"; exit 0 ;;
    *) report=$arg ;;
  esac
done
if [ -z "$report" ]; then
  cmake --preset release >/dev/null && cmake --build --preset release
  scripts/ci_sweep.sh reports/ci-baseline-run
  report=reports/ci-baseline-run/report.json
fi
[ -s "$report" ] || { echo "update-baseline: $report not found"; exit 2; }
# The gate must accept it (schema, finite numbers): compare it with itself.
build/bin/fusebench-gate "$report" "$report" --ignore-time >/dev/null ||
  { echo "update-baseline: $report is not a usable report (see: build/bin/fusebench-gate $report $report)"; exit 2; }
problems=$(python3 - "$report" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
errors = [b["name"] for b in d["benchmarks"] if b.get("error_occurred")]
rev = str(d.get("context", {}).get("git_revision", ""))
out = []
if errors:
    out.append(f"{len(errors)} failed entries (e.g. {errors[0]})")
if rev.endswith("-dirty") or not rev or rev.startswith("unknown"):
    out.append(f"git revision '{rev}' is not a clean commit")
print("; ".join(out))
PY
)
if [ -n "$problems" ] && [ "$force" != 1 ]; then
  echo "update-baseline: refusing: $problems (use --force to accept)"
  exit 1
fi
target=$(scripts/ci_sweep.sh --baseline-path "$report")
mkdir -p "$(dirname "$target")"
if [ -f "$target" ]; then
  echo "update-baseline: differences from the current baseline:"
  build/bin/fusebench-gate "$target" "$report" --allow-missing-counters || true
fi
cp "$report" "$target"
echo "update-baseline: wrote $target; commit it: git add $target && git commit -m 'Baseline for <gpu>: <why>'"
