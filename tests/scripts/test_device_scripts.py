#!/usr/bin/env python3
"""scripts/device_suspicions.py on synthetic reports (each suspicion's PASS, FAIL and SKIP), and
scripts/device_plan.py's refusals (an estimate over its cap, stage 1 over 240 s) on this build.

    test_device_scripts.py SOURCE_DIR FUSEBENCH_BIN BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

SRC, BIN, BUILD = sys.argv[1:4]
del sys.argv[1:4]


def entry(variant, regime, **kw):
    name = f"qkv/{variant}/model:m/layer:attention/tokens:1/tp:1/dtype:bf16/weights:random/timing:{regime}"
    e = {"name": name + "/iterations:1/manual_time", "run_name": name, "run_type": "iteration",
         "variant": variant, "timing": regime, "launches": 1, "launches_vs_model": 1}
    if regime == "graph":
        e["graph_launches"] = 1
    e.update(kw)
    return e


class Suspicions(unittest.TestCase):
    def rows(self, benchmarks, build_log=None):
        with tempfile.TemporaryDirectory() as d:
            report = os.path.join(d, "r.json")
            with open(report, "w") as f:
                json.dump({"benchmarks": benchmarks}, f)
            cmd = [sys.executable, os.path.join(SRC, "scripts/device_suspicions.py"), "--report", report]
            if build_log is not None:
                log = os.path.join(d, "log")
                with open(log, "w") as f:
                    f.write(build_log)
                cmd += ["--build-log", log]
            out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        return {line.split("\t")[0]: line.split("\t")[1:] for line in out.splitlines()}

    def test_all_pass(self):
        es = [entry(v, r) for v in ("split", "grouped") for r in ("batch", "cold", "graph")]
        log = ("[ RUN      ] GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent\n"
               "global timer step: 1000 ns\n"
               "[       OK ] GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent (3 ms)\n")
        rows = self.rows(es, log)
        for name, (status, _) in rows.items():
            self.assertEqual(status, "PASS", name)
        self.assertIn("1000 ns", rows["suspicion: delay kernel accuracy (10/25 us)"][1])
        self.assertEqual(len(rows), 6)

    def test_failures_name_the_entry(self):
        es = [entry("grouped", "batch", error_occurred=True, error_message="CUBLAS_STATUS_ALLOC_FAILED"),
              entry("grouped", "cold"),
              entry("fused", "cold", launches_vs_model=2, gemm_algorithms=["algo=6 splitk=4"]),
              entry("grouped", "graph", graph_launches=None,
                    counters_unavailable={"graph_launches": "unavailable: no graph records"})]
        del es[-1]["graph_launches"]
        log = "[ RUN      ] GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent\n" \
              "[  FAILED  ] GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent (3 ms)\n"
        rows = self.rows(es, log)
        batch = rows["suspicion: grouped GEMM, timing:batch"]
        self.assertEqual(batch[0], "FAIL")
        self.assertIn("CUBLAS_STATUS_ALLOC_FAILED", batch[1])
        self.assertEqual(rows["suspicion: grouped GEMM, timing:cold"][0], "PASS")
        split_k = rows["suspicion: split-K (launches_vs_model != 1)"]
        self.assertEqual(split_k[0], "FAIL")
        self.assertIn("splitk=4", split_k[1])
        graphs = rows["suspicion: CUPTI records of captured graphs"]
        self.assertEqual(graphs[0], "FAIL")
        self.assertIn("no graph records", graphs[1])
        self.assertEqual(rows["suspicion: delay kernel accuracy (10/25 us)"][0], "FAIL")

    def test_nothing_to_judge_is_skip_with_the_reason(self):
        rows = self.rows([entry("split", "eager", launches_vs_model=None,
                                counters_unavailable={"launches_vs_model": "unavailable: no CUPTI"})])
        self.assertEqual(rows["suspicion: grouped GEMM, timing:graph"],
                         ["SKIP", "no grouped entry in timing:graph"])
        self.assertEqual(rows["suspicion: split-K (launches_vs_model != 1)"][0], "SKIP")
        self.assertIn("no CUPTI", rows["suspicion: split-K (launches_vs_model != 1)"][1])
        self.assertEqual(rows["suspicion: delay kernel accuracy (10/25 us)"][0], "SKIP")


class Plan(unittest.TestCase):
    def plan(self, steps, budget=420):
        with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
            f.write("".join("\t".join(map(str, s)) + "\n" for s in steps))
        try:
            p = subprocess.run([sys.executable, os.path.join(SRC, "scripts/device_plan.py"), f.name,
                                "--bin", BIN, "--build-dir", BUILD, "--budget", str(budget)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        finally:
            os.unlink(f.name)
        return p.returncode, p.stdout

    SWEEP = "--models=llama3-8b --ops=gate_up --tokens=1,4096 --dtypes=bf16 --timing=cold,graph --timing-max-time=0.1"

    def test_estimate_from_the_listing(self):
        rc, out = self.plan([(1, "sweep", 60, "sweep", self.SWEEP)])
        self.assertEqual(rc, 0, out)
        # llama3-8b gate_up: 2 x 14336 x 4096 bf16 weights (235 MB) per variant and token count.
        self.assertRegex(out, r"entries, 4 groups, \d+ workspaces")
        self.assertIn("plan: OK", out)

    def test_over_its_cap_or_the_stage_limit_fails(self):
        rc, out = self.plan([(1, "sweep", 2, "sweep", self.SWEEP)])
        self.assertEqual(rc, 1, out)
        self.assertIn("sweep: estimate", out)
        self.assertIn("over its cap 2 s", out)
        rc, out = self.plan([(1, "summary", 250, "summary", "")])
        self.assertEqual(rc, 1, out)
        self.assertIn("stage 1 caps 250 s over 240 s", out)
        rc, out = self.plan([(1, "summary", 200, "summary", ""), (2, "summary 2", 230, "summary", "")],
                            budget=400)
        self.assertEqual(rc, 1, out)
        self.assertIn("caps 430 s over 420 s", out)
        self.assertIn("caps 430 s over BUDGET_S 400 s", out)

    def test_gpu_tests_by_filter_at_their_measured_host_share(self):
        # BINARY:FILTER lists what the filter selects; GpuQuant's tests are sized from their timed
        # CPU run (MEASURED_TEST_S), not the 0.75 s a small GPU test is assumed to take.
        sys.path.insert(0, os.path.join(SRC, "scripts"))
        import device_plan
        quant = [n for n in device_plan.MEASURED_TEST_S if n.startswith("GpuQuant.")]
        rc, out = self.plan([(1, "quant", 200, "gtest", "test_correctness:GpuQuant.*")])
        self.assertEqual(rc, 0, out)
        self.assertIn(f"{len(quant)} GPU tests (test_correctness {len(quant)})", out)
        want = device_plan.GTEST_BINARY_S + device_plan.HOST_MARGIN * sum(
            device_plan.MEASURED_TEST_S[n] for n in quant)
        self.assertRegex(out, rf"quant\s+200\s+{round(want)}\s")
        self.assertGreater(want, device_plan.GTEST_BINARY_S + len(quant) * device_plan.GTEST_TEST_S)
        rc, out = self.plan([(1, "rest", 200, "gtest", "test_correctness:*Gpu*:-GpuQuant.*")])
        self.assertEqual(rc, 0, out)
        rest = int(re.search(r"(\d+) GPU tests", out).group(1))
        rc, out = self.plan([(1, "all", 200, "gtest", "test_correctness")])
        self.assertIn(f"{rest + len(quant)} GPU tests", out)

    def test_a_sweep_the_suite_refuses_cannot_be_estimated(self):
        rc, out = self.plan([(1, "sweep", 60, "sweep", "--models=no-such-model")])
        self.assertEqual(rc, 1, out)
        self.assertIn("cannot estimate", out)
        self.assertIn("no-such-model", out)


class TheCheck(unittest.TestCase):
    """scripts/device-check.sh --plan on this build: the newest paths first, in stage 1, each
    with its own cap, the older bf16 rows after them, and the whole plan within its limits."""

    def test_stage1_reports_quant_and_moe_first_and_fits(self):
        env = dict(os.environ, FUSEBENCH_BIN=BIN, PLAN_BUILD_DIR=BUILD)
        p = subprocess.run(["bash", os.path.join(SRC, "scripts/device-check.sh"), "--plan"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("plan: OK", p.stdout)
        lines = p.stdout.splitlines()

        def row(name):
            for i, line in enumerate(lines):
                m = re.match(r"^(\d)\s+" + re.escape(name) + r"\s+(\d+)\s+(\d+)\s", line)
                if m:
                    return i, int(m.group(1)), int(m.group(2)), int(m.group(3))
            self.fail(f"no row {name!r} in:\n{p.stdout}")

        order = ["GPU tests: GpuQuant", "GPU tests: GpuMoe", "quantized sweep (verify)",
                 "moe sweep (verify)", "GPU tests (bf16)", "sweep (verify, counters, 4 regimes)"]
        rows = [row(n) for n in order]
        self.assertEqual([r[0] for r in rows], sorted(r[0] for r in rows), p.stdout)
        for name, (_, stage, cap, est) in zip(order, rows):
            self.assertEqual(stage, 2 if name.startswith("sweep") else 1, name)
            self.assertLessEqual(est, cap, name)
        self.assertRegex(p.stdout, r"stage 1: caps (\d+) s \(limit 240\)")


if __name__ == "__main__":
    unittest.main()
