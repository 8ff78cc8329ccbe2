#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions run from traps look unreachable to shellcheck
# The GPU check, in ONE call of the device tool, in two stages:
#   here:  scripts/fetch-device-deps.sh      (downloads the .debs into .deps/)
#          scripts/device-check.sh --plan    (each step's cap against its estimate; exit 1 if over)
#   then:  device run: command="bash scripts/device-check.sh", carry=[".deps"], timeout_s=480
# Stage 1 (caps <= 240 s): build (CUDA asserted); then the newest, riskiest paths, each under its
# own cap: the GpuQuant tests (fp8/int8), the GpuMoe tests, a --verify sweep of fp8/int8 qkv and
# gate_up and one of the moe block; then the older bf16 GPU tests (test_tp first); then its
# PASS/FAIL table goes into summary.txt and logs.tar.gz is made, BEFORE stage 2 starts. Stage 2
# (--verify and the qkv/gate_up sweep on two presets in all four regimes with counters and the
# open questions it answers, one PyTorch F.linear cross-check, TP pipelines, blocks, the family
# sweep, ncu) may be cut by the deadline; stage 1's answers are already under $OUT. The summary
# of both ends the output.
# At most 8 files come back from $OUT; it holds at most 8: gpu.txt (versions, the plan, each
# step's time), build-and-test.log, report.json, report-tp.json, report-blocks.json,
# report-families.json (stage 2), summary.txt, logs.tar.gz (every other file: the consoles,
# report-quant.json and report-moe.json (stage 1's quantized and moe sweeps), report-tp-moe.json, ncu.csv,
# torch.json, checks.txt; made after each stage). Temp files are removed first.
# Every step runs under its own cap (the table below, sized by --plan from its work) and under
# one deadline (BUDGET_S, default 420 s); the exit status is 1 when any row FAILs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUDGET_S=${BUDGET_S:-420}
CAP_SCALE=${CAP_SCALE:-100} # percent; the rehearsal test shrinks the caps with it

