#!/usr/bin/env bash
# Under mpirun, rank 0 alone prints --list and bad-input errors (issue 14 item 13).
# Usage: test_mpi_rank0.sh FUSEBENCH_BINARY MPIRUN [MPIRUN FLAGS...] (the flags before the binary)
set -uo pipefail
bin=$1
shift
fail=0
# stdout and stderr apart: two ranks writing one pipe can splice a stderr note into a stdout line.
errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
list=$("$@" "$bin" --backend=cpu --ops=tp_attn --variants=paired --tp=2 --tokens=3 --dtypes=fp32 \
  --list 2>"$errfile")
count=$(grep -c '^tp_attn/paired/' <<<"$list")
if [ "$count" != 1 ]; then
  echo "FAIL: --list under 2 ranks printed the fixture $count times:"
  echo "$list"
  fail=1
fi
count=$(grep -c 'fusebench: backend ' "$errfile")
if [ "$count" -gt 1 ]; then
  echo "FAIL: --list under 2 ranks announced the backend $count times:"
  cat "$errfile"
  fail=1
fi
status=0
err=$("$@" "$bin" --backend=cpu --ops=tp_attn --tp=2 --tokens=abc --list 2>&1) || status=$?
count=$(grep -c 'fusebench: error: ' <<<"$err")
if [ "$count" != 1 ]; then
  echo "FAIL: a bad value under 2 ranks was reported $count times:"
  echo "$err"
  fail=1
fi
if [ "$status" = 0 ]; then
  echo "FAIL: a bad value under 2 ranks exited 0"
  fail=1
fi
status=0
err=$("$@" "$bin" --backend=cpu --models=gpt-9 --ops=tp_attn --tp=2 --list 2>&1) || status=$?
count=$(grep -c "unknown model 'gpt-9'" <<<"$err")
if [ "$count" != 1 ]; then
  echo "FAIL: an unknown model under 2 ranks was reported $count times:"
  echo "$err"
  fail=1
fi
exit "$fail"
