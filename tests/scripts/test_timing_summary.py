#!/usr/bin/env python3
"""scripts/timing_summary.py (the device check's timing table) on a synthetic GPU report: per
fixture the drops, the stop reason and the speedup interval; the throttle reference; the
verification of the stride-0 strided-batched gate_up."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import timing_summary  # noqa: E402

REPORT = {
    "context": {
        "timing": {"sm_clock": {"reference": "clock under load, measured with the ceilings",
                                "reference_mhz": 1605.0, "default_mhz": 1980.0,
                                "throttle_below_mhz": 1203.75, "probe_window_ns": 10016.0}},
        "ceilings": {"sm_clock_under_load": {"median_mhz": 1605.0, "min_mhz": 1410.0,
                                             "max_mhz": 1980.0, "probes": 180}},
        "verification": [
            {"op": "gate_up", "variant": "batched", "model": "llama3-8b", "tokens": 37,
             "dtype": "bf16", "ok": True,
             "comparisons": [{"output": "out", "against": "split", "max_abs_error": 0.0078}]},
            {"op": "qkv", "variant": "fused", "model": "llama3-8b", "tokens": 37, "ok": True},
            {"op": "qkv", "variant": "grouped", "model": "llama3-8b", "tokens": 37, "dtype": "bf16",
             "ok": True, "comparisons": [{"output": "q", "against": "split"}]}]},
    "benchmarks": [
        {"name": "qkv/split/model:llama3-8b/tokens:16/tp:1/dtype:bf16/timing:batch/iterations:1/manual_time",
         "run_type": "iteration", "variant": "split", "speedup_baseline": "split", "samples": 120.0,
         "samples_dropped_throttled": 0.0, "samples_dropped_block_timeout": 0.0,
         "timing_stop": "converged", "sm_clock_min_mhz": 1590.0, "sm_clock_max_mhz": 1980.0},
        {"name": "qkv/grouped/model:llama3-8b/tokens:16/tp:1/dtype:bf16/timing:batch/iterations:1/manual_time",
         "run_type": "iteration", "variant": "grouped", "speedup_baseline": "split", "samples": 118.0,
         "samples_dropped_throttled": 2.0, "samples_dropped_block_timeout": 37.0,
         "sm_clock_min_mhz": 1500.0, "sm_clock_max_mhz": 1980.0, "sm_clock_all_min_mhz": 900.0,
         "sm_clock_all_max_mhz": 1980.0,
         "runs_per_sample": 1.0, "timing_rounds": 160.0,
         "timing_stop": "timed_out", "speedup": 1.512, "speedup_ci_low": 1.48,
         "speedup_ci_high": 1.55, "speedup_pairs": 117.0},
        {"name": "qkv/fused/model:llama3-8b/tokens:16/tp:1/dtype:bf16/timing:batch/iterations:1/manual_time",
         "run_type": "iteration", "variant": "fused", "error_occurred": True,
         "error_message": "no valid sample: 0 throttled, 40 blocking-kernel timeouts"},
    ],
}


# Google Test output of two binaries as device-check.sh writes it: a pass, a skip with its reason,
# a failure, a parameterised failure, then a test cut by the timeout.
GTEST_LOG = """=== test_timing --gtest_filter='*Gpu*'
[ RUN      ] TimingGpu.ClockProbeAndGraphReplay
[       OK ] TimingGpu.ClockProbeAndGraphReplay (12 ms)
[ RUN      ] TimingGpu.OneLaunchVariantsEqualSplit
../tests/test_timing.cpp:233: Skipped
needs a CUDA device: no NVIDIA GPU