# The steps, ONE table for the run and for --plan: stage, name, cap (s), kind, arguments.
# GPU tests: items BINARY[:GTEST_FILTER] (default filter *Gpu*), one process each. GpuQuant and
# GpuMoe (mostly host time: their float64 references) run first, each under its own cap; the
# older bf16 tests after them, without those two (test_moe has no other GPU test).
GPU_TEST_BINARIES="test_tp test_timing test_families test_timing_engine test_counters test_correctness test_moe"
GPU_TESTS_QUANT="test_correctness:GpuQuant.*"
GPU_TESTS_MOE="test_moe:GpuMoe.*"
GPU_TESTS_BF16="test_tp test_timing test_families test_timing_engine test_counters test_correctness:*Gpu*:-GpuQuant.*"
BUILD_TARGETS="fusebench fusebench-region $GPU_TEST_BINARIES"
# Every pair of scale modes cuBLASLt is asked for, through the sweep's own path (plans, workspaces,
# the runner): fp8 SCALAR x SCALAR and OUTER_VEC with x's scale as alpha (fp8's
# fused_channelwise), OUTER_VEC with w's scale as alpha and OUTER_VEC x OUTER_VEC
# (fp8:tensor:token), BLK128x128 x VEC128 (fp8:block), int8's s8 GEMM and dequantize; at token
# counts that are multiples of 4 (block scaling's rule); verified against their dequantized
# references. No counter passes: the bf16 sweep asks those questions.
QUANT_SWEEP_ARGS="--models=qwen3-0.6b --ops=qkv,gate_up --tokens=4,256 --dtypes=fp8,fp8:tensor:token,fp8:block,int8 --timing=batch --timing-max-time=0.05 --launch-counts=off --dram-counters=off"
# The moe block (routing, gathers, grouped/batched GEMMs, the combine) on a small qwen3_moe.
MOE_SWEEP_ARGS="--model-config=tests/configs/tiny-qwen3-moe.json --ops=moe --tokens=1,37 --dtypes=bf16 --timing=batch,graph --timing-max-time=0.05 --launch-counts=off --dram-counters=off"
# Decode and a long prefill (256 left out to fit the 420 s: issue 38 put the quantized and moe
# paths first).
SWEEP_ARGS="--models=qwen3-0.6b,llama3-8b --ops=qkv,gate_up --tokens=1,4096 --dtypes=bf16 --timing=cold,batch,eager,graph --timing-max-time=0.1"
TORCH_ARGS="--models=qwen3-0.6b,llama3-8b --tokens=1,4096 --samples=100"
# tp 2 and 8, modelled on one GPU: one rank's compute measured. Not tp 1 (the whole llama3-8b
# MLP per variant, 176M weights each: 18 s of workspaces alone); tp 1 is the plain sweep.
TP_ARGS="--ops=tp_attn,tp_mlp --tp=2,8 --models=llama3-8b --tokens=1,1024 --dtypes=bf16 --timing=batch --comm=modelled --collective-sweep --timing-max-time=0.1"
# The MoE block across ranks (tp_moe: TP-sharded experts against EP's three dispatches) under a
# zipf skew, verified, modelled on one GPU: one rank's compute measured, the collectives priced;
# the NCCL variants across GPUs are test_tp's GpuTpMoe (skipped with the reason on one GPU).
TP_MOE_ARGS="--model-config=tests/configs/tiny-qwen3-moe.json --ops=tp_moe --tp=4 --tokens=37 --dtypes=bf16 --routing=zipf:1.2 --comm=modelled --timing=batch --timing-max-time=0.05 --launch-counts=off --dram-counters=off"
# qwen3-0.6b: every block makes its workspaces afresh, so the small preset keeps 5 blocks cheap;
# decode and prefill (16 tokens left out for the tp_moe step's time).
BLOCKS_ARGS="--ops=qkv,gate_up --models=qwen3-0.6b --tokens=1,256 --dtypes=bf16 --timing=batch,eager --timing-blocks=5 --timing-max-time=0.1"
# q/k/v bias (qwen2.5-7b); qkv and gate_up bias, swigluoai on interleaved w13, MoE experts
# (gpt-oss-20b).
FAMILY_ARGS="--models=qwen2.5-7b --model-config=tests/configs/gpt-oss-20b.json --ops=qkv,gate_up --tokens=1,256 --dtypes=bf16 --timing=batch,graph --timing-max-time=0.1"
NCU_SPECS="qkv/split/1 qkv/fused/1 gate_up/split/4096 gate_up/fused/4096"
steps_table() {
  printf '%s\t%s\t%s\t%s\t%s\n' \
    1 setup 5 setup "" \
    1 build 118 build "$BUILD_TARGETS" \
    1 "GPU tests: GpuQuant" 35 gtest "$GPU_TESTS_QUANT" \
    1 "GPU tests: GpuMoe" 12 gtest "$GPU_TESTS_MOE" \
    1 "quantized sweep (verify)" 16 sweep "--verify $QUANT_SWEEP_ARGS" \
    1 "moe sweep (verify)" 8 sweep "--verify $MOE_SWEEP_ARGS" \
    1 "GPU tests (bf16)" 41 gtest "$GPU_TESTS_BF16" \
    1 "summary (stage 1)" 5 summary "" \
    2 "sweep (verify, counters, 4 regimes)" 43 sweep "--verify $SWEEP_ARGS" \
    2 "PyTorch F.linear" 9 torch "$TORCH_ARGS" \
    2 "TP pipelines" 32 tp "$TP_ARGS" \
    2 "MoE TP/EP (modelled)" 7 tp "--verify $TP_MOE_ARGS" \
    2 "blocks" 15 blocks "$BLOCKS_ARGS" \
    2 "family sweep" 27 sweep "$FAMILY_ARGS" \
    2 "ncu" 41 ncu "$NCU_SPECS" \
    2 "summary (final)" 6 summary ""
}
step_cap() { # step_cap NAME: the table's cap, scaled by CAP_SCALE (at least 1 s)
  local c
  c=$(steps_table | awk -F'\t' -v n="$1" '$2 == n { print $3 }')
  c=$((c * CAP_SCALE / 100))
  echo $((c > 0 ? c : 1))
}

if [ "${1:-}" = "--plan" ]; then
  # Sized here from the suite's own listing (fusebench --list --list-for=cuda --list-bytes) and
  # the configured build (ninja, the test binaries): no GPU needed.
  BIN=${FUSEBENCH_BIN:-build/bin/fusebench}
  BUILD_DIR=${PLAN_BUILD_DIR:-build}
  [ -x "$BIN" ] || {
    echo "--plan needs a built fusebench ($BIN): run scripts/build.sh release first"
    exit 2
  }
  table=$(mktemp)
  steps_table > "$table"
  python3 scripts/device_plan.py "$table" --bin "$BIN" --build-dir "$BUILD_DIR" --budget "$BUDGET_S"
  rc=$?
  rm -f "$table"
  exit "$rc"
