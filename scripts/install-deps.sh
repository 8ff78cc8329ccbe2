#!/usr/bin/env bash
# Installs what fusebench needs, from Debian's packages and PyPI. Idempotent: does nothing (and
# needs no network) when everything is already there.
#   scripts/install-deps.sh [test|run] [--print]
#   test (default): everything to build and run the whole test suite (scripts/test.sh).
#   run: what building the binaries and a benchmark run need (scripts/bench.sh): the build
#        dependencies, MPI (the binary bootstraps multi-process TP runs with it when built with
#        it), and matplotlib for the charts; not the test tools (GoogleTest, clang-14, shellcheck,
#        chromium, Google Benchmark's compare.py).
#   --print: print the profile's Debian packages, one a line, and install nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=test print=0
for arg in "$@"; do
  case "$arg" in
    test | run) profile=$arg ;;
    --print) print=1 ;;
    *)
      echo "install-deps: unknown argument '$arg' (valid: test, run, --print)" >&2
      exit 2
      ;;
  esac
done

# Building the binaries (cmake/Dependencies.cmake): compilers, Google Benchmark, JSON, BLAS,
# CLI11, oneDNN (the CPU backend's GEMMs for M >= 2 and bf16, docs/cpu-gemm.md), and MPI.
packages=(cmake ninja-build g++ pkg-config git python3 python3-pip
          libbenchmark-dev nlohmann-json3-dev libopenblas-dev libcli11-dev libdnnl-dev
          libopenmpi-dev openmpi-bin)
if [ "$profile" = test ]; then
  # libgtest-dev, libgmock-dev: the unit tests (tests/CMakeLists.txt needs them to configure).
  # libbenchmark-tools: Google Benchmark's compare.py (a test loads our report in it).
  # clang-14 + libclang-rt-14-dev: libFuzzer and the ASan/UBSan build scripts/test.sh runs.
  # The shellcheck package lints the workflow's run: scripts (tests/workflow/lint_workflows.py).
  packages+=(libgtest-dev libgmock-dev libbenchmark-tools clang-14 libclang-rt-14-dev shellcheck)
  # chromium renders the HTML report in a test; FUSEBENCH_NO_CHROMIUM=1 leaves it out (the test
  # then skips, saying why).
  [ "${FUSEBENCH_NO_CHROMIUM:-0}" = 1 ] || packages+=(chromium)
fi
if [ "$print" = 1 ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python: the whole of scripts/requirements.txt for the tests; matplotlib alone (the charts) for a
# run. Not fatal: a GPU box without network still builds and measures; the charts then say why
# they are missing.
pip_install() {
  python3 -m pip install -q "$@" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "$@" ||
    echo "install-deps: WARNING: could not install $* (charts need matplotlib)"
}
if [ -f scripts/requirements.txt ]; then
  if [ "$profile" = test ]; then
    if ! python3 -c "import matplotlib, scipy, yaml, check_jsonschema, safetensors, transformers, ml_dtypes" 2>/dev/null; then
      echo "install-deps: installing Python requirements"
      pip_install -r scripts/requirements.txt
    fi
  elif ! python3 -c "import matplotlib" 2>/dev/null; then
    echo "install-deps: installing matplotlib (the charts)"
    pip_install "$(grep -E '^matplotlib==' scripts/requirements.txt)"
  fi
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no CUDA toolkit found; the CPU backend will be built alone"
fi
