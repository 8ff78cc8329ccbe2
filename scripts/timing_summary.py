#!/usr/bin/env python3
"""Prints, per fixture of a fusebench report, what the first GPU run must settle about timing:
samples kept and dropped (throttled, blocking-kernel timeouts), how the interleaved measurement
stopped, the speedup over the baseline with its 95% interval, and the SM clock spread; then the
throttle rule's reference clock and threshold, and the correctness of the one-launch variants
(qkv/grouped, gate_up/batched: the stride-0 strided-batched GEMM) from the verification.

    python3 scripts/timing_summary.py REPORT.json
    python3 scripts/timing_summary.py --build-log build-and-test.log [--checks checks.txt]

Only what the report holds is printed; a missing value is "n/a", never 0. With --build-log (the
GPU test binaries' Google Test output) and --checks (the device check's own steps, one
"name<TAB>PASS|FAIL|SKIP<TAB>detail" line each) it ends with one table, PASS/FAIL/SKIP per check:
a test that started and printed no result (a crash, or the timeout) is a FAIL.
"""
import argparse
import json
import re
import sys


def fmt(v, spec=".3g"):
    return "n/a" if v is None else format(v, spec)


def short_name(b):
    name = b.get("name", "?")
    name = re.sub(r"/iterations:1(/manual_time)?$", "", name)
    return name.replace("/model:", "/").replace("/dtype:", "/").replace("/timing:", "/")


def speedup_text(b):
    if "speedup" not in b:
        return "-" if b.get("variant") == b.get("speedup_baseline") else "n/a"
    return (f"{b['speedup']:.3f} [{b.get('speedup_ci_low', float('nan')):.3f}, "
            f"{b.get('speedup_ci_high', float('nan')):.3f}] n={fmt(b.get('speedup_pairs'), '.0f')}")


def clock_text(b):
    lo, hi = b.get("sm_clock_min_mhz"), b.get("sm_clock_max_mhz")
    text = "n/a" if lo is None else f"{lo:.0f}-{fmt(hi, '.0f')}"
    all_lo, all_hi = b.get("sm_clock_all_min_mhz"), b.get("sm_clock_all_max_mhz")
    if all_lo is not None and (all_lo, all_hi) != (lo, hi):  # throttled samples widened it
        text += f" (all {all_lo:.0f}-{fmt(all_hi, '.0f')})"
    return text


def print_entries(report):
    rows = [b for b in report.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
    print(f"{'fixture':<66} {'n':>5} {'thr':>4} {'blk':>4} {'R':>4} {'rnds':>5} {'stop':<9} "
          f"{'speedup [95% CI] pairs':<30} {'clock MHz':>10}")
    for b in rows:
        if b.get("error_occurred"):
            print(f"{short_name(b):<66} FAILED: {b.get('error_message', '')[:120]}")
            continue
        print(f"{short_name(b):<66} {fmt(b.get('samples'), '5.0f')} "
              f"{fmt(b.get('samples_dropped_throttled'), '4.0f')} "
              f"{fmt(b.get('samples_dropped_block_timeout'), '4.0f')} "
              f"{fmt(b.get('runs_per_sample'), '4.0f')} {fmt(b.get('timing_rounds'), '5.0f')} "
              f"{str(b.get('timing_stop', 'n/a')):<9} {speedup_text(b):<30} {clock_text(b):>10}")
        if b.get("speedup_blocks"):  # measured in blocks: each block's speedup
            print(f"{'':<66}   speedup per block: "
                  + " ".join(f"{v:.3f}" for v in b["speedup_blocks"]))
        for note in ("speedup_unavailable", "speedup_ci_note", "timing_blocks_note"):
            if note in b:
                print(f"{'':<66}   {note}: {b[note]}")
    print("n: valid samples; thr: dropped as throttled; blk: dropped, blocking kernel timed out "
          "(batch/cold); R: runs per sample; rnds: rounds of the group; speedup over the baseline "
          "(split, naive)")


def print_clock(report):
    ctx = report.get("context", {})
    clock = ctx.get("timing", {}).get("sm_clock", {})
    load = ctx.get("ceilings", {}).get("sm_clock_under_load")
    if "reference_mhz" not in clock:
        print(f"throttle rule: none ({clock.get('source', 'no clock information in the report')})")
        return
    print(f"throttle rule: reference {clock.get('reference', 'n/a')} = "
          f"{fmt(clock.get('reference_mhz'), '.0f')} MHz (default {fmt(clock.get('default_mhz'), '.0f')} MHz), "
          f"samples below {fmt(clock.get('throttle_below_mhz'), '.0f')} MHz dropped")
    if "probe_window_ns" in clock:
        print(f"  clock probe window: {clock['probe_window_ns']:.0f} ns of %globaltimer (10000 asked)")
    elif "probe_window_unavailable" in clock:
        print(f"  clock probe window: n/a ({clock['probe_window_unavailable']})")
    if isinstance(load, dict):
        print(f"  clock under load (with the ceilings): median {fmt(load.get('median_mhz'), '.0f')}, "
              f"min {fmt(load.get('min_mhz'), '.0f')}, max {fmt(load.get('max_mhz'), '.0f')} MHz "
              f"over {load.get('probes')} probes")
    elif load:
        print(f"  clock under load: {load}")


def print_one_launch(report):
    checks = [v for v in report.get("context", {}).get("verification", [])
              if (v.get("op"), v.get("variant")) in (("gate_up", "batched"), ("qkv", "grouped"))]
    if not checks:
        print("one-launch variants: not in the verification of this report (run with --verify)")
    for v in checks:
        errors = [c["max_abs_error"] for c in v.get("comparisons", []) if c.get("max_abs_error") is not None]
        worst = max(errors, default=None)  # a missing error is n/a, never 0
        print(f"verify {v['op']}/{v['variant']} {v.get('model')} tokens={v.get('tokens')} "
              f"{v.get('dtype')}: {'OK' if v.get('ok') else 'FAILED'} "
              f"({len(v.get('comparisons', []))} comparisons, max abs error {fmt(worst)})"
              + (" <- stride-0 strided-batched GEMM" if v["variant"] == "batched" else ""))


GTEST_RESULT = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] ([^ ,]+)(?:,.*)? \(\d+ ms\)\s*$")
GTEST_RUN = re.compile(r"^\[ RUN +\] (\S+)\s*$")
GTEST_NOTE = re.compile(r"^\S+:\d+: (Skipped|Failure)\s*$")
BINARY_EXIT = re.compile(r"^(\S+) exit: (\d+)\s*$")
STATUS = {"OK": "PASS", "FAILED": "FAIL", "SKIPPED": "SKIP"}


