#!/usr/bin/env bash
# The GPU check, in ONE call of the device tool (under 8 minutes on an H200):
#   here:  scripts/fetch-device-deps.sh          (downloads the .debs into .deps/)
#   then:  device run: command="bash scripts/device-check.sh", carry=[".deps"], timeout_s=540
# It builds (the GPU box has nvcc/cmake/ninja but none of our libraries: they come from .deps;
# without oneDNN, which only the CPU backend would use, and it runs nothing here),
# runs the GPU tests, verifies every variant, counts launches and DRAM bytes, times a
# representative sweep (with bias, GeLU-tanh/swigluoai and an MoE expert layer), cross-checks
# with ncu and PyTorch. At most 8 files come back from $OUT; it holds 8: gpu.txt,
# build-and-test.log, bench-console.txt, report.json, report-tp.json, report-blocks.json (written
# as they go, so a hard kill keeps them), summary.txt, and logs.tar.gz (made on exit: every other
# file, ncu.csv, torch.json and the step table among them, plus copies of the logs).
# Every step runs under a share of one deadline (BUDGET_S, default 460 s) and the summary runs
# on exit whatever happened, so a slow step costs the steps after it, never the results before.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-/tmp/fusebench-device-out}"
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=$((START + ${BUDGET_S:-460}))
RESERVE=25 # kept for the summary
step() { echo "=== [$(($(date +%s) - START))s] $*"; }
# cap N: N seconds, or what is left before the deadline (minus the summary's reserve).
cap() {
  local left=$((DEADLINE - RESERVE - $(date +%s)))
  if [ "$left" -lt "$1" ]; then echo $((left > 5 ? left : 5)); else echo "$1"; fi
}
left() { echo $((DEADLINE - RESERVE - $(date +%s))); }
# One line per step of this check (name, PASS|FAIL|SKIP, detail) for the summary's table; the GPU
# tests' own results are read from their Google Test output in build-and-test.log.
WORK=${DEVICE_CHECK_WORK:-/tmp/fusebench-device-work}
rm -rf "$WORK" && mkdir -p "$WORK"
CHECKS="$WORK/checks.txt"
check() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >> "$CHECKS"; }
# pass_fail NAME RC [what 124 means] [what 1 means]: PASS on 0, FAIL with the exit code otherwise.
pass_fail() {
  case "$2" in
    0) check "$1" PASS ;;
    124) check "$1" FAIL "exit 124: ${3:-cut by the deadline}" ;;
    1) check "$1" FAIL "exit 1${4:+: $4}" ;;
    *) check "$1" FAIL "exit $2" ;;
  esac
}
FUSEBENCH_EXIT1="an entry failed or a verification mismatched (error_message in the report)"

summary() {
  step "summary"
  {
    [ -s "$OUT/report.json" ] &&
      python3 scripts/summarize_report.py "$OUT/report.json" --torch "$WORK/torch.json" --ncu "$WORK/ncu.csv"
    [ -s "$OUT/report-tp.json" ] && python3 scripts/summarize_report.py "$OUT/report-tp.json"
    # Per fixture: samples dropped (throttled, blocking-kernel timeouts: the grouped-GEMM
    # host-array question), how the interleaved measurement stopped, speedup [95% CI]; the
    # throttle reference clock; the stride-0 strided-batched gate_up check and its GPU tests.
    [ -s "$OUT/report.json" ] &&
      python3 scripts/timing_summary.py "$OUT/report.json"
    [ -s "$OUT/report-tp.json" ] && python3 scripts/timing_summary.py "$OUT/report-tp.json"
    [ -s "$OUT/report-blocks.json" ] && python3 scripts/timing_summary.py "$OUT/report-blocks.json"
    # How the interleaved groups stopped (met the target, timed out, widest interval).
    grep -h "fusebench: timing:" "$OUT/bench-console.txt" 2>/dev/null
    # Last, so the device tool's output tail shows it: PASS/FAIL/SKIP per step and per GPU test.
    local build_log=()
    [ -f "$OUT/build-and-test.log" ] && build_log=(--build-log "$OUT/build-and-test.log")
    python3 scripts/timing_summary.py --checks "$CHECKS" "${build_log[@]}"
  } 2>&1 | tee "$OUT/summary.txt"
  bundle
  step "done"
}
# Everything else in one file: the device tool returns at most 8 files from $OUT.
bundle() {
  cp "$OUT"/*.txt "$OUT"/*.log "$WORK"/ 2>/dev/null
  tar -czf "$OUT/logs.tar.gz" -C "$(dirname "$WORK")" "$(basename "$WORK")" ||
    echo "bundle: tar failed; logs.tar.gz may be incomplete"
  local n
  n=$(find "$OUT" -type f | wc -l)
  [ "$n" -le 8 ] || echo "WARNING: $n files under \$OUT, the device tool returns 8: $(ls "$OUT")"
}
trap summary EXIT

step "dependencies from .deps"
if ! ls .deps/*.deb > /dev/null 2>&1; then
  echo "NO .deps/*.deb here: run scripts/fetch-device-deps.sh on the development machine first, and"
  echo "name .deps in the device tool's carry (nothing can be installed on the GPU machine)"
  check dependencies FAIL "no .deps/*.deb: run scripts/fetch-device-deps.sh and carry .deps"
  exit 1
fi
DEPS=/tmp/fusebench-deps
mkdir -p "$DEPS"
for f in .deps/*.deb; do dpkg -x "$f" "$DEPS"; done
export CMAKE_PREFIX_PATH="$DEPS/usr:$DEPS/usr/lib/x86_64-linux-gnu/cmake"
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
export PKG_CONFIG_SYSROOT_DIR="$DEPS"
export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig"
for d in /usr/local/cuda*/lib64 /usr/local/cuda*/extras/CUPTI/lib64; do [ -d "$d" ] && echo "cuda libs: $d"; done
# NCCL from the image's pip wheel (lib/libnccl.so.2 only, no libnccl.so link): name it exactly.
NCCL_ARGS=()
# __path__, not __file__: nvidia.nccl may be a namespace package, whose __file__ is None.
NCCL_HINT=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null || true)
if [ -n "$NCCL_HINT" ] && [ -f "$NCCL_HINT/lib/libnccl.so.2" ] && [ -f "$NCCL_HINT/include/nccl.h" ]; then
  NCCL_ARGS=(-DNCCL_INCLUDE_DIR="$NCCL_HINT/include" -DNCCL_LIBRARY="$NCCL_HINT/lib/libnccl.so.2")
  export LD_LIBRARY_PATH="$NCCL_HINT/lib:$LD_LIBRARY_PATH"
  check "NCCL (pip wheel)" PASS "$NCCL_HINT"
