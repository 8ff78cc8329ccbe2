#!/usr/bin/env bash
# shellcheck disable=SC2317 # helpers called through check() look unreachable to shellcheck
# scripts/device-check.sh rehearsed end to end on a CPU machine (issue 21): the device machine's
# tools are stand-ins (tests/scripts/device_check_stubs/: nvidia-smi, nvcc, cmake that "builds"
# stand-in binaries, ncu, the PyTorch baseline), the rest is the real script and its real
# summaries, in a scratch copy with a real (tiny) .deb in .deps. Four runs:
#   pass:   every row PASS, exit 0; stage 1's table written before stage 2 began; the 8 files.
#   fail:   a GPU test fails, an entry shows split-K, the blocks step outlives its cap (CAP_SCALE
#           shrinks the caps), the driver answers only clocks_throttle_reasons: exit 1, those
#           rows FAIL, stage 1's answers are all there, temp files gone, at most 8 files.
#   nocuda: the build's cache says FUSEBENCH_WITH_CUDA is OFF: the build row FAILs naming it.
#   nonvcc: no nvcc on PATH nor under CUDA_HOME: the build row FAILs naming it.
# Usage: test_device_check_rehearsal.sh SOURCE_DIR
set -euo pipefail
src=$1
stubs="$src/tests/scripts/device_check_stubs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo/tests/configs" "$work/repo/.deps" "$work/deb/DEBIAN" "$work/deb/usr/share/fusebench-rehearsal"
cp -r "$src/scripts" "$work/repo/"
cp "$stubs/torch_linear_baseline.py" "$work/repo/scripts/"
cp "$src/tests/configs/gpt-oss-20b.json" "$src/tests/configs/tiny-qwen3-moe.json" "$work/repo/tests/configs/"
printf 'Package: fusebench-rehearsal\nVersion: 1\nArchitecture: all\nMaintainer: none <none@example.com>\nDescription: rehearsal\n' \
  > "$work/deb/DEBIAN/control"
echo rehearsal > "$work/deb/usr/share/fusebench-rehearsal/file"
dpkg-deb --build "$work/deb" "$work/repo/.deps/rehearsal.deb" > /dev/null
mkdir -p "$work/bin"
for t in nvidia-smi nvcc ncu cmake; do cp "$stubs/$t" "$work/bin/"; done
cp "$stubs/fusebench.py" "$stubs/gtest.sh" "$work/bin/"

fail=0
check() { # check WHAT COMMAND...
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}
run() { # run MODE [env...]: the check in mode MODE; sets $out, $w, $console, $rc
  local mode=$1
  shift
  out="$work/out-$mode" w="$work/w-$mode" console="$work/console-$mode"
  rc=0
  env PATH="$work/bin:$PATH" REHEARSAL_MODE="$mode" OUT="$out" DEVICE_CHECK_WORK="$w" "$@" \
    bash "$work/repo/scripts/device-check.sh" > "$console" 2>&1 || rc=$?
}
row() { # row NAME STATUS: the final table has NAME with STATUS
  sed -n '/^##### all checks/,$p' "$out/summary.txt" | grep -Eq "^$1 +$2( |$)"
}
files() { (cd "$out" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' '); }

# --- pass
run pass
check "pass: exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "pass: stage 1 before stage 2" bash -c "grep -n '=== .*stage 1:' '$console' | head -1 | cut -d: -f1 > '$work/s1'; grep -n '=== .*stage 2:' '$console' | cut -d: -f1 > '$work/s2'; [ \$(cat '$work/s1') -lt \$(cat '$work/s2') ]"
check "pass: stage 1's table was in summary.txt when stage 2 started" \
  grep -q "when TP started: True" "$w/stub-tp-saw-stage1-table.txt"
check "pass: the 8 files (got: $(files))" [ "$(files)" = "build-and-test.log gpu.txt logs.tar.gz report-blocks.json report-families.json report-tp.json report.json summary.txt " ]
check "pass: summary holds stage 1, stage 2 and the final table" \
  bash -c "grep -q '^##### stage 1 (written before stage 2 began)' '$out/summary.txt' && grep -q '^##### stage 2' '$out/summary.txt' && grep -q '^##### all checks' '$out/summary.txt'"
check "pass: no FAIL row" grep -q "^checks: [0-9]* PASS, 0 FAIL" "$out/summary.txt"
for r in build "sweep: verify \+ counters \+ timing" "PyTorch F.linear baseline" \
  "TP pipelines" "blocks on the GPU" "family sweep \(bias, MoE\)" "ncu qkv/split/1" \
  "suspicion: grouped GEMM, timing:batch" "suspicion: grouped GEMM, timing:cold" \
  "suspicion: grouped GEMM, timing:graph" "suspicion: split-K \(launches_vs_model != 1\)" \
  "suspicion: CUPTI records of captured graphs" "suspicion: delay kernel accuracy \(10/25 us\)" \
  "suspicion: nvidia-smi clock-limit field" "suspicion: g\+\+ version" \
  "GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent" "GpuQuant.First" "GpuMoe.First" \
  "quantized sweep: fp8/int8 verify" "moe sweep: verify"; do
  check "pass: row '$r' PASS" row "$r" PASS
