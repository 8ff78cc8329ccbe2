#!/usr/bin/env bash
# cmake/OpenBLAS.cmake's cblas_sbgemm check (issue 21 item 6): it named the INTERFACE target
# fusebench_openblas in CMAKE_REQUIRED_LIBRARIES, so try_compile linked -lfusebench_openblas and
# the check failed everywhere. Configured alone (tests/cmake/sbgemm) without pkg-config
# (CMAKE_DISABLE_FIND_PACKAGE_PkgConfig, PKG_CONFIG_EXECUTABLE unset in a fresh cache):
#   1. a small OpenBLAS stand-in built here that exports cblas_sbgemm: found, through find_library;
#   2. the same without the symbol: not found;
#   3. the system's OpenBLAS without and with pkg-config: the answer matches whether the library
#      the check linked exports cblas_sbgemm (nm -D). Debian 12's 0.3.21 declares it in cblas.h
#      and does not export it, so there the answer is OFF, for that reason.
# Usage: test_sbgemm_check.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
expect() { # expect WHAT WANT GOT
  if [ "$2" = "$3" ]; then echo "ok: $1: $3"; else
    echo "FAIL: $1: want $2, got $3"
    fail=1
  fi
}
configure() { # configure NAME [cmake args...] -> prints result.txt's sbgemm value
  local name=$1
  shift
  cmake -S "$src/tests/cmake/sbgemm" -B "$work/$name" -DFUSEBENCH_SOURCE_DIR="$src" "$@" \
    > "$work/$name.log" 2>&1 || {
    cat "$work/$name.log" >&2
    echo "configure $name failed" >&2
    return 1
  }
  cat "$work/$name/result.txt" > "$work/$name.result"
  sed -n 's/^sbgemm=//p' "$work/$name.result"
}
field() { sed -n "s/^$2=//p" "$work/$1.result"; }

# An OpenBLAS stand-in: cblas.h and libopenblas.so, with and without cblas_sbgemm.
for variant in with without; do
  p="$work/blas-$variant"
  mkdir -p "$p/include" "$p/lib"
  {
    echo '#pragma once'
    echo '#ifdef __cplusplus'
    echo 'extern "C" {'
    echo '#endif'
    echo 'void cblas_sgemm(void);'
    echo 'void cblas_sbgemm(void);'
    echo '#ifdef __cplusplus'
    echo '}'
    echo '#endif'
  } > "$p/include/cblas.h"
  body='extern "C" void cblas_sgemm(void) {}'
  [ "$variant" = with ] && body="$body extern \"C\" void cblas_sbgemm(void) {}"
  echo "$body" > "$p/blas.cpp"
  c++ -shared -fPIC -o "$p/lib/libopenblas.so" "$p/blas.cpp"
done
no_pkg=(-DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON)
got=$(configure stand-in-with "${no_pkg[@]}" -DCMAKE_PREFIX_PATH="$work/blas-with")
expect "stand-in exporting cblas_sbgemm, no pkg-config" ON "$got"
expect "found without pkg-config" "find_library: $work/blas-with/lib/libopenblas.so" \
  "$(field stand-in-with found_by)"
pkg_config=$(grep -c '^PKG_CONFIG_EXECUTABLE' "$work/stand-in-with/CMakeCache.txt" || true)
expect "PKG_CONFIG_EXECUTABLE unset in that cache" 0 "$pkg_config"
got=$(configure stand-in-without "${no_pkg[@]}" -DCMAKE_PREFIX_PATH="$work/blas-without")
expect "stand-in without cblas_sbgemm, no pkg-config" OFF "$got"

# The system's OpenBLAS: the check must agree with the library it linked.
exports() { nm -D --defined-only "$1" 2>/dev/null | grep -qw cblas_sbgemm && echo ON || echo OFF; }
got=$(configure system-no-pkg-config "${no_pkg[@]}")
lib=$(field system-no-pkg-config library)
expect "system OpenBLAS without pkg-config ($lib)" "$(exports "$lib")" "$got"
if command -v pkg-config > /dev/null && pkg-config --exists openblas; then
  got=$(configure system-pkg-config)
  lib=$(pkg-config --variable=libdir openblas)/libopenblas.so
  expect "system OpenBLAS through pkg-config ($lib)" "$(exports "$lib")" "$got"
  expect "found by pkg-config" pkg-config "$(field system-pkg-config found_by)"
fi
exit "$fail"
