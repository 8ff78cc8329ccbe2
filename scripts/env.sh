# Sourced by the scripts: puts the CUDA toolkit on PATH when it is installed in the usual place.
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-12; do
    if [ -x "$d/bin/nvcc" ]; then export PATH="$d/bin:$PATH"; break; fi
  done
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# ccache where it is installed (it is not needed): rebuilds of other checkouts of the tree reuse
# the objects of unchanged files.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CUDA_COMPILER_LAUNCHER="${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
fi
