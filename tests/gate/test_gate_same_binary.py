#!/usr/bin/env python3
"""Issue 28's threshold check on measured reports of this suite's CPU host (docs/gate.md,
"Thresholds"): three same-binary pairs pass (exit 0, no SLOWER or FASTER row), and the same
pairs with every entry of the current report 1.3x slower fail (exit 1, a SLOWER row).

  test_gate_same_binary.py build/bin/fusebench-gate
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BLOCKS = "reports/2026-12-02-cpu-reproducibility/blocks"
PAIRS = [(f"{BLOCKS}/qkv_gate_up-run1.json", f"{BLOCKS}/qkv_gate_up-run2.json"),
         (f"{BLOCKS}/qkv_gate_up-run3.json", f"{BLOCKS}/qkv_gate_up-run4.json"),
         ("reports/2026-12-02-cpu-contention/after/quiet-a.json",
          "reports/2026-12-02-cpu-contention/after/quiet-b.json")]
TIMES = ("real_time", "cpu_time", "time_median", "time_mean", "time_min", "time_median_ci_low",
         "time_median_ci_high")


def slower(path, factor, out):
    """The report with every entry's times multiplied by factor (speedups and counters kept)."""
    with open(path) as f:
        doc = json.load(f)
    for b in doc["benchmarks"]:
        for key in TIMES:
            if isinstance(b.get(key), (int, float)):
                b[key] *= factor
    with open(out, "w") as f:
        json.dump(doc, f)
    return out


def gate(gate_bin, base, cur):
    p = subprocess.run([gate_bin, base, cur], cwd=ROOT, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    gate_bin = os.path.abspath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for base, cur in PAIRS:
            rc, out = gate(gate_bin, base, cur)
            verdict = out.strip().splitlines()[-1]
            print(f"{os.path.basename(base)} vs {os.path.basename(cur)}: exit {rc}: {verdict}")
            if rc != 0 or "SLOWER" in out or "threshold 15.0% per entry, 7.0% for the geometric mean of all (the CPU default" not in out:
                failures.append(f"same-binary pair {base} {cur}: exit {rc}\n{out}")
            scaled = slower(os.path.join(ROOT, cur), 1.3, os.path.join(tmp, "slower.json"))
            rc, out = gate(gate_bin, base, scaled)
            verdict = out.strip().splitlines()[-1]
            print(f"  every entry 1.3x slower: exit {rc}: {verdict}")
            if rc != 1 or "SLOWER" not in out:
                failures.append(f"1.3x slower {cur}: exit {rc}, expected 1\n{out}")
    if failures:
        sys.exit("FAIL:\n" + "\n".join(failures))
    print("same-binary pairs pass, 1.3x slower fails: ok")


if __name__ == "__main__":
    main()