def gtest_checks(text):
    """[(name, PASS|FAIL|SKIP, detail)] from Google Test console output (several binaries, one
    after another, each followed by a "<binary> exit: N" line), in the order the tests ran."""
    results, running, note, note_at = [], None, None, None
    binary_start = 0  # where the current binary's results begin
    for line in text.splitlines():
        line = line.rstrip()
        m = GTEST_RUN.match(line)
        if m:
            if running:  # the previous test printed no result: its process died
                results.append((running, "FAIL", "no result (crashed?)"))
            running, note, note_at = m.group(1), None, None
            continue
        m = GTEST_NOTE.match(line)
        if m and running and note is None:
            note, note_at = "", line.split(": ")[0]
            continue
        if note == "" and running:
            note = f"{note_at}: {line.strip()}"
            continue
        m = GTEST_RESULT.match(line)
        if m and running == m.group(2):
            results.append((running, STATUS[m.group(1)], note or ""))
            running = None
            continue
        m = BINARY_EXIT.match(line)
        if m:
            if running:
                cut = "cut by the timeout" if m.group(2) in ("124", "137") else "crashed"
                results.append((running, "FAIL", f"no result ({cut}, exit {m.group(2)})"))
                running = None
            failed = any(r[1] == "FAIL" for r in results[binary_start:])
            if m.group(2) != "0" and not failed:  # else its failed tests already say so
                results.append((f"{m.group(1)} (process)", "FAIL", f"exit {m.group(2)}"))
            binary_start = len(results)
    if running:
        results.append((running, "FAIL", "no result (the log ends inside it)"))
    return results


def read_text(path):
    with open(path) as f:
        return f.read()


def step_checks(path):
    rows = []
    for line in read_text(path).splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[1] in ("PASS", "FAIL", "SKIP"):
            rows.append((parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
    return rows


def print_checks(build_log, checks):
    rows = []
    for path, read in ((checks, step_checks), (build_log, lambda p: gtest_checks(read_text(p)))):
        if not path:
            continue
        try:
            rows += read(path)
        except OSError as e:
            rows.append((path, "FAIL", f"cannot read: {e.strerror}"))
    if not rows:
        return
    width = max(len(r[0]) for r in rows)
    print(f"{'check':<{width}}  result  detail")
    for name, status, detail in rows:
        print(f"{name:<{width}}  {status:<6}  {detail[:120]}")
    counts = {s: sum(1 for r in rows if r[1] == s) for s in ("PASS", "FAIL", "SKIP")}
    print(f"checks: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report", nargs="?")
    ap.add_argument("--build-log", help="Google Test output of the GPU test binaries")
    ap.add_argument("--checks", help="the device check's steps: name<TAB>PASS|FAIL|SKIP<TAB>detail")
    args = ap.parse_args()
    if args.report:
        try:
            with open(args.report) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            print(f"timing_summary: cannot read {args.report}: {e}")
            return 1
        print_entries(report)
        print_clock(report)
        print_one_launch(report)
    print_checks(args.build_log, args.checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
