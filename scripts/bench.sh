#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, verifies and runs the default sweep on the
# GPU (or the CPU backend when there is none, saying so), and writes reports/latest/.
# Extra arguments go to build/bin/fusebench (e.g. --models=llama3-8b --tokens=1,4096).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release

out=reports/latest
mkdir -p "$out"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "bench: GPU found: $(nvidia-smi -L | head -1)"
else
  echo "bench: no GPU on this machine: running the CPU backend sweep (about a minute on 2 cores)"
fi
status=0
build/bin/fusebench --verify --report="$out/report.json" "$@" | tee "$out/console.txt" || status=$?
echo "bench: report in $out/report.json"
# Crossover charts and the offline HTML page beside the report (docs/charts.md). A chart failure
# is reported but does not hide the sweep's own status.
if [ -s "$out/report.json" ]; then
  rm -f "$out"/crossover_*.png "$out"/crossover_*.svg
  python3 scripts/plot_crossover.py "$out/report.json" -o "$out" ||
    echo "bench: WARNING: charts not written (is matplotlib installed? scripts/install-deps.sh)"
  python3 scripts/make_html.py "$out/report.json" -o "$out/index.html" ||
    echo "bench: WARNING: $out/index.html not written"
  echo "bench: open $out/index.html for the charts and tables"
fi
exit "$status"
