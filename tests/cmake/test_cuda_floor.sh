#!/usr/bin/env bash
# The CUDA toolkit's floor (issue 38 item 4; cmake/CudaFeatures.cmake): a toolkit older than a
# feature's floor builds the bf16 suite and says what it left out. FUSEBENCH_PRETEND_CUDA_VERSION
# pretends the version:
#   1. cmake/CudaFeatures.cmake configured alone (tests/cmake/cuda_floor) at versions either side
#      of each floor (12.5 grouped GEMM, 12.6 CUPTI Range Profiler, 12.9 fp8 scaled GEMM): what is
#      on, what is left out, and the configure warning naming it;
#   2. where nvcc is found, the real project configured at a pretended 12.4 without its tests:
#      the warning, the CUDA backend still built (FUSEBENCH_HAVE_CUDA), and neither
#      FUSEBENCH_CUDA_FP8_GEMM, FUSEBENCH_CUDA_GROUPED_GEMM nor the CUPTI sources in its build.
# Usage: test_cuda_floor.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
expect() { # expect WHAT WANT GOT
  if [ "$2" = "$3" ]; then echo "ok: $1: $3"; else
    echo "FAIL: $1: want '$2', got '$3'"
    fail=1
  fi
}
contains() { # contains WHAT NEEDLE FILE
  if grep -qF -- "$2" "$3"; then echo "ok: $1"; else
    echo "FAIL: $1: '$2' not in $3:"
    cat "$3"
    fail=1
  fi
}
lacks() { # lacks WHAT NEEDLE FILE
  if grep -qF -- "$2" "$3"; then
    echo "FAIL: $1: '$2' found in $3"
    fail=1
  else echo "ok: $1"; fi
}

# 1. The gate alone, as a 13.0 toolkit pretending each version.
for case in "12.0 OFF OFF OFF" "12.4 OFF OFF OFF" "12.5 ON OFF OFF" "12.6 ON ON OFF" \
  "12.8 ON ON OFF" "12.9 ON ON ON" "13.0 ON ON ON"; do
  read -r version grouped range_profiler fp8 <<< "$case"
  dir=$work/gate-$version
  cmake -S "$src/tests/cmake/cuda_floor" -B "$dir" -DFUSEBENCH_SOURCE_DIR="$src" \
    -DFOUND_CUDA_VERSION=13.0 -DFUSEBENCH_PRETEND_CUDA_VERSION="$version" > "$dir.log" 2>&1 || {
    cat "$dir.log"
    echo "FAIL: configure at $version"
    exit 1
  }
  field() { sed -n "s/^$1=//p" "$dir/result.txt"; }
  expect "$version: grouped GEMM" "$grouped" "$(field grouped)"
  expect "$version: CUPTI Range Profiler" "$range_profiler" "$(field range_profiler)"
  expect "$version: fp8 scaled GEMM" "$fp8" "$(field fp8)"
  contains "$version: the pretended version is said" "pretended toolkit $version" "$dir.log"
  if [ "$fp8" = OFF ]; then
    contains "$version: says it left the fp8 scaled GEMM out" \
      "CUDA $version: left out the fp8 scaled GEMM (cuBLASLt's scale modes need cuBLAS 12.9+)" \
      "$dir.log"
    contains "$version: says the bf16 suite builds" "CUDA $version: the bf16 suite builds" "$dir.log"
  else
    lacks "$version: nothing left out" "left out" "$dir.log"
  fi
done

# 2. The real project at a pretended 12.4 (only where a CUDA compiler is found).
if ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "skip: no nvcc, the real project's configure at 12.4 is not checked here"
  exit "$fail"
fi
real=$work/real
cmake -S "$src" -B "$real" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEBENCH_BUILD_TESTS=OFF \
  -DFUSEBENCH_PRETEND_CUDA_VERSION=12.4 > "$real.log" 2>&1 || {
  cat "$real.log"
  echo "FAIL: the real project does not configure at a pretended 12.4"
  exit 1
}
for item in "the grouped GEMM (cublasGemmGroupedBatchedEx needs cuBLAS 12.5+)" \
  "the CUPTI passes (the Range Profiler API needs CUPTI 12.6+)" \
  "the fp8 scaled GEMM (cuBLASLt's scale modes need cuBLAS 12.9+)"; do
  contains "real 12.4: says it left out $item" "CUDA 12.4: left out $item" "$real.log"
done
contains "real 12.4: the CUDA backend is still built" "fusebench: CUDA=ON CUPTI=OFF" "$real.log"
ninja_file=$real/build.ninja
contains "real 12.4: the bf16 CUDA backend compiled" "backends/cuda_backend.cpp" "$ninja_file"
contains "real 12.4: built with FUSEBENCH_HAVE_CUDA" "-DFUSEBENCH_HAVE_CUDA" "$ninja_file"
lacks "real 12.4: no fp8 scaled GEMM" "-DFUSEBENCH_CUDA_FP8_GEMM" "$ninja_file"
lacks "real 12.4: no grouped GEMM" "-DFUSEBENCH_CUDA_GROUPED_GEMM" "$ninja_file"
lacks "real 12.4: no CUPTI passes" "measure/range_profiler.cpp" "$ninja_file"
contains "real 12.4: the report will say why (CUPTI below its floor)" \
  "-DFUSEBENCH_CUPTI_BELOW_FLOOR" "$ninja_file"
exit "$fail"
