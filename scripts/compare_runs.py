#!/usr/bin/env python3
"""Do two fusebench reports of the same sweep agree? (docs/timing.md, "Reproducibility")

For every entry with a speedup in both reports (matched by name), the two speedups agree when
they are within --tolerance of each other (|a - b| / mean(a, b), default 5%) or their 95%
intervals overlap. Prints a Markdown table and "N of M agree".

Exit status: 0 every common entry agrees, 1 some disagree, 2 bad input (unreadable or
malformed report, or no entry with a speedup in both).

    python3 scripts/compare_runs.py run1.json run2.json [--tolerance 0.05]
"""
import argparse
import json
import sys


def speedups(path):
    """name -> (speedup, ci_low, ci_high) of every entry with a speedup and its interval."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read a JSON report: {e}") from e
    entries = report.get("benchmarks") if isinstance(report, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: no 'benchmarks' list (not a fusebench report)")
    out = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or e.get("run_type") == "aggregate" or "speedup" not in e:
            continue
        try:
            value = float(e["speedup"])
            name = str(e["name"])
            if "speedup_ci_low" not in e and isinstance(e.get("speedup_ci_note"), str):
                # No interval by design (too few pairs; the note says why): compared by the
                # tolerance alone.
                out[name] = (value, None, None)
                continue
            low, high = float(e["speedup_ci_low"]), float(e["speedup_ci_high"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: entry {i} has a speedup but no usable interval "
                             f"(speedup_ci_low, speedup_ci_high): {err}") from err
        out[name] = (value, low, high)
    return out


def compare(a, b, tolerance):
    """Rows (name, a, b, difference, overlap, agree) for the names in both, sorted."""
    rows = []
    for name in sorted(set(a) & set(b)):
        (va, la, ha), (vb, lb, hb) = a[name], b[name]
        difference = abs(va - vb) / ((va + vb) / 2)
        overlap = None if None in (la, ha, lb, hb) else la <= hb and lb <= ha
        rows.append((name, a[name], b[name], difference, overlap,
                     difference <= tolerance or bool(overlap)))
    return rows


def short(name):
    """The entry name without the parts every TP/fusion entry repeats."""
    keep = [p for p in name.split("/")
            if not p.startswith(("iterations:", "weights:", "timing:", "comm:", "model:",
                                 "layer:")) and p != "manual_time"]
    return "/".join(keep)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--tolerance", type=float, default=0.05,
                        help="relative difference that counts as agreeing (default 0.05)")
    args = parser.parse_args(argv)
    if not args.tolerance >= 0:
        print(f"compare_runs: --tolerance {args.tolerance} is invalid (>= 0, e.g. 0.05)",
              file=sys.stderr)
        return 2
    try:
        a, b = speedups(args.first), speedups(args.second)
    except ValueError as e:
        print(f"compare_runs: {e}", file=sys.stderr)
        return 2
    rows = compare(a, b, args.tolerance)
    if not rows:
        print(f"compare_runs: no entry has a speedup in both {args.first} and {args.second}",
              file=sys.stderr)
        return 2
    print("| entry | first | second | difference | intervals overlap | |")
    print("|---|---|---|---|---|---|")
    def shown(v, low, high):
        return f"{v:.3f} (no interval)" if low is None else f"{v:.3f} [{low:.3f}, {high:.3f}]"

    for name, (va, la, ha), (vb, lb, hb), diff, overlap, agree in rows:
        overlap_text = "n/a" if overlap is None else ("yes" if overlap else "no")
        print(f"| {short(name)} | {shown(va, la, ha)} | {shown(vb, lb, hb)} "
              f"| {diff * 100:.1f}% | {overlap_text} | "
              f"{'agree' if agree else '**disagree**'} |")
    agreeing = sum(1 for r in rows if r[5])
    only = len(set(a) ^ set(b))
    print(f"\n{agreeing} of {len(rows)} agree (within {args.tolerance * 100:g}% or intervals "
          f"overlap)" + (f"; {only} entries are in one report only" if only else ""))
    return 0 if agreeing == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