fi
[ $# -eq 0 ] || {
  echo "usage: scripts/device-check.sh [--plan] (unknown argument: $1)"
  exit 2
}

OUT="${OUT:-/tmp/fusebench-device-out}"
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE=$((START + BUDGET_S))
now() { echo $(($(date +%s) - START)); }
say() { echo "=== [$(now)s] $*"; }
# cap NAME: the step's cap, or what is left before the deadline less the final summary's cap.
cap() {
  local want left
  want=$(step_cap "$1")
  left=$((DEADLINE - $(step_cap "summary (final)") - $(date +%s)))
  if [ "$left" -lt "$want" ]; then echo $((left > 1 ? left : 1)); else echo "$want"; fi
}
left() { echo $((DEADLINE - $(step_cap "summary (final)") - $(date +%s))); }
WORK=${DEVICE_CHECK_WORK:-/tmp/fusebench-device-work}
rm -rf "$WORK" && mkdir -p "$WORK"
CHECKS="$WORK/checks.txt"
: > "$CHECKS"
check() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >> "$CHECKS"; }
# pass_fail NAME RC [what 124 means] [what 1 means]: PASS on 0, FAIL with the exit code otherwise.
pass_fail() {
  case "$2" in
    0) check "$1" PASS ;;
    124 | 137) check "$1" FAIL "exit $2: ${3:-cut by its cap}" ;;
    1) check "$1" FAIL "exit 1${4:+: $4}" ;;
    *) check "$1" FAIL "exit $2" ;;
  esac
}
FUSEBENCH_EXIT1="an entry failed or a verification mismatched (error_message in the report)"
# Each step's time, with its cap and exit status, in gpu.txt as it ends.
STEP_T0=0
begin() {
  STEP_T0=$(date +%s)
  say "$1 (cap $(cap "$1") s)"
}
finish() { # finish NAME RC
  echo "step $1: $(($(date +%s) - STEP_T0)) s (cap $(step_cap "$1") s), exit $2" >> "$OUT/gpu.txt"
}
GPU_TXT_READY=0

# Everything else in one file: the device tool returns at most 8 files from $OUT. A report being
# rewritten when a cap killed its writer leaves report*.json.tmp.*: removed, not bundled.
bundle() {
  rm -f "$OUT"/*.tmp.* 2> /dev/null
  cp "$OUT"/*.txt "$OUT"/*.log "$WORK"/ 2> /dev/null
  tar -czf "$OUT/logs.tar.gz.part" -C "$(dirname "$WORK")" "$(basename "$WORK")" &&
    mv "$OUT/logs.tar.gz.part" "$OUT/logs.tar.gz" ||
    echo "bundle: tar failed; logs.tar.gz may be stale"
  rm -f "$OUT/logs.tar.gz.part"
  local n
  n=$(find "$OUT" -type f | wc -l)
  [ "$n" -le 8 ] || echo "WARNING: $n files under \$OUT, the device tool returns 8: $(ls "$OUT")"
}

# The table: PASS/FAIL/SKIP per step, per suspicion and per GPU test, last in the output.
table() {
  local build_log=()
  [ -f "$OUT/build-and-test.log" ] && build_log=(--build-log "$OUT/build-and-test.log")
  python3 scripts/timing_summary.py --checks "$CHECKS" "${build_log[@]}"
}
failed_rows() { # FAIL rows of the steps, the suspicions and the GPU tests
  local n
  n=$(table | sed -n 's/^checks: [0-9]* PASS, \([0-9]*\) FAIL.*/\1/p')
  echo "${n:-0}"
}

