#!/usr/bin/env bash
# The GPU check, in ONE call of the device tool (under 8 minutes on an H200):
#   here:  scripts/fetch-device-deps.sh          (downloads the .debs into .deps/)
#   then:  device run: command="bash scripts/device-check.sh", carry=[".deps"], timeout_s=560
# It builds (the GPU box has nvcc/cmake/ninja but none of our libraries: they come from .deps),
# runs the GPU tests, verifies every variant, counts launches and DRAM bytes, times a
# representative sweep, cross-checks with ncu and PyTorch, and writes everything under $OUT
# (at most 8 files come back: gpu.txt, build-and-test.log, report.json, report-tp.json,
# bench-console.txt, ncu.csv, torch.json, summary.txt). The short table printed last is what the reply shows.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/fusebench-device-out}"
mkdir -p "$OUT"
START=$(date +%s)
step() { echo "=== [$(($(date +%s) - START))s] $*"; }

step "dependencies from .deps"
DEPS=/tmp/fusebench-deps
mkdir -p "$DEPS"
for f in .deps/*.deb; do dpkg -x "$f" "$DEPS"; done
export CMAKE_PREFIX_PATH="$DEPS/usr:$DEPS/usr/lib/x86_64-linux-gnu/cmake"
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
export PKG_CONFIG_SYSROOT_DIR="$DEPS"
export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/openblas-pthread/pkgconfig:$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig"
# Where the CUDA libraries live on the GPU box (recorded in the log for docs/device.md).
for d in /usr/local/cuda*/lib64 /usr/local/cuda*/extras/CUPTI/lib64; do [ -d "$d" ] && echo "cuda libs: $d"; done
python3 -c "import nvidia, os; print('python nvidia pkgs:', os.path.dirname(nvidia.__path__[0]))" 2>/dev/null
NCCL_HINT=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null || true)

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv
  nvcc --version | tail -2
  date -u
} > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

step "configure + build"
{
  cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DFUSEBENCH_WITH_MPI=OFF ${NCCL_HINT:+-DNCCL_ROOT=$NCCL_HINT} &&
  cmake --build build-device -j16
} > "$OUT/build-and-test.log" 2>&1 || { tail -40 "$OUT/build-and-test.log"; echo "BUILD FAILED"; exit 1; }

step "GPU tests (ctest)"
ctest --test-dir build-device -j4 --output-on-failure >> "$OUT/build-and-test.log" 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/build-and-test.log" | tail -15

step "verify + counters + timed sweep (qkv, gate_up; all four regimes)"
SWEEP_ARGS=${SWEEP_ARGS:---models=qwen3-0.6b,llama3-8b --ops=qkv,gate_up --tokens=1,4,16,64,256,1024,4096,16384 --timing=cold,batch,eager,graph}
# shellcheck disable=SC2086
timeout 240 build-device/bin/fusebench --verify --report="$OUT/report.json" $SWEEP_ARGS \
  > "$OUT/bench-console.txt" 2>&1
echo "fusebench exit: $?"
grep -E "verif|error|FAIL|unavailable" "$OUT/bench-console.txt" | head -10

step "TP pipelines: tp=1 real, tp>1 modelled (one GPU)"
# shellcheck disable=SC2086
timeout 90 build-device/bin/fusebench --ops=tp_attn,tp_mlp --tp=1,2,4,8 --models=llama3-8b \
  --tokens=1,64,1024,8192 --timing=batch --collective-sweep --report="$OUT/report-tp.json" \
  >> "$OUT/bench-console.txt" 2>&1
echo "fusebench (tp) exit: $?"

step "ncu cross-check (launches and DRAM bytes of one region each)"
if command -v ncu >/dev/null; then
  : > "$OUT/ncu.csv"
  for op in qkv gate_up; do
    for variant in split fused; do
      for tokens in 1 4096; do
        echo "# $op/$variant/model:llama3-8b/tokens:$tokens" >> "$OUT/ncu.csv"
        timeout 60 ncu --clock-control none --csv --launch-skip-before-match 0 \
          --nvtx --nvtx-include "fusebench@region/" \
          --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
          build-device/bin/fusebench-region --op=$op --variant=$variant --model=llama3-8b \
          --tokens=$tokens --iterations=1 >> "$OUT/ncu.csv" 2>&1
      done
    done
  done
else
  echo "ncu not found" > "$OUT/ncu.csv"
fi

step "PyTorch F.linear baseline"
timeout 120 python3 scripts/torch_linear_baseline.py --out "$OUT/torch.json" > /dev/null 2>&1 ||
  echo "torch baseline failed"

step "summary"
{
  python3 scripts/summarize_report.py "$OUT/report.json" --torch "$OUT/torch.json" --ncu "$OUT/ncu.csv"
  python3 scripts/summarize_report.py "$OUT/report-tp.json"
} | tee "$OUT/summary.txt"
step "done"
