#!/usr/bin/env bash
# The HTML report as a user sees it: rendered by headless Chromium, charts loaded, the entry
# table sorts both ways, no JavaScript errors (the page's #selftest mode reports all three), and
# a screenshot is taken. Exits 77 (ctest SKIP) when Chromium is not installed.
# Usage: test_html_chromium.sh SOURCE_DIR REPORT_DIR
set -euo pipefail
src=$1 dir=$2
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "SKIP: no chromium on PATH (Debian package 'chromium'; scripts/install-deps.sh installs it unless FUSEBENCH_NO_CHROMIUM=1)"
  exit 77
fi
out="$dir/html"
rm -rf "$out"
mkdir -p "$out"
cp "$dir/report.json" "$out/report.json"
python3 "$src/scripts/plot_crossover.py" "$out/report.json" -o "$out" >/dev/null
python3 "$src/scripts/make_html.py" "$out/report.json" -o "$out/index.html"
# Offline: nothing fetched from the network.
if grep -Eq "(src|href)=['\"]?(https?:)?//" "$out/index.html"; then
  echo "FAIL: index.html references a network resource"; exit 1
fi
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --hide-scrollbars
       --user-data-dir="$out/profile")
selftest() {
  timeout 120 "$browser" "${flags[@]}" --window-size=1280,900 --virtual-time-budget=5000 --enable-logging=stderr --v=0 \
    --dump-dom "file://$out/index.html#selftest" 2>"$out/chromium.log" | grep -o "SELFTEST [A-Z]*: [^<]*" || true
}
result=$(selftest)
echo "chromium: $result"
[[ "$result" == "SELFTEST PASS"* ]] || { echo "FAIL: page self-test"; tail -20 "$out/chromium.log"; exit 1; }
if grep -E "CONSOLE.*(Uncaught|Error)" "$out/chromium.log"; then echo "FAIL: console errors"; exit 1; fi
timeout 120 "$browser" "${flags[@]}" --window-size=1300,2400 --screenshot="$out/screenshot.png" \
  "file://$out/index.html" 2>>"$out/chromium.log"
size=$(stat -c %s "$out/screenshot.png")
[ "$size" -gt 50000 ] || { echo "FAIL: screenshot only $size bytes (blank page?)"; exit 1; }
echo "screenshot: $out/screenshot.png ($size bytes)"
# The check can fail: with one chart missing the self-test must say FAIL.
rm "$out"/crossover_*_qkv.svg
result=$(selftest)
[[ "$result" == "SELFTEST FAIL"* ]] || { echo "FAIL: self-test did not notice a missing chart: $result"; exit 1; }
echo "test_html_chromium: ok"