SUMMARY_DONE=0
final_summary() {
  [ "$SUMMARY_DONE" -eq 1 ] && return
  SUMMARY_DONE=1
  say "summary (final)"
  {
    [ -f "$WORK/summary-stage1.txt" ] && {
      echo "##### stage 1 (written before stage 2 began)"
      cat "$WORK/summary-stage1.txt"
      echo "##### stage 2"
    }
    if [ -s "$OUT/report.json" ]; then
      python3 scripts/summarize_report.py "$OUT/report.json" --torch "$WORK/torch.json"
      python3 scripts/timing_summary.py "$OUT/report.json"
      grep -h "fusebench: timing:" "$WORK/bench-console.txt" 2> /dev/null
    fi
    for r in report-tp report-blocks report-families; do
      [ -s "$OUT/$r.json" ] || continue
      python3 scripts/summarize_report.py "$OUT/$r.json"
      python3 scripts/timing_summary.py "$OUT/$r.json"
    done
    [ -s "$WORK/report-tp-moe.json" ] && python3 scripts/summarize_report.py "$WORK/report-tp-moe.json"
    [ -s "$WORK/ncu.csv" ] && [ -s "$OUT/report.json" ] &&
      python3 scripts/summarize_report.py "$OUT/report.json" --ncu "$WORK/ncu.csv" |
      sed -n '/^ncu cross-check/,$p'
    echo "##### all checks"
    table
  } 2>&1 | tee "$OUT/summary.txt"
  bundle
  local fails
  fails=$(failed_rows)
  say "done: $fails FAIL row(s)"
  [ "$GPU_TXT_READY" -eq 1 ] && echo "total: $(now) s, $fails FAIL row(s)" >> "$OUT/gpu.txt"
}
on_exit() {
  local rc=$?
  final_summary
  if [ "$rc" -eq 0 ] && [ "$(failed_rows)" -gt 0 ]; then rc=1; fi
  exit "$rc"
}
trap on_exit EXIT
trap 'echo "device-check: terminated"; exit 143' TERM INT

# ---------------------------------------------------------------- stage 1
say "stage 1: build, GPU tests, verify + sweep, PyTorch"
begin setup
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
# The image's nvcc may sit off PATH.
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
command -v nvcc > /dev/null || { [ -x "$CUDA_HOME/bin/nvcc" ] && export PATH="$CUDA_HOME/bin:$PATH"; }
# NCCL from the image's pip wheel (lib/libnccl.so.2 only, no libnccl.so link): name it exactly.
NCCL_ARGS=()
# __path__, not __file__: nvidia.nccl may be a namespace package, whose __file__ is None.
NCCL_HINT=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2> /dev/null || true)
if [ -n "$NCCL_HINT" ] && [ -f "$NCCL_HINT/lib/libnccl.so.2" ] && [ -f "$NCCL_HINT/include/nccl.h" ]; then
  NCCL_ARGS=(-DNCCL_INCLUDE_DIR="$NCCL_HINT/include" -DNCCL_LIBRARY="$NCCL_HINT/lib/libnccl.so.2")
  export LD_LIBRARY_PATH="$NCCL_HINT/lib:$LD_LIBRARY_PATH"
fi
# nvidia-smi names the clock-limit reasons clocks_event_reasons since driver 535 and
# clocks_throttle_reasons before: take the one this driver answers.
REASONS_FIELD=""
for field in clocks_event_reasons.active clocks_throttle_reasons.active; do
  if nvidia-smi --query-gpu="$field" --format=csv,noheader > "$WORK/smi-field.txt" 2>&1 &&
    ! grep -qi "not a valid field\|invalid" "$WORK/smi-field.txt"; then
    REASONS_FIELD=$field
    break
  fi
done
version() { "$@" 2>&1 | grep -m1 -E '[0-9]+\.[0-9]+' || echo "unavailable: $1 not found"; }
GXX_VERSION=$(g++ -dumpfullversion 2> /dev/null || echo "")
{
  echo "== GPU"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  [ -n "$REASONS_FIELD" ] && nvidia-smi --query-gpu="$REASONS_FIELD" --format=csv
  echo "== versions"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | grep -m1 release || echo 'unavailable: nvcc not found') ($(command -v nvcc || echo 'not on PATH'))"
  echo "g++: $(version g++ --version)"
  echo "cmake: $(version cmake --version)"
  echo "ninja: $(version ninja --version)"
  echo "python3: $(version python3 --version)"
  echo "ncu: $(ncu --version 2>&1 | grep -m1 -i '^version' || echo 'unavailable: ncu not found')"
  echo "kernel: $(uname -r)"
  echo "clock-limit field: ${REASONS_FIELD:-none answered}"
  echo "NCCL: ${NCCL_HINT:-no nvidia.nccl wheel}"
  date -u
  echo "== steps (time, cap, exit status)"
} > "$OUT/gpu.txt" 2>&1
GPU_TXT_READY=1
cat "$OUT/gpu.txt"
if [ -n "$REASONS_FIELD" ]; then
  check "suspicion: nvidia-smi clock-limit field" PASS "this driver answers $REASONS_FIELD"
