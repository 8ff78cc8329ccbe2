"""The 'not judged' contract, C++ and Python on the same entries (tests/advise/not_judged_cases.json).

The gate and the advisor share one C++ implementation (include/fusebench/evidence.hpp); the charts,
HTML page and summary use scripts/fusebench_report.py's not_judged_reason. This runs the built
fusebench-gate on a report of the cases (against itself: each time row says "not judged: LABEL
(...)" or judges it) and the Python reader on the same file, and asserts that both give every
case's expected label, hence each other's.

  test_not_judged_contract.py GATE WORKDIR
"""
import json
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import fusebench_report  # noqa: E402

GATE, WORK = sys.argv[1], sys.argv[2]


def case_name(i):
    return f"qkv/fused/model:m/layer:attention/tokens:{i + 1}/tp:1/dtype:fp32/weights:random/timing:eager/iterations:1/manual_time"


class NotJudgedContract(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(os.path.join(HERE, "not_judged_cases.json"), encoding="utf-8") as f:
            cls.cases = json.load(f)["cases"]
        benches = []
        for i, c in enumerate(cls.cases):
            b = {"name": case_name(i), "run_name": case_name(i), "run_type": "iteration",
                 "real_time": 10.0, "time_unit": "us", "iterations": 1}
            b.update(c["fields"])
            benches.append(b)
        os.makedirs(WORK, exist_ok=True)
        cls.path = os.path.join(WORK, "not_judged_cases_report.json")
        with open(cls.path, "w", encoding="utf-8") as f:
            json.dump({"context": {"backend": "cuda", "gpu_name": "NVIDIA H200"},
                       "benchmarks": benches}, f)

    def gate_labels(self):
        # Its entries are not judged by design: NOT JUDGED (exit 3), passed by --allow-unjudged.
        run = subprocess.run([GATE, self.path, self.path], capture_output=True, text=True,
                             check=False)
        self.assertEqual(run.returncode, 3, run.stdout + run.stderr)
        run = subprocess.run([GATE, self.path, self.path, "--allow-unjudged"], capture_output=True,
                             text=True, check=False)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        labels = {}
        for line in run.stdout.splitlines():
            m = re.match(r"^(\S+)\s+(\S+)\s+time\s", line)
            if not m:
                continue
            why = re.search(r"not judged: (.*) \((?:current|baseline)\)$", line)
            # "n < 6 (samples 2)" -> the label "n < 6"; "contended" stays.
            labels[m.group(2)] = why.group(1).split(" (")[0] if why else ""
        return labels

    def python_labels(self):
        report = fusebench_report.load(self.path)
        return {e.name: fusebench_report.not_judged_reason(e, e.counter("speedup_pairs")) or ""
                for e in report.entries}

    def test_both_give_every_expected_label(self):
        gate, python = self.gate_labels(), self.python_labels()
        for i, c in enumerate(self.cases):
            name = case_name(i)
            with self.subTest(fields=c["fields"]):
                self.assertIn(name, gate, "the gate printed no time row")
                self.assertIn(name, python, "the Python reader read no entry")
                self.assertEqual(gate[name], c["expect"], "C++ (the gate)")
                self.assertEqual(python[name], c["expect"], "Python (fusebench_report)")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
