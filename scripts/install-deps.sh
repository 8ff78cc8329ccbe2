#!/usr/bin/env bash
# Installs what fusebench needs to build and test, from Debian's packages and PyPI. Idempotent:
# does nothing (and needs no network) when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config git python3 python3-pip
          libbenchmark-dev libgtest-dev libgmock-dev nlohmann-json3-dev libopenblas-dev libcli11-dev
          libdnnl-dev
          libopenmpi-dev openmpi-bin
          libbenchmark-tools clang-14 libclang-rt-14-dev shellcheck)
# libdnnl-dev: oneDNN, the CPU backend's GEMMs for M >= 2 and bf16 (docs/cpu-gemm.md).
# libbenchmark-tools: Google Benchmark's compare.py (a test loads our report in it).
# clang-14 + libclang-rt-14-dev: libFuzzer and the ASan/UBSan build scripts/test.sh runs.
# shellcheck: lints the workflow's run: scripts (tests/workflow/lint_workflows.py).
# chromium renders the HTML report in a test; FUSEBENCH_NO_CHROMIUM=1 leaves it out (the test
# then skips, saying why).
[ "${FUSEBENCH_NO_CHROMIUM:-0}" = 1 ] || packages+=(chromium)
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

if [ -f scripts/requirements.txt ]; then
  if ! python3 -c "import matplotlib, scipy, yaml, check_jsonschema, safetensors, transformers" 2>/dev/null; then
    echo "install-deps: installing Python requirements"
    # Not fatal: a GPU box without network still builds and measures; the charts then say why
    # they are missing.
    python3 -m pip install -q -r scripts/requirements.txt 2>/dev/null ||
      python3 -m pip install -q --break-system-packages -r scripts/requirements.txt ||
      echo "install-deps: WARNING: could not install scripts/requirements.txt (charts need matplotlib)"
  fi
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: no CUDA toolkit found; the CPU backend will be built alone"
fi
