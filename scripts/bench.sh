#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, verifies and runs the default sweep on the
# GPU (or the CPU backend when there is none, saying so), and writes reports/latest/.
# Extra arguments go to build/bin/fusebench (e.g. --models=llama3-8b --tokens=1,4096).
# reports/latest is replaced only by a run that measured something: a run that stops before
# measuring (bad input, failed verification) leaves it as it was and keeps its own output in
# reports/last-failed/.
set -euo pipefail
cd "$(dirname "$0")/.."

for arg in "$@"; do
  case "$arg" in
    -h | --help)
      scripts/build.sh release >&2
      cat <<'USAGE'
scripts/bench.sh [FUSEBENCH FLAGS...]
  Installs what is missing, builds Release, then runs
    build/bin/fusebench --verify --report=reports/latest/report.json [FUSEBENCH FLAGS...]
  and writes reports/latest/: report.json, console.txt (everything shown, stdout and stderr),
  the crossover charts and index.html. A run that stops before measuring anything leaves
  reports/latest as it was (its output goes to reports/last-failed/).

build/bin/fusebench --help:
USAGE
      exec build/bin/fusebench --help
      ;;
  esac
done

scripts/build.sh release

out=reports/latest
mkdir -p reports
stage=$(mktemp -d reports/.run.XXXXXX)
trap 'rm -rf "$stage"' EXIT
say() { echo "bench: $*" | tee -a "$stage/console.txt"; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  say "GPU found: $(nvidia-smi -L | head -1)"
else
  say "no GPU on this machine: running the CPU backend sweep (about 4 minutes on 2 cores)"
fi
status=0
# stdout and stderr both: console.txt holds what was shown (backend choice, verification, rows).
build/bin/fusebench --verify --report="$stage/report.json" "$@" 2>&1 | tee -a "$stage/console.txt" ||
  status=$?

if ! { [ -s "$stage/report.json" ] && grep -q '"run_name"' "$stage/report.json"; }; then
  if [ "$status" = 0 ]; then
    echo "bench: nothing was measured (e.g. --list): reports/latest left as it was"
  else
    rm -rf reports/last-failed
    mv "$stage" reports/last-failed
    echo "bench: fusebench exited $status before measuring anything: reports/latest left as it" \
      "was (this run's output: reports/last-failed/console.txt)"
  fi
  exit "$status"
fi

# The run measured something: it becomes reports/latest.
rm -rf "$out.old"
if [ -e "$out" ]; then mv "$out" "$out.old"; fi
mv "$stage" "$out"
rm -rf "$out.old"
echo "bench: report in $out/report.json"
# Crossover charts and the offline HTML page beside the report (docs/charts.md). A chart failure
# is reported but does not hide the sweep's own status.
python3 scripts/plot_crossover.py "$out/report.json" -o "$out" ||
  echo "bench: WARNING: charts not written (is matplotlib installed? scripts/install-deps.sh)"
python3 scripts/make_html.py "$out/report.json" -o "$out/index.html" ||
  echo "bench: WARNING: $out/index.html not written"
echo "bench: open $out/index.html for the charts and tables"
exit "$status"
