#!/usr/bin/env bash
# Makes a report the regression baseline for its device: reports/baselines/<device>.json, which
# the GPU workflow gates against (docs/gate.md). Run on the GPU the baseline is for.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: scripts/update-baseline.sh [--force] [--allow-cpu] [--any-args] [REPORT.json]

Makes a report the regression baseline of its device, reports/baselines/<device>.json, which
.github/workflows/gpu-regression.yml gates against (docs/gate.md).

  (no REPORT)   on the GPU the baseline is for: builds Release, runs the CI-sized sweep
                (scripts/ci_sweep.sh reports/ci-baseline-run) and adopts its report. Stops
                before building when no GPU is found (nvidia-smi -L).
  REPORT.json   adopts an existing report, e.g. a CI artifact.

  --force       accept a report with failed entries or from a modified (-dirty) checkout
  --allow-cpu   accept a report measured on the CPU backend (refused otherwise: GPU runners
                compare against GPU baselines)
  --any-args    accept a report made with other arguments than the CI sweep's
                (scripts/ci_sweep.sh --args; refused otherwise: the baseline must cover
                every entry the CI sweep measures, or the gate fails on NEW entries)
  -h, --help    this text

It checks the gate can read the report, prints the differences from the previous baseline,
writes the file and tells you to commit it. Exit 0 written, 1 refused, 2 bad usage, no GPU
or unreadable report.
EOF
}

force=0
allow_cpu=0
any_args=0
report=""
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --allow-cpu) allow_cpu=1 ;;
    --any-args) any_args=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "update-baseline: unknown option '$arg' (valid: --force, --allow-cpu, --any-args, --help)" >&2; exit 2 ;;
    *)
      [ -z "$report" ] || { echo "update-baseline: one report at a time (got '$report' and '$arg')" >&2; exit 2; }
      report=$arg ;;
  esac
done

if [ -z "$report" ]; then
  # The sweep measures this machine: without a GPU it would take a CPU run for a GPU baseline.
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    gpu_problem="nvidia-smi is not installed"
  elif ! gpus=$(nvidia-smi -L 2>&1) || ! grep -q '^GPU ' <<<"$gpus"; then
    gpu_problem="nvidia-smi -L found no GPU ($(head -1 <<<"$gpus"))"
  else
    gpu_problem=""
  fi
  if [ -n "$gpu_problem" ]; then
    echo "update-baseline: no GPU on this machine: $gpu_problem. Nothing was built or run." >&2
    echo "  Run it on the GPU the baseline is for, or adopt a report made there (e.g. the CI" >&2
    echo "  artifact): scripts/update-baseline.sh REPORT.json" >&2
    exit 2
  fi
  echo "update-baseline: $(head -1 <<<"$gpus"): building and running the CI-sized sweep"
  . scripts/env.sh
  cmake --preset release >/dev/null && cmake --build --preset release
  scripts/ci_sweep.sh reports/ci-baseline-run
  report=reports/ci-baseline-run/report.json
fi
[ -s "$report" ] || { echo "update-baseline: $report not found or empty" >&2; exit 2; }
gate=build/bin/fusebench-gate
[ -x "$gate" ] || { echo "update-baseline: $gate missing: cmake --preset release && cmake --build --preset release" >&2; exit 2; }
# The gate must accept it (schema, finite numbers): compare it with itself.
"$gate" "$report" "$report" --ignore-time --allow-unjudged >/dev/null ||
  { echo "update-baseline: $report is not a usable report (see: $gate $report $report)" >&2; exit 2; }
checks=$(python3 - "$report" "$(scripts/ci_sweep.sh --args)" "$any_args" <<'PY'
import json, shlex, sys
d = json.load(open(sys.argv[1]))
c = d.get("context", {})
# Coverage: the report's arguments (context.command_line without the program and --report=)
# must be the CI sweep's, so the baseline holds every entry CI measures.
want = shlex.split(sys.argv[2])
words = shlex.split(str(c.get("command_line", "")))[1:]
got = [w for w in words if not w.startswith("--report=")]
if sys.argv[3] != "1" and sorted(got) != sorted(want):
    print("args")
    print(f"its arguments '{' '.join(got) or 'none recorded'}' are not the CI sweep's '{' '.join(want)}'")
    sys.exit(0)
errors = [b["name"] for b in d["benchmarks"] if b.get("error_occurred")]
rev = str(c.get("git_revision", ""))
problems = []
if errors:
    problems.append(f"{len(errors)} failed entries (e.g. {errors[0]})")
if rev.endswith("-dirty") or not rev or rev.startswith("unknown"):
    problems.append(f"git revision '{rev}' is not a clean commit")
cpu = c.get("backend") == "cpu" or not c.get("gpu_name")
print(("cpu:" + str(c.get("cpu_model", "unknown"))) if cpu else "gpu")
print("; ".join(problems))
PY
)
device=$(sed -n 1p <<<"$checks")
problems=$(sed -n 2p <<<"$checks")
if [ "$device" = args ]; then
  echo "update-baseline: refusing: $report: $problems." >&2
  echo "  A baseline made with other arguments leaves CI entries ungated (the gate fails on NEW" >&2
  echo "  entries): run scripts/ci_sweep.sh, or pass --any-args if this baseline is meant." >&2
  exit 1
fi
if [ "$device" != gpu ] && [ "$allow_cpu" != 1 ]; then
  echo "update-baseline: refusing: $report was measured on the CPU backend (${device#cpu:}), not a GPU." >&2
  echo "  GPU runners compare against GPU baselines: a CPU report gates nothing there. Adopt a report" >&2
  echo "  measured on the GPU, or pass --allow-cpu if a CPU baseline is really meant." >&2
  exit 1
fi
if [ -n "$problems" ] && [ "$force" != 1 ]; then
  echo "update-baseline: refusing: $problems (use --force to accept)" >&2
  exit 1
fi
target=$(scripts/ci_sweep.sh --baseline-path "$report")
mkdir -p "$(dirname "$target")"
if [ -f "$target" ]; then
  echo "update-baseline: differences from the current baseline:"
  "$gate" "$target" "$report" --allow-missing-counters || true
fi
cp "$report" "$target"
[ "$device" = gpu ] || echo "update-baseline: note: $target is a CPU baseline (--allow-cpu)"
echo "update-baseline: wrote $target; commit it: git add $target && git commit -m 'Baseline for <device>: <why>'"
