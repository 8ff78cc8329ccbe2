#!/usr/bin/env python3
"""Compares two fusebench reports field by field, ignoring only what is measured.

    scripts/report_diff.py BEFORE.json AFTER.json      # exit 0: same; 1: differ (listed); 2: bad input
    scripts/report_diff.py --run LIST BIN OUT_DIR      # run a command list, one report per line
    scripts/report_diff.py --dirs BEFORE_DIR AFTER_DIR # compare two such runs, file by file

A redesign that must not change behaviour is proven by running a fixed command list before and
after (same seed, same inputs) and diffing the reports with the measured fields masked. Masked:
times and their statistics, samples and rounds, intervals and speedups, host load and contention,
ceilings and roofline fractions, clocks, the run's date, host and build identity. Everything else
(the fixtures and their names, model figures, launches, bytes, routing, quantization accuracy,
verification, refusals and error messages) must be identical.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

# Keys whose values are measurements or depend on the host, the moment or the build (and the
# command line, whose binary and report paths differ between the two runs of one list).
MASKED_KEY = re.compile(
    r"^(real_time|cpu_time|iterations|time_.*|.*_time|.*_time_ns|.*seconds.*|samples.*|"
    r"speedup.*|.*_ci_.*|.*_ci|converged|timing_stop|timing_rounds|timing_contended_note|"
    r"contended|host_.*|sm_clock.*|ceilings.*|roofline.*|.*per_second|.*_busbw|"
    r"decomposition|gemm_algorithms|threads_per_rank|compute_slowest_rank|compute_imbalance|"
    r"compute_wait_fraction|"
    r"date|host_name|hostname|executable|library_build_type|git_.*|build_.*|num_cpus|mhz_per_cpu|"
    r"cpu_scaling_enabled|caches|load_avg|cpu_threads.*|run_seconds|elapsed.*|"
    r"interrupted_note|timing_blocks_note|ceilings_at_s|over_run|"
    r"command_line)$"
)


def masked(value):
    """The value with every measured field removed, recursively."""
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items() if not MASKED_KEY.match(k)}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def differences(a, b, path="$"):
    """Paths where two masked values differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a:
                out.append(f"{path}.{k}: only in after ({json.dumps(b[k])[:120]})")
            elif k not in b:
                out.append(f"{path}.{k}: only in before ({json.dumps(a[k])[:120]})")
            else:
                out.extend(differences(a[k], b[k], f"{path}.{k}"))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items before, {len(b)} after"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(differences(x, y, f"{path}[{i}]"))
        return out
    if a != b:
        return [f"{path}: {json.dumps(a)[:200]} -> {json.dumps(b)[:200]}"]
    return []


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"report_diff: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def by_name(report):
    """Entries keyed by name (their order is the sweep's, compared separately)."""
    entries = report.get("benchmarks", [])
    return {"context": report.get("context", {}),
            "names": [e.get("name") for e in entries],
            "entries": {e.get("name"): e for e in entries}}


def diff_reports(before, after):
    return differences(masked(by_name(before)), masked(by_name(after)))


def read_list(path):
    """(tag, args) per non-comment line: `tag: args...`."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            tag, _, args = line.partition(":")
            out.append((tag.strip(), shlex.split(args)))
    return out


def run_list(list_path, binary, out_dir):
    """Runs each command: its report (when it writes one), exit code and stderr's error lines."""
    os.makedirs(out_dir, exist_ok=True)
    for tag, args in read_list(list_path):
        report = os.path.join(out_dir, tag + ".json")
        if os.path.exists(report):
            os.remove(report)
        cmd = [binary] + [a.replace("{report}", report) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        # Progress lines and timings vary; what the run refused or failed with does not.
        errors = [l for l in p.stderr.splitlines()
                  if l.startswith("fusebench: ") and re.search(r"error|refus|left out|invalid|cannot", l)]
        outcome = {"exit": p.returncode, "errors": errors}
        if not any("{report}" in a for a in args):  # a listing: its stdout is the result
            outcome["stdout"] = p.stdout.splitlines()
        with open(os.path.join(out_dir, tag + ".outcome.json"), "w", encoding="utf-8") as f:
            json.dump(outcome, f, indent=1)
        print(f"{tag}: exit {p.returncode}" + ("" if os.path.exists(report) else " (no report)"))


def diff_dirs(before_dir, after_dir):
    failed = 0
    names = sorted(set(os.listdir(before_dir)) | set(os.listdir(after_dir)))
    for name in names:
        a, b = os.path.join(before_dir, name), os.path.join(after_dir, name)
        if not (os.path.exists(a) and os.path.exists(b)):
            print(f"{name}: only in {'before' if os.path.exists(a) else 'after'}")
            failed = 1
            continue
        if name.endswith(".outcome.json"):
            diffs = differences(load(a), load(b))
        else:
            diffs = diff_reports(load(a), load(b))
        print(f"{name}: {'identical outside measured fields' if not diffs else 'DIFFERS'}")
        for d in diffs[:40]:
            print("  " + d)
        failed |= bool(diffs)
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", nargs=3, metavar=("LIST", "BIN", "OUT_DIR"))
    ap.add_argument("--dirs", nargs=2, metavar=("BEFORE_DIR", "AFTER_DIR"))
    ap.add_argument("reports", nargs="*")
    a = ap.parse_args()
    if a.run:
        run_list(*a.run)
        return 0
    if a.dirs:
        return diff_dirs(*a.dirs)
    if len(a.reports) != 2:
        ap.error("give two reports, --run or --dirs")
    diffs = diff_reports(load(a.reports[0]), load(a.reports[1]))
    for d in diffs:
        print(d)
    print("identical outside measured fields" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
