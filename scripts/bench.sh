#!/usr/bin/env bash
# The main job: installs dependencies, builds Release, verifies and runs the default sweep on the
# GPU (or the CPU backend when there is none, saying so), and writes reports/latest/.
# Extra arguments go to build/bin/fusebench (e.g. --models=llama3-8b --tokens=1,4096).
# reports/latest is replaced only by a run that measured something and was not interrupted: a
# run that stops before measuring (bad input, failed verification) leaves it as it was and keeps
# its own output in reports/last-failed/; a run stopped by Ctrl-C (or SIGTERM) leaves it as it
# was too and keeps what it measured in reports/last-interrupted/ (report.json, marked
# context.interrupted: true, and console.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

for arg in "$@"; do
  case "$arg" in
    -h | --help)
      scripts/build.sh --run release >&2
      cat <<'USAGE'
scripts/bench.sh [FUSEBENCH FLAGS...]
  Installs what is missing, builds Release, then runs
    build/bin/fusebench --verify --report=reports/latest/report.json [FUSEBENCH FLAGS...]
  (without --verify when the flags hold --list, which runs nothing to verify)
  and writes reports/latest/: report.json, console.txt (everything shown, stdout and stderr),
  advice.md and advice.json (when to fuse, docs/advise.md), the crossover charts and index.html. A run that stops before measuring anything leaves
  reports/latest as it was (its output goes to reports/last-failed/); so does a run stopped by
  Ctrl-C, whose measurements go to reports/last-interrupted/ (report.json with
  context.interrupted: true, console.txt).

build/bin/fusebench --help:
USAGE
      exec build/bin/fusebench --help
      ;;
  esac
done

scripts/build.sh --run release

out=reports/latest
mkdir -p reports
# The previous reports/latest waits in latest.old until this run has measured something; if it
# has not (bad input, failed verification, an interrupt before the first entry), it comes back.
rm -rf "$out.old"
if [ -e "$out" ]; then mv "$out" "$out.old"; fi
mkdir -p "$out"
measured() { [ -s "$out/report.json" ] && grep -q '"run_name"' "$out/report.json"; }
settle() {  # settle [keep|drop]: what to do with the output of a run that measured nothing
  if measured; then
    rm -rf "$out.old"
    return
  fi
  if [ "${1:-keep}" = keep ]; then
    rm -rf reports/last-failed
    mv "$out" reports/last-failed
  else
    rm -rf "$out"
  fi
  if [ -e "$out.old" ]; then mv "$out.old" "$out"; fi
}
trap 'settle' EXIT
say() { echo "bench: $*" | tee -a "$out/console.txt"; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  say "GPU found: $(nvidia-smi -L | head -1)"
else
  say "no GPU on this machine: running the CPU backend sweep (about 2 minutes on 2 cores)"
fi
status=0
# --list runs nothing, so there is nothing to verify: fusebench refuses the two together.
verify=--verify
for arg in "$@"; do
  case $arg in --list | --benchmark_list_tests | --benchmark_list_tests=true) verify= ;; esac
done
# Ctrl-C reaches fusebench too, which stops at its next safe point, writes what it measured and
# exits 130; this shell waits for it (the trap only notes the signal) and tee, which ignores
# the signal, keeps the console to the end.
interrupted=0
trap 'interrupted=1' INT TERM
# stdout and stderr both: console.txt holds what was shown (backend choice, verification, rows).
build/bin/fusebench ${verify:+"$verify"} --report="$out/report.json" "$@" 2>&1 |
  (trap '' INT TERM && exec tee -a "$out/console.txt") || status=$?
trap - INT TERM

if [ "$interrupted" = 1 ] || [ "$status" = 130 ] || [ "$status" = 143 ]; then
  # Not a complete run: it must not replace the last complete one.
  trap - EXIT
  rm -rf reports/last-interrupted
  mv "$out" reports/last-interrupted
  if [ -e "$out.old" ]; then mv "$out.old" "$out"; fi
  if [ -e reports/last-interrupted/report.json ]; then
    echo "bench: interrupted: what this run measured is in reports/last-interrupted/ (report.json," \
      "marked context.interrupted: true, and console.txt; no charts); reports/latest is still" \
      "the last complete run"
  else
    echo "bench: interrupted before the sweep began (nothing measured, no report; the console is" \
      "in reports/last-interrupted/console.txt); reports/latest is still the last complete run"
  fi
  if [ "$status" = 0 ]; then status=130; fi
  exit "$status"
fi

if ! measured; then
  trap - EXIT
  if [ "$status" = 0 ]; then
    settle drop
    echo "bench: nothing was measured (e.g. --list): reports/latest left as it was"
  else
    settle keep
    echo "bench: fusebench exited $status before measuring anything: reports/latest left as it" \
      "was (this run's output: reports/last-failed/console.txt)"
  fi
  exit "$status"
fi
trap - EXIT
settle

# The run measured something: it is reports/latest.
echo "bench: report in $out/report.json"
# When to fuse: the dispatch table of the report (docs/advise.md), written before the charts,
# which shade its ranges, and the page, which shows it beside them. A failure is reported but does
# not hide the sweep's own status.
advice_args=()
write_advice() {
  if build/bin/fusebench-advise "$out/report.json" --format=json -o "$out/advice.json" &&
    build/bin/fusebench-advise "$out/report.json" --format=markdown -o "$out/advice.md"; then
    advice_args=(--advice "$out/advice.json")
    echo "bench: advice in $out/advice.md and $out/advice.json"
  else
    echo "bench: WARNING: $out/advice.md and advice.json not written"
  fi
}
write_advice
# Crossover charts and the offline HTML page beside the report (docs/charts.md). A chart failure
# is reported but does not hide the sweep's own status.
python3 scripts/plot_crossover.py "$out/report.json" -o "$out" "${advice_args[@]}" ||
  echo "bench: WARNING: charts not written (is matplotlib installed? scripts/install-deps.sh)"
python3 scripts/make_html.py "$out/report.json" -o "$out/index.html" ||
  echo "bench: WARNING: $out/index.html not written"
echo "bench: open $out/index.html for the charts and tables"
exit "$status"