[  SKIPPED ] TimingGpu.OneLaunchVariantsEqualSplit (0 ms)
[ RUN      ] TimingGpu.GraphReplayOfGroupedAndBatchedVariantsRewritesOutputs
../tests/test_timing.cpp:210: Failure
Expected equality of these values:
[  FAILED  ] TimingGpu.GraphReplayOfGroupedAndBatchedVariantsRewritesOutputs (40 ms)
[ RUN      ] Ops/GpuCorrectness.FusedEqualsSplitAndFloat64Reference/qkv_bf16_m1
../tests/test_correctness_gpu.cpp:25: Failure
Value of: r.ok
[  FAILED  ] Ops/GpuCorrectness.FusedEqualsSplitAndFloat64Reference/qkv_bf16_m1, where GetParam() = 4-byte object <00-00 00-00> (3 ms)
[  FAILED  ] 2 tests, listed below:
[  FAILED  ] TimingGpu.GraphReplayOfGroupedAndBatchedVariantsRewritesOutputs
test_timing exit: 1
=== test_counters --gtest_filter='*Gpu*'
[ RUN      ] GpuCounterPasses.DramBytesCoverTheWeights
test_counters exit: 124
=== test_families --gtest_filter='*Gpu*'
test_families exit: 127
"""


def run_main(argv):
    out = io.StringIO()
    old = sys.argv
    sys.argv = ["timing_summary.py"] + argv
    try:
        with contextlib.redirect_stdout(out):
            rc = timing_summary.main()
    finally:
        sys.argv = old
    return rc, out.getvalue()


class TimingSummaryTest(unittest.TestCase):
    def run_summary(self, report):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(report, f)
        try:
            rc, text = run_main([f.name])
        finally:
            os.unlink(f.name)
        self.assertEqual(rc, 0)
        return text

    def test_prints_drops_stop_and_intervals_per_fixture(self):
        text = self.run_summary(REPORT)
        grouped = next(l for l in text.splitlines() if "qkv/grouped" in l)
        self.assertRegex(grouped, r"118\s+2\s+37\s+1\s+160 timed_out 1\.512 \[1\.480, 1\.550\] n=117")
        split = next(l for l in text.splitlines() if "qkv/split" in l)
        self.assertIn("1590-1980", split)
        self.assertNotIn("(all", split)  # no throttled sample: one range
        self.assertIn("1500-1980 (all 900-1980)", grouped)
        self.assertIn("FAILED: no valid sample: 0 throttled, 40 blocking-kernel timeouts", text)
        self.assertIn("reference clock under load, measured with the ceilings = 1605 MHz", text)
        self.assertIn("samples below 1204 MHz dropped", text)
        self.assertIn("clock probe window: 10016 ns", text)
        self.assertIn("verify gate_up/batched llama3-8b tokens=37 bf16: OK", text)
        self.assertIn("stride-0 strided-batched GEMM", text)
        self.assertNotIn("qkv/fused llama3-8b", text)  # only the one-launch variants
        # A comparison without its error reads n/a, never 0.
        self.assertIn("verify qkv/grouped llama3-8b tokens=37 bf16: OK (1 comparisons, max abs error n/a)", text)

    def test_blocks_show_each_blocks_speedup_and_the_note(self):
        report = {"benchmarks": [
            {"name": "qkv/fused/x/timing:batch", "variant": "fused", "speedup_baseline": "split",
             "samples": 40.0, "timing_stop": "blocks_disagree", "speedup": 1.1,
             "speedup_ci_low": 1.0, "speedup_ci_high": 1.2, "speedup_pairs": 40.0,
             "timing_blocks": 5.0, "speedup_blocks": [1.05, 1.1, 1.12, 1.09, 1.15]},
            {"name": "qkv/fused/y/timing:batch", "variant": "fused", "speedup_baseline": "split",
             "samples": 9.0, "timing_stop": "timed_out", "timing_blocks": 1.0,
             "timing_blocks_note": "5 blocks asked, but a round takes 0.3 s"}]}
        text = self.run_summary(report)
        self.assertIn("speedup per block: 1.050 1.100 1.120 1.090 1.150", text)
        self.assertIn("timing_blocks_note: 5 blocks asked, but a round takes 0.3 s", text)

    def test_missing_values_are_na_not_zero(self):
        report = {"benchmarks": [{"name": "qkv/fused/x/timing:eager", "variant": "fused",
                                  "samples": 10.0, "timing_stop": "timed_out"}]}
        text = self.run_summary(report)
        line = next(l for l in text.splitlines() if l.startswith("qkv/fused"))
        self.assertIn("n/a", line)
        self.assertIn("throttle rule: none", text)
        self.assertIn("not in the verification", text)


class CheckTableTest(unittest.TestCase):
    def test_gtest_results_per_test(self):
        rows = timing_summary.gtest_checks(GTEST_LOG)
        status = {name: st for name, st, _ in rows}
        detail = {name: d for name, _, d in rows}
        self.assertEqual(status["TimingGpu.ClockProbeAndGraphReplay"], "PASS")
        self.assertEqual(status["TimingGpu.OneLaunchVariantsEqualSplit"], "SKIP")
        self.assertIn("needs a CUDA device: no NVIDIA GPU", detail["TimingGpu.OneLaunchVariantsEqualSplit"])
        self.assertIn("test_timing.cpp:233", detail["TimingGpu.OneLaunchVariantsEqualSplit"])
        name = "TimingGpu.GraphReplayOfGroupedAndBatchedVariantsRewritesOutputs"
        self.assertEqual(status[name], "FAIL")
        self.assertIn("test_timing.cpp:210: Expected equality", detail[name])
        param = "Ops/GpuCorrectness.FusedEqualsSplitAndFloat64Reference/qkv_bf16_m1"
        self.assertEqual(status[param], "FAIL")
        self.assertEqual(status["GpuCounterPasses.DramBytesCoverTheWeights"], "FAIL")
        self.assertIn("cut by the timeout, exit 124", detail["GpuCounterPasses.DramBytesCoverTheWeights"])
        # A binary that printed no test at all still fails; one whose tests failed is not doubled.
        self.assertEqual(status["test_families (process)"], "FAIL")
        self.assertNotIn("test_timing (process)", status)
        self.assertNotIn("test_counters (process)", status)
        # The "listed below" repeats are not extra rows.
        self.assertEqual(sum(1 for r in rows if r[0] == name), 1)

    def test_table_with_the_steps(self):
        with tempfile.TemporaryDirectory() as d:
            log, checks = os.path.join(d, "build.log"), os.path.join(d, "checks.txt")
            with open(log, "w") as f:
                f.write(GTEST_LOG)
            with open(checks, "w") as f:
                f.write("build\tPASS\t\nsweep: verify + counters + timing\tFAIL\texit 124: cut\n"
                        "ncu\tSKIP\tncu not found\n")
            rc, text = run_main(["--checks", checks, "--build-log", log])
        self.assertEqual(rc, 0)
        lines = text.splitlines()
        self.assertRegex(lines[0], r"^check +result +detail$")
        self.assertRegex(lines[1], r"^build +PASS")
        self.assertRegex(next(l for l in lines if l.startswith("sweep")), r"FAIL +exit 124: cut")
        self.assertRegex(next(l for l in lines if l.startswith("ncu")), r"SKIP +ncu not found")
        self.assertEqual(lines[-1], "checks: 2 PASS, 5 FAIL, 2 SKIP")

    def test_missing_files_are_failures(self):
        rc, text = run_main(["--checks", "/nonexistent/checks.txt"])
        self.assertEqual(rc, 0)
        self.assertIn("FAIL", text)
        self.assertIn("cannot read", text)


if __name__ == "__main__":
    unittest.main()
