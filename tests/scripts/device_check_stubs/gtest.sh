#!/usr/bin/env bash
# Stand-in GPU test binary: Google Test's console output for two tests of the suite its
# --gtest_filter names (GpuQuant.*, GpuMoe.*; otherwise Gpu<binary>); test_tp also prints the
# delay kernel test's lines; in mode fail, test_correctness fails one of each suite it runs.
name=$(basename "$0")
filter='*Gpu*'
for a in "$@"; do
  case "$a" in --gtest_filter=*) filter=${a#--gtest_filter=} ;; esac
done
case "$filter" in
  GpuQuant.*) suite=GpuQuant ;;
  GpuMoe.*) suite=GpuMoe ;;
  *) suite=Gpu$name ;;
esac
echo "[==========] Running 2 tests from 1 test suite."
echo "[ RUN      ] $suite.First"
echo "[       OK ] $suite.First (5 ms)"
if [ "$name" = test_tp ]; then
  echo "[ RUN      ] GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent"
  echo "global timer step: 1000 ns"
  echo "SM clock: 1.98 then 1.98 cycles per ns"
  echo "spin of 10 us: mean 10.01 us, range [10, 10.03] us over 200 spins"
  echo "[       OK ] GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent (40 ms)"
elif [ "$name" = test_correctness ] && [ "$REHEARSAL_MODE" = fail ]; then
  echo "[ RUN      ] $suite.Second"
  echo "tests/x.cpp:1: Failure"
  echo "stand-in failure"
  echo "[  FAILED  ] $suite.Second (1 ms)"
  exit 1
else
  echo "[ RUN      ] $suite.Second"
  echo "[       OK ] $suite.Second (1 ms)"
fi
exit 0
