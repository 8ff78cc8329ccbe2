#!/usr/bin/env python3
"""Prints, per fixture of a fusebench report, what the first GPU run must settle about timing:
samples kept and dropped (throttled, blocking-kernel timeouts), how the interleaved measurement
stopped, the speedup over the baseline with its 95% interval, and the SM clock spread; then the
throttle rule's reference clock and threshold, and the correctness of the one-launch variants
(qkv/grouped, gate_up/batched: the stride-0 strided-batched GEMM) from the verification.

    python3 scripts/timing_summary.py REPORT.json [--build-log build-and-test.log]

Only what the report holds is printed; a missing value is "n/a", never 0.
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
    if lo is None:
        return "n/a"
    return f"{lo:.0f}-{fmt(hi, '.0f')}"


def print_entries(report):
    rows = [b for b in report.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
    print(f"{'fixture':<66} {'n':>5} {'thr':>4} {'blk':>4} {'stop':<9} {'speedup [95% CI] pairs':<30} "
          f"{'clock MHz':>10}")
    for b in rows:
        if b.get("error_occurred"):
            print(f"{short_name(b):<66} FAILED: {b.get('error_message', '')[:120]}")
            continue
        print(f"{short_name(b):<66} {fmt(b.get('samples'), '5.0f')} "
              f"{fmt(b.get('samples_dropped_throttled'), '4.0f')} "
              f"{fmt(b.get('samples_dropped_block_timeout'), '4.0f')} "
              f"{str(b.get('timing_stop', 'n/a')):<9} {speedup_text(b):<30} {clock_text(b):>10}")
        for note in ("speedup_unavailable", "speedup_ci_note"):
            if note in b:
                print(f"{'':<66}   {note}: {b[note]}")
    print("n: valid samples; thr: dropped as throttled; blk: dropped, blocking kernel timed out "
          "(batch/cold); speedup over the baseline (split, naive)")


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
    if isinstance(load, dict):
        print(f"  clock under load (with the ceilings): median {fmt(load.get('median_mhz'), '.0f')}, "
              f"min {fmt(load.get('min_mhz'), '.0f')}, max {fmt(load.get('max_mhz'), '.0f')} MHz "
              f"over {load.get('probes')} probes")
    elif load:
        print(f"  clock under load: {load}")


def print_one_launch(report, build_log):
    checks = [v for v in report.get("context", {}).get("verification", [])
              if (v.get("op"), v.get("variant")) in (("gate_up", "batched"), ("qkv", "grouped"))]
    if not checks:
        print("one-launch variants: not in the verification of this report (run with --verify)")
    for v in checks:
        worst = max((c.get("max_abs_error", 0) for c in v.get("comparisons", [])), default=None)
        print(f"verify {v['op']}/{v['variant']} {v.get('model')} tokens={v.get('tokens')} "
              f"{v.get('dtype')}: {'OK' if v.get('ok') else 'FAILED'} "
              f"({len(v.get('comparisons', []))} comparisons, max abs error {fmt(worst)})"
              + (" <- stride-0 strided-batched GEMM" if v["variant"] == "batched" else ""))
    if build_log:
        try:
            text = open(build_log).read()
        except OSError:
            return
        for line in text.splitlines():
            if re.search(r"(OneLaunchVariantsEqualSplit|GraphReplayOfGroupedAndBatched|"
                         r"InterleavedGroupsGiveSpeedups)", line) and re.search(
                             r"Passed|Failed|Skipped|\*\*\*", line):
                print("  " + line.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--build-log")
    args = ap.parse_args()
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"timing_summary: cannot read {args.report}: {e}")
        return 1
    print_entries(report)
    print_clock(report)
    print_one_launch(report, args.build_log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
