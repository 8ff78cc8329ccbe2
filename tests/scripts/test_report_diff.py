#!/usr/bin/env python3
"""scripts/report_diff.py: the measured fields are masked and nothing else is.

    test_report_diff.py FUSEBENCH

Synthetic reports: a change of a time, an interval or host load is no difference; a change of
launches, bytes, accuracy, an entry's name or a refusal is one, named by its path. Then the cheap
lines of the fixed command list (tests/report_diff/commands.txt: the CUDA listing and the refused
inputs, which run nothing) are run twice with FUSEBENCH and must compare identical.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import report_diff  # noqa: E402

BASE = {
    "context": {"date": "2026-12-05T10:00:00", "seed": 7, "host_load": {"start": 0.1},
                "refused": [{"model": "m", "op": "moe", "reason": "no routed experts"}]},
    "benchmarks": [{
        "name": "qkv/fused/model:m/tokens:1", "real_time": 10.0, "time_median": 1e-5,
        "speedup": 1.2, "speedup_ci_low": 1.1, "speedup_ci_high": 1.3, "samples": 40,
        "host_wait_fraction": 0.0, "launches": 1, "model_bytes": 4096,
        "quant_error": {"q": 0.01},
    }],
}

failures = []


def check(name, ok):
    print(("ok    " if ok else "FAIL  ") + name)
    if not ok:
        failures.append(name)


def diffs(change):
    after = copy.deepcopy(BASE)
    change(after)
    return report_diff.diff_reports(BASE, after)


def set_entry(key, value):
    return lambda r: r["benchmarks"][0].__setitem__(key, value)


check("measured fields are masked",
      not diffs(lambda r: (set_entry("real_time", 99.0)(r), set_entry("speedup_ci_low", 0.5)(r),
                           set_entry("samples", 6)(r), r["context"].__setitem__("date", "x"),
                           r["context"]["host_load"].__setitem__("start", 1.9))))
d = diffs(set_entry("launches", 3))
check("a launch count differs, named by its path",
      any("launches" in x and "1 -> 3" in x for x in d))
check("a byte count differs", bool(diffs(set_entry("model_bytes", 8192))))
check("an accuracy differs", bool(diffs(lambda r: r["benchmarks"][0]["quant_error"].__setitem__("q", 0.5))))
check("a renamed entry differs",
      bool(diffs(lambda r: r["benchmarks"][0].__setitem__("name", "qkv/split/model:m/tokens:1"))))
check("a refusal's reason differs",
      bool(diffs(lambda r: r["context"]["refused"][0].__setitem__("reason", "other"))))

# The cheap lines of the fixed list, run twice: identical outside the measured fields.
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "fusebench")
if not os.access(binary, os.X_OK):
    print(f"test_report_diff: no fusebench at {binary}")
    sys.exit(1)
with tempfile.TemporaryDirectory() as tmp:
    cheap = os.path.join(tmp, "cheap.txt")
    with open(os.path.join(ROOT, "tests", "report_diff", "commands.txt"), encoding="utf-8") as f:
        lines = [l for l in f if l.startswith(("list_cuda:", "refused_"))]
    check("the list has its cheap lines", len(lines) == 4)
    with open(cheap, "w", encoding="utf-8") as f:
        f.writelines(l.replace("{report}", os.path.join(tmp, "unused.json")) for l in lines)
    for run in ("a", "b"):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "report_diff.py"), "--run",
                        cheap, binary, os.path.join(tmp, run)], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
    with open(os.path.join(tmp, "a", "list_cuda.outcome.json"), encoding="utf-8") as f:
        listing = json.load(f)
    check("the CUDA listing ran and listed fixtures",
          listing["exit"] == 0 and any(l.startswith("qkv/") for l in listing["stdout"]))
    with open(os.path.join(tmp, "a", "refused_dtype.outcome.json"), encoding="utf-8") as f:
        refused = json.load(f)
    check("a refused input keeps its exit code and message",
          refused["exit"] == 2 and any("fp9" in l for l in refused["errors"]))
    same = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "report_diff.py"), "--dirs",
                           os.path.join(tmp, "a"), os.path.join(tmp, "b")], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True)
    check("two runs of the cheap lines are identical", same.returncode == 0)

print(f"test_report_diff: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