else
  check "NCCL (pip wheel)" SKIP "no nvidia.nccl with lib/libnccl.so.2 and include/nccl.h: TP collectives modelled"
fi

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nvcc --version | tail -2
  uname -r
  date -u
} > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

step "configure + build"
{
  timeout "$(cap 170)" bash -c '
    cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DFUSEBENCH_WITH_MPI=OFF -DFUSEBENCH_WITH_DNNL=OFF "$@" && cmake --build build-device -j16' \
    _ "${NCCL_ARGS[@]}"
} > "$OUT/build-and-test.log" 2>&1 || {
  rc=$?
  tail -40 "$OUT/build-and-test.log"
  echo "BUILD FAILED"
  pass_fail build "$rc" "cut by its 170 s cap"
  exit 1
}
check build PASS
grep "fusebench: CUDA=" "$OUT/build-and-test.log"
if ldd build-device/bin/fusebench | grep "not found"; then
  echo "MISSING LIBRARIES (add their .debs to scripts/fetch-device-deps.sh)"
  check libraries FAIL "ldd: a library is not found (see build-and-test.log)"
fi

# One process per test binary (5 CUDA context starts, not one per test), newest tests first, so a
# cut by the deadline costs the oldest; one binary at a time: the DRAM test reads device-wide
# counters. '*Gpu*' selects what ctest -R Gpu selects.
step "GPU tests (--gtest_filter='*Gpu*', one binary at a time, newest first)"
for t in test_timing test_families test_timing_engine test_counters test_correctness; do
  if [ "$(left)" -le 10 ]; then
    echo "GPU tests: no time left for $t" >> "$OUT/build-and-test.log"
    check "$t (process)" SKIP "no time left before the deadline"
    continue
  fi
  {
    echo "=== $t --gtest_filter='*Gpu*'"
    timeout "$(cap 60)" "build-device/bin/$t" --gtest_filter='*Gpu*' --gtest_color=no 2>&1
    echo "$t exit: $?"
  } >> "$OUT/build-and-test.log"
done
grep -E "^\[ +(FAILED|SKIPPED) +\] [^ ]+ \(|exit: " "$OUT/build-and-test.log" | tail -25

# qwen2.5-7b brings the q/k/v bias (cuBLASLt's bias epilogue, fused_bias_kernel, grouped GEMM +
# bias_add); gpt-oss-20b brings qkv and gate_up bias, swigluoai on interleaved w13 and the MoE
# expert gate_up. 4 models x 2 ops x 4 token counts x 4 regimes = 128 groups, about 430 entries:
# at 0.2 s per entry about what 288 x 0.3 s cost, with a cheaper verification (no 16384).
FAMILY_CONFIG=tests/configs/gpt-oss-20b.json
[ -f "$FAMILY_CONFIG" ] || FAMILY_CONFIG=tests/configs/qwen3-30b-a3b.json # MoE, no bias
step "verify + counters + timed sweep (qkv, gate_up; all four regimes; bias and MoE models)"
SWEEP_ARGS=${SWEEP_ARGS:---models=qwen3-0.6b,llama3-8b,qwen2.5-7b --model-config=$FAMILY_CONFIG --ops=qkv,gate_up --tokens=1,16,256,4096 --timing=cold,batch,eager,graph --timing-max-time=0.2}
# shellcheck disable=SC2086
timeout "$(cap 200)" build-device/bin/fusebench --verify --report="$OUT/report.json" $SWEEP_ARGS \
  > "$OUT/bench-console.txt" 2>&1
