#!/usr/bin/env bash
# scripts/cpu_vs_numpy.py end to end at one shape: it runs the fusebench binary and numpy, prints
# a row per op/variant and writes the Markdown table; bad input exits 2 naming the value.
set -euo pipefail
python=$1 root=$2 fusebench=$3 out=$4/cpu_vs_numpy_smoke
mkdir -p "$out"
"$python" "$root/scripts/cpu_vs_numpy.py" --fusebench="$fusebench" --ops=qkv --tokens=2 --rounds=1 --threads=1 \
  --markdown="$out/table.md" > "$out/stdout.txt"
cat "$out/stdout.txt"
for v in split fused; do
  grep -Eq "^qkv +$v +M= +2 +fusebench +[0-9.]+ ms +numpy +[0-9.]+ ms +fusebench/numpy [0-9.]+" "$out/stdout.txt" ||
    { echo "FAIL: no qkv/$v row"; exit 1; }
  grep -Eq "^\| qkv \| $v \| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|.*onednn_sgemm" "$out/table.md" ||
    grep -Eq "^\| qkv \| $v \| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|.*openblas_sgemm" "$out/table.md" ||
    { echo "FAIL: no qkv/$v row naming the GEMM path in the Markdown table"; cat "$out/table.md"; exit 1; }
done
set +e
msg=$("$python" "$root/scripts/cpu_vs_numpy.py" --fusebench="$fusebench" --tokens=0 2>&1)
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q -- "--tokens" <<<"$msg" || { echo "FAIL: --tokens=0 gave rc=$rc: $msg"; exit 1; }
echo "cpu_vs_numpy smoke: OK"