else
  check "suspicion: nvidia-smi clock-limit field" FAIL \
    "neither clocks_event_reasons nor clocks_throttle_reasons: $(head -c 200 "$WORK/smi-field.txt")"
fi
if [ ${#NCCL_ARGS[@]} -gt 0 ]; then
  check "NCCL (pip wheel)" PASS "$NCCL_HINT"
else
  check "NCCL (pip wheel)" SKIP "no nvidia.nccl with lib/libnccl.so.2 and include/nccl.h: TP collectives modelled"
fi
finish setup 0

begin build
BUILD_OK=0
missing=()
command -v nvcc > /dev/null || missing+=("nvcc not on PATH (nor at $CUDA_HOME/bin/nvcc)")
command -v cmake > /dev/null || missing+=("cmake not on PATH")
command -v ninja > /dev/null || missing+=("ninja not on PATH")
[ -n "$GXX_VERSION" ] || missing+=("g++ not on PATH")
if [ ${#missing[@]} -gt 0 ]; then
  check build FAIL "$(IFS=';'; echo "${missing[*]}")"
  finish build 1
else
  # shellcheck disable=SC2086
  timeout "$(cap build)" bash -c '
    cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DFUSEBENCH_WITH_CUDA=ON -DFUSEBENCH_WITH_MPI=OFF -DFUSEBENCH_WITH_DNNL=OFF "$@" &&
      cmake --build build-device -j16 --target '"$BUILD_TARGETS" _ "${NCCL_ARGS[@]}" \
    > "$OUT/build-and-test.log" 2>&1
  rc=$?
  finish build "$rc"
  cache=build-device/CMakeCache.txt
  if [ "$rc" -ne 0 ]; then
    tail -40 "$OUT/build-and-test.log"
    hint="see build-and-test.log"
    grep -q "unsupported GNU version" "$OUT/build-and-test.log" &&
      hint="nvcc refuses g++ $GXX_VERSION (unsupported GNU version)"
    pass_fail build "$rc" "cut by its $(step_cap build) s cap" "$hint"
  elif ! grep -q '^FUSEBENCH_WITH_CUDA:BOOL=ON' "$cache" 2> /dev/null; then
    check build FAIL "FUSEBENCH_WITH_CUDA is OFF (or absent) in $cache"
  elif ! grep -q "fusebench: CUDA=ON" "$OUT/build-and-test.log"; then
    check build FAIL "CMake found no CUDA compiler: fusebench: CUDA=OFF ($(grep -m1 '^CMAKE_CUDA_COMPILER' "$cache" || echo 'CMAKE_CUDA_COMPILER unset'))"
  else
    BUILD_OK=1
    for t in $BUILD_TARGETS; do
      [ -x "build-device/bin/$t" ] || {
        check build FAIL "build-device/bin/$t was not built"
        BUILD_OK=0
      }
    done
    [ "$BUILD_OK" -eq 1 ] && check build PASS "$(grep -m1 -o 'CUDA=ON.*' "$OUT/build-and-test.log")"
    grep -q "CUPTI=ON" "$OUT/build-and-test.log" || check "build: CUPTI" FAIL "CUPTI=OFF: no counters"
    if ldd build-device/bin/fusebench 2>&1 | grep "not found"; then
      echo "MISSING LIBRARIES (add their .debs to scripts/fetch-device-deps.sh)"
      check libraries FAIL "ldd: a library is not found (see build-and-test.log)"
      BUILD_OK=0
    fi
  fi
fi
if [ -n "$GXX_VERSION" ]; then
  major=${GXX_VERSION%%.*}
  note="g++ $GXX_VERSION$([ "$major" -ge 13 ] && echo ' (13 or newer, as suspected)')"
  case "$BUILD_OK" in
    1) check "suspicion: g++ version" PASS "$note: the CUDA build passed with it" ;;
    *) check "suspicion: g++ version" FAIL "$note: the build did not pass (build row)" ;;
  esac
else
  check "suspicion: g++ version" FAIL "no g++ on PATH"
fi

# run_gtests STEP ITEMS...: one process per item (BINARY[:GTEST_FILTER], default *Gpu*), one at
# a time (the DRAM test reads device-wide counters), all under the step's cap; a test that fails
# or throws is a FAIL row of its own (the build log's Google Test lines) and the next one runs.
run_gtests() {
  local step=$1 item t filter t_end t_left
  shift
  begin "$step"
  t_end=$(($(date +%s) + $(cap "$step")))
  for item in "$@"; do
    t=${item%%:*}
    filter='*Gpu*'
    [ "$item" != "$t" ] && filter=${item#*:}
    t_left=$((t_end - $(date +%s)))
    if [ "$t_left" -le 1 ]; then
      echo "$step: no time left for $t ($filter)" >> "$OUT/build-and-test.log"
      check "$t $filter (process)" SKIP "no time left in the step's cap ($step)"
      continue
    fi
    {
      echo "=== $t --gtest_filter='$filter'"
      timeout "$t_left" "build-device/bin/$t" --gtest_filter="$filter" --gtest_color=no 2>&1
      echo "$t exit: $?"
    } >> "$OUT/build-and-test.log"
  done
  finish "$step" 0
}
# run_sweep STEP ROW REPORT ARGS...: one fusebench run under the step's cap, its console kept.
run_sweep() {
  local step=$1 row=$2 report=$3
  shift 3
  begin "$step"
  timeout "$(cap "$step")" build-device/bin/fusebench --report="$WORK/$report" "$@" \
    > "$WORK/$report.console.txt" 2>&1
  local rc=$?
  finish "$step" "$rc"
  pass_fail "$row" "$rc" "cut by its cap" "$FUSEBENCH_EXIT1"
  grep -E "verif|error|FAIL|refused|left out" "$WORK/$report.console.txt" | head -12
}

if [ "$BUILD_OK" -eq 1 ]; then
  # The newest, riskiest paths first, so whatever cuts the check their answers are in.
  # shellcheck disable=SC2086
  run_gtests "GPU tests: GpuQuant" $GPU_TESTS_QUANT
  # shellcheck disable=SC2086
  run_gtests "GPU tests: GpuMoe" $GPU_TESTS_MOE
  # shellcheck disable=SC2086
  run_sweep "quantized sweep (verify)" "quantized sweep: fp8/int8 verify" report-quant.json \
    --verify $QUANT_SWEEP_ARGS
  # shellcheck disable=SC2086
  run_sweep "moe sweep (verify)" "moe sweep: verify" report-moe.json --verify $MOE_SWEEP_ARGS
  # Then the bf16 tests, test_tp first (the only tests of the overlap lanes, RMSNorm and the
  # delay kernel).
  # shellcheck disable=SC2086
  run_gtests "GPU tests (bf16)" $GPU_TESTS_BF16
  grep -E "^\[ +(FAILED|SKIPPED) +\] [^ ]+ \(|exit: " "$OUT/build-and-test.log" | tail -25

else
  for s in "GPU tests" "quantized sweep: fp8/int8 verify" "moe sweep: verify"; do
    check "$s" SKIP "no CUDA build (build row)"
  done
fi

# Stage 1's answers, written before stage 2 starts: the quantized and moe sweeps' summaries, the
# table.
begin "summary (stage 1)"
{
  for r in report-quant report-moe; do # in logs.tar.gz: $OUT holds 8 files
    [ -s "$WORK/$r.json" ] && python3 scripts/summarize_report.py "$WORK/$r.json"
  done
  echo "##### stage 1 checks"
  table
} > "$WORK/summary-stage1.txt" 2>&1
cp "$WORK/summary-stage1.txt" "$OUT/summary.txt"
bundle
finish "summary (stage 1)" 0
tail -40 "$OUT/summary.txt"

# ---------------------------------------------------------------- stage 2
say "stage 2: the bf16 sweep, PyTorch, TP pipelines, blocks, family sweep, ncu"
if [ "$BUILD_OK" -ne 1 ]; then
  for s in "sweep: verify + counters + timing" "PyTorch F.linear baseline" "TP pipelines" \
    "blocks on the GPU" "family sweep" ncu; do check "$s" SKIP "no CUDA build"; done
  exit 1
fi
begin "sweep (verify, counters, 4 regimes)"
# shellcheck disable=SC2086
timeout "$(cap "sweep (verify, counters, 4 regimes)")" build-device/bin/fusebench --verify \
  --report="$OUT/report.json" $SWEEP_ARGS > "$WORK/bench-console.txt" 2>&1
rc=$?
finish "sweep (verify, counters, 4 regimes)" "$rc"
# The clocks right after the sweep (light-load clocks decide whether eager decode samples count
# as throttled).
nvidia-smi --query-gpu="clocks.sm,clocks.max.sm,${REASONS_FIELD:+$REASONS_FIELD,}power.draw,temperature.gpu" \
  --format=csv > "$WORK/gpu-after-sweep.txt" 2>&1
pass_fail "sweep: verify + counters + timing" "$rc" \
  "cut by its cap; report.json holds every entry finished" "$FUSEBENCH_EXIT1"
grep -E "^fusebench|verif|error|FAIL|unavailable" "$WORK/bench-console.txt" | head -12

begin "PyTorch F.linear"
# shellcheck disable=SC2086
timeout "$(cap "PyTorch F.linear")" python3 scripts/torch_linear_baseline.py --out "$WORK/torch.json" \
  $TORCH_ARGS > "$WORK/torch.log" 2>&1
rc=$?
finish "PyTorch F.linear" "$rc"
pass_fail "PyTorch F.linear baseline" "$rc"
# The open questions of the first run, from the bf16 sweep and the GPU tests' log.
python3 scripts/device_suspicions.py --report "$OUT/report.json" --build-log "$OUT/build-and-test.log" \
  >> "$CHECKS" 2> "$WORK/suspicions.err" || check "suspicion rows" FAIL "$(head -c 200 "$WORK/suspicions.err")"

run_bench() { # run_bench STEP ROW REPORT ARGS...: one fusebench run under its cap
  local step=$1 row=$2 report=$3
  shift 3
  if [ "$(left)" -le 3 ]; then
    check "$row" SKIP "no time left before the deadline"
    return
  fi
  begin "$step"
  timeout "$(cap "$step")" build-device/bin/fusebench --report="$OUT/$report" "$@" \
    >> "$WORK/bench-console.txt" 2>&1
  local rc=$?
  finish "$step" "$rc"
  pass_fail "$row" "$rc" "" "$FUSEBENCH_EXIT1"
}
# shellcheck disable=SC2086
run_bench "TP pipelines" "TP pipelines" report-tp.json $TP_ARGS
# shellcheck disable=SC2086
run_sweep "MoE TP/EP (modelled)" "MoE TP/EP: verify (modelled)" report-tp-moe.json --verify $TP_MOE_ARGS
# shellcheck disable=SC2086
run_bench blocks "blocks on the GPU" report-blocks.json $BLOCKS_ARGS
# shellcheck disable=SC2086
run_bench "family sweep" "family sweep (bias, MoE)" report-families.json $FAMILY_ARGS
[ -s "$OUT/report-families.json" ] &&
  python3 scripts/device_suspicions.py --report "$OUT/report-families.json" |
  sed 's/^suspicion: /suspicion (families): /' | grep -v "delay kernel" >> "$CHECKS"

if ! command -v ncu > /dev/null; then
  check ncu SKIP "ncu not on PATH"
elif [ "$(left)" -le 5 ]; then
  check ncu SKIP "no time left before the deadline"
else
  begin ncu
  : > "$WORK/ncu.csv"
  n_end=$(($(date +%s) + $(cap ncu)))
  for spec in $NCU_SPECS; do
    IFS=/ read -r op variant tokens <<< "$spec"
    n_left=$((n_end - $(date +%s)))
    if [ "$n_left" -le 2 ]; then
      check "ncu $spec" SKIP "no time left in the step's cap"
      continue
    fi
    echo "# $op/$variant/model:llama3-8b/tokens:$tokens" >> "$WORK/ncu.csv"
    timeout "$n_left" ncu --clock-control none --csv --nvtx --nvtx-include "fusebench@region/" \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
      build-device/bin/fusebench-region --op="$op" --variant="$variant" --model=llama3-8b \
      --tokens="$tokens" --iterations=1 >> "$WORK/ncu.csv" 2>&1
    pass_fail "ncu $spec" $?
  done
  finish ncu 0
fi
exit 0 # on_exit turns FAIL rows into exit 1