done
# The newest paths first: GpuQuant, GpuMoe, the quantized and moe sweeps, then the bf16 tests.
stage1_order() { # the steps begun, in order, of those named GPU tests or sweeps
  sed -n 's/^=== \[[0-9]*s\] \(.*\) (cap [0-9]* s)$/\1/p' "$console" | grep -E "GPU tests|sweep" |
    tr '\n' '|'
}
want_order="GPU tests: GpuQuant|GPU tests: GpuMoe|quantized sweep (verify)|moe sweep (verify)|"
want_order+="GPU tests (bf16)|sweep (verify, counters, 4 regimes)|family sweep|"
check "pass: GpuQuant, GpuMoe, the quantized and moe sweeps before the bf16 rows (got: $(stage1_order))" \
  [ "$(stage1_order)" = "$want_order" ]
for step in "GPU tests: GpuQuant" "GPU tests: GpuMoe" "GPU tests (bf16)" "quantized sweep (verify)" \
  "moe sweep (verify)"; do
  check "pass: gpu.txt times '$step' against its own cap" \
    grep -qF "step $step: " "$out/gpu.txt"
done
check "pass: the field this driver answers" grep -q "answers clocks_event_reasons.active" "$out/summary.txt"
for v in "driver: 580" "nvcc: .*13.0" "g\\+\\+: " "cmake: " "step build: [0-9]+ s \(cap 118 s\), exit 0" \
  "step sweep \(verify, counters, 4 regimes\): [0-9]+ s" "step ncu: " "total: [0-9]+ s, 0 FAIL"; do
  check "pass: gpu.txt has '$v'" grep -Eq "^$v" "$out/gpu.txt"
done
tar -tzf "$out/logs.tar.gz" > "$work/listed"
for f in checks.txt bench-console.txt torch.json ncu.csv summary-stage1.txt report-quant.json \
  report-moe.json; do
  check "pass: logs.tar.gz holds $f" grep -q "/$f\$" "$work/listed"
done
check "pass: no temp file left" bash -c "! ls '$out' | grep -q tmp"

# --- fail (caps at a fifth: the blocks stand-in sleeps 60 s, its cap is 5 s)
run fail CAP_SCALE=20
check "fail: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "fail: blocks cut by its cap" row "blocks on the GPU" "FAIL +exit 124:"
check "fail: the failed GPU test" row "Gputest_correctness.Second" FAIL
check "fail: the failed GpuQuant test" row "GpuQuant.Second" FAIL
check "fail: GpuMoe still ran after it" row "GpuMoe.Second" PASS
check "fail: split-K" row "suspicion: split-K \(launches_vs_model != 1\)" FAIL
check "fail: older field name taken" grep -q "answers clocks_throttle_reasons.active" "$out/summary.txt"
check "fail: stage 1's table kept" grep -q '^##### stage 1 (written before stage 2 began)' "$out/summary.txt"
check "fail: the bf16 sweep's report back" [ -s "$out/report.json" ]
check "fail: no temp file left" bash -c "! ls '$out' | grep -q tmp"
n=$(find "$out" -type f | wc -l)
check "fail: at most 8 files (got $n)" [ "$n" -le 8 ]
check "fail: the console ends with the table" bash -c "tail -3 '$console' | grep -q 'FAIL row'"

# --- nocuda
run nocuda
check "nocuda: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "nocuda: the build row names the cache" row build "FAIL +FUSEBENCH_WITH_CUDA is OFF"
check "nocuda: stage 2 skipped" row "TP pipelines" SKIP

# --- no nvcc: the stand-in removed and every PATH entry holding an nvcc dropped
mkdir -p "$work/bin-nonvcc"
cp "$work/bin"/* "$work/bin-nonvcc/"
rm "$work/bin-nonvcc/nvcc"
no_nvcc_path=$(tr ':' '\n' <<< "$PATH" | while read -r d; do [ -x "$d/nvcc" ] || printf '%s:' "$d"; done)
out="$work/out-nonvcc" w="$work/w-nonvcc" console="$work/console-nonvcc" rc=0
env PATH="$work/bin-nonvcc:$no_nvcc_path" CUDA_HOME=/nonexistent REHEARSAL_MODE=pass OUT="$out" \
  DEVICE_CHECK_WORK="$w" bash "$work/repo/scripts/device-check.sh" > "$console" 2>&1 || rc=$?
check "nonvcc: exit 1 (got $rc)" [ "$rc" -eq 1 ]
check "nonvcc: the build row names nvcc" row build "FAIL +nvcc not on PATH \(nor at /nonexistent/bin/nvcc\)"
check "nonvcc: gpu.txt says so" grep -q "^nvcc: unavailable: nvcc not found (not on PATH)" "$out/gpu.txt"

if [ "$fail" -ne 0 ]; then
  for m in pass fail nocuda nonvcc; do
    echo "----- console ($m)"
    tail -60 "$work/console-$m" 2> /dev/null || true
  done
fi
exit "$fail"
