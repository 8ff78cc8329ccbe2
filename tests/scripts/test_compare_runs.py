#!/usr/bin/env python3
"""scripts/compare_runs.py (do two reports of one sweep agree?): the agree rule (within the
tolerance, or intervals overlap), the count and exit status, and bad input exiting 2."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import compare_runs  # noqa: E402

NAME = "tp_mlp/{}/model:qwen3-0.6b/layer:dense/tokens:{}/tp:2/dtype:fp32/weights:random/comm:inprocess/timing:eager/iterations:1/manual_time"


def entry(variant, tokens, speedup, low, high):
    return {"name": NAME.format(variant, tokens), "run_type": "iteration", "speedup": speedup,
            "speedup_ci_low": low, "speedup_ci_high": high}


def report(*entries):
    # The baseline has no speedup and is left out of the comparison.
    return {"context": {}, "benchmarks": [{"name": NAME.format("naive", 1), "run_type": "iteration"},
                                          *entries]}


class CompareRuns(unittest.TestCase):
    def run_on(self, first, second, *extra):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, r in enumerate((first, second)):
                p = os.path.join(d, f"r{i}.json")
                with open(p, "w", encoding="utf-8") as f:
                    f.write(r if isinstance(r, str) else json.dumps(r))
                paths.append(p)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = compare_runs.main([*paths, *extra])
            return code, out.getvalue(), err.getvalue()

    def test_close_or_overlapping_agree(self):
        a = report(entry("paired", 1, 1.00, 0.98, 1.02), entry("overlap", 1, 0.80, 0.70, 0.90))
        # 3% apart with disjoint intervals; 12% apart with overlapping ones: both agree.
        b = report(entry("paired", 1, 1.03, 1.025, 1.04), entry("overlap", 1, 0.90, 0.85, 0.95))
        code, out, _ = self.run_on(a, b)
        self.assertEqual(code, 0, out)
        self.assertIn("2 of 2 agree", out)

    def test_far_apart_with_disjoint_intervals_disagree(self):
        a = report(entry("overlap", 1, 0.86, 0.83, 0.87), entry("sp", 1, 0.90, 0.88, 0.92))
        b = report(entry("overlap", 1, 0.74, 0.72, 0.76), entry("sp", 1, 0.91, 0.89, 0.93))
        code, out, _ = self.run_on(a, b)
        self.assertEqual(code, 1, out)
        self.assertIn("1 of 2 agree", out)
        self.assertIn("**disagree**", out)
        self.assertIn("15.0%", out)  # |0.86 - 0.74| / 0.80
        # A looser tolerance makes them agree.
        code, out, _ = self.run_on(a, b, "--tolerance", "0.2")
        self.assertEqual(code, 0, out)

    def test_entries_in_one_report_only_are_counted_apart(self):
        a = report(entry("sp", 1, 1.0, 0.9, 1.1), entry("sp", 64, 1.0, 0.9, 1.1))
        b = report(entry("sp", 1, 1.0, 0.9, 1.1))
        code, out, _ = self.run_on(a, b)
        self.assertEqual(code, 0)
        self.assertIn("1 of 1 agree", out)
        self.assertIn("1 entries are in one report only", out)

    def test_an_entry_without_an_interval_by_design_is_compared_by_tolerance(self):
        noted = {"name": NAME.format("sp", 1), "run_type": "iteration", "speedup": 1.0,
                 "speedup_ci_note": "no 95% interval: only 5 pairs"}
        a = report(noted)
        code, out, _ = self.run_on(a, report(entry("sp", 1, 1.03, 1.02, 1.04)))
        self.assertEqual(code, 0, out)
        self.assertIn("(no interval)", out)
        self.assertIn("| n/a |", out)
        code, out, _ = self.run_on(a, report(entry("sp", 1, 1.2, 1.1, 1.3)))
        self.assertEqual(code, 1, out)  # 18% apart and no interval to overlap

    def test_bad_input_exits_2_naming_the_problem(self):
        good = report(entry("sp", 1, 1.0, 0.9, 1.1))
        code, _, err = self.run_on(good, "{not json")
        self.assertEqual(code, 2)
        self.assertIn("cannot read a JSON report", err)
        code, _, err = self.run_on(good, {"context": {}})
        self.assertEqual(code, 2)
        self.assertIn("no 'benchmarks' list", err)
        broken = report({"name": NAME.format("sp", 1), "speedup": 1.0})
        code, _, err = self.run_on(good, broken)
        self.assertEqual(code, 2)
        self.assertIn("no usable interval", err)
        code, _, err = self.run_on(good, report(entry("sp", 64, 1.0, 0.9, 1.1)))
        self.assertEqual(code, 2)
        self.assertIn("no entry has a speedup in both", err)
        code, _, err = self.run_on(good, good, "--tolerance", "-1")
        self.assertEqual(code, 2)
        self.assertIn("--tolerance", err)


if __name__ == "__main__":
    unittest.main()