rc=$?
echo "fusebench exit: $rc (124: stopped by the deadline; the report holds every entry finished)"
# The clocks right after the sweep (light-load clocks decide whether eager decode samples count as
# throttled: R1 finding 9).
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks_throttle_reasons.active,power.draw,temperature.gpu \
  --format=csv > "$WORK/gpu-after-sweep.txt" 2>&1
pass_fail "sweep: verify + counters + timing" "$rc" \
  "cut by the deadline; report.json holds every entry finished" "$FUSEBENCH_EXIT1"
grep -E "^fusebench|verif|error|FAIL|unavailable" "$OUT/bench-console.txt" | head -12

if [ "$(left)" -gt 30 ]; then
  # naive, paired, sp and overlap interleaved: 2 ops x 3 tp x 3 token counts = 18 groups of 4 at
  # 0.2 s per member, about 15 s, plus the compute passes and the collective sweep.
  step "TP pipelines (naive, paired, sp, overlap): tp=1 real, tp>1 modelled (one GPU)"
  timeout "$(cap 45)" build-device/bin/fusebench --ops=tp_attn,tp_mlp --tp=1,2,8 --models=llama3-8b \
    --tokens=1,1024,8192 --dtypes=bf16 --timing=batch --collective-sweep --timing-max-time=0.2 \
    --report="$OUT/report-tp.json" >> "$OUT/bench-console.txt" 2>&1
  rc=$?
  echo "fusebench (tp) exit: $rc"
  pass_fail "TP pipelines" "$rc" "" "$FUSEBENCH_EXIT1"
else
  check "TP pipelines" SKIP "no time left before the deadline"
fi

if [ "$(left)" -gt 40 ]; then
  # Does a GPU ratio move between fresh blocks (new buffers, own warm-up), as CPU ratios do? 2 ops
  # x 3 token counts x 2 regimes = 12 groups of 2-3 members at 0.2 s each, about 10 s with the
  # allocations; speedup_blocks per entry in the summary. One block stays the GPU default until
  # this says otherwise (docs/timing.md, Blocks).
  step "blocks on the GPU (qkv, gate_up; 5 fresh blocks per group)"
  timeout "$(cap 30)" build-device/bin/fusebench --ops=qkv,gate_up --models=llama3-8b \
    --tokens=1,16,256 --timing=batch,eager --timing-blocks=5 --timing-max-time=0.2 \
    --report="$OUT/report-blocks.json" >> "$OUT/bench-console.txt" 2>&1
  rc=$?
  echo "fusebench (blocks) exit: $rc"
  pass_fail "blocks on the GPU" "$rc" "" "$FUSEBENCH_EXIT1"
else
  check "blocks on the GPU" SKIP "no time left before the deadline"
fi

if [ "$(left)" -gt 40 ] && command -v ncu >/dev/null; then
  step "ncu cross-check (launches and DRAM bytes of one region each)"
  : > "$WORK/ncu.csv"
  for spec in qkv/split/1 qkv/fused/1 gate_up/split/4096 gate_up/fused/4096; do
    IFS=/ read -r op variant tokens <<< "$spec"
    if [ "$(left)" -le 15 ]; then
      check "ncu $spec" SKIP "no time left before the deadline"
      continue
    fi
    echo "# $op/$variant/model:llama3-8b/tokens:$tokens" >> "$WORK/ncu.csv"
    timeout "$(cap 25)" ncu --clock-control none --csv --nvtx --nvtx-include "fusebench@region/" \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
      build-device/bin/fusebench-region --op="$op" --variant="$variant" --model=llama3-8b \
      --tokens="$tokens" --iterations=1 >> "$WORK/ncu.csv" 2>&1
    pass_fail "ncu $spec" $?
  done
else
  echo "ncu skipped (not found, or no time left)" > "$WORK/ncu.csv"
  check ncu SKIP "ncu not found, or no time left"
fi

if [ "$(left)" -gt 20 ]; then
  step "PyTorch F.linear baseline"
  timeout "$(cap 40)" python3 scripts/torch_linear_baseline.py --out "$WORK/torch.json" --tokens 1,16,256,1024,4096,16384 \
    --samples 100 > /dev/null 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || echo "torch baseline failed or cut"
  pass_fail "PyTorch F.linear baseline" "$rc"
else
  check "PyTorch F.linear baseline" SKIP "no time left before the deadline"
fi
