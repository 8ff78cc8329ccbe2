#!/usr/bin/env python3
"""Prints the short table a device check ends with: fused vs split per model/op/tokens, measured
launches and DRAM bytes beside the model, and (when given) PyTorch and ncu cross-checks.

Only keys present in the report are shown; a missing counter is printed as "n/a", never 0.
"""
import argparse
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_compare  # noqa: E402


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"summarize: cannot read {path}: {e}")
        return None


def fmt(v, spec=".3g"):
    return "n/a" if v is None else format(v, spec)


def time_us(entry):
    # Prefer the regime's median when the timing statistics are present.
    for key in ("time_median", "real_time"):
        if key in entry:
            v = entry[key]
            unit = entry.get("time_unit", "us") if key == "real_time" else "s"
            return v * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[unit]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--torch")
    ap.add_argument("--ncu")
    args = ap.parse_args()
    report = load(args.report)
    if report is None:
        return 1
    ctx = report.get("context", {})
    print(f"gpu: {ctx.get('gpu_name', ctx.get('cpu_model', '?'))}  backend: {ctx.get('backend')}  "
          f"driver: {ctx.get('cuda_driver_version', 'n/a')}  rev: {str(ctx.get('git_revision', '?'))[:12]}")
    failed = [b for b in report.get("benchmarks", []) if b.get("error_occurred")]
    print(f"entries: {len(report.get('benchmarks', []))}, failed: {len(failed)}")
    for b in failed[:5]:
        print(f"  FAILED {b['name']}: {b.get('error_message')}")

    rows = defaultdict(dict)
    for b in report.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        key = (b.get("model"), b.get("op"), b.get("timing", "-"), b.get("tokens"))
        rows[key][b.get("variant")] = b
    print(f"{'model':<12} {'op':<8} {'timing':<6} {'tokens':>6} {'split us':>9} {'fused us':>9} "
          f"{'speedup':>7} {'launch s/f (model)':>19} {'dram/model f':>12}")
    for (model, op, timing, tokens), v in sorted(rows.items(), key=lambda kv: tuple(str(x).zfill(8) for x in kv[0])):
        s, f = v.get("split"), v.get("fused")
        if not s or not f:
            continue
        ts, tf = time_us(s), time_us(f)
        speed = ts / tf if ts and tf else None
        launches = f"{fmt(s.get('launches'), '.0f')}/{fmt(f.get('launches'), '.0f')} " \
                   f"({s.get('model_launches', 0):.0f}/{f.get('model_launches', 0):.0f})"
        dram = None
        if "dram_read_bytes" in f and "dram_write_bytes" in f:
            dram = (f["dram_read_bytes"] + f["dram_write_bytes"]) / f["model_bytes"]
        print(f"{model:<12} {op:<8} {timing:<6} {tokens:>6} {fmt(ts, '9.2f')} {fmt(tf, '9.2f')} "
              f"{fmt(speed, '7.3f')} {launches:>19} {fmt(dram, '12.3f')}")

    if args.torch:
        torch = load(args.torch)
        if torch:
            print(f"PyTorch {torch.get('torch')} F.linear (cold) vs fusebench qkv/fused:")
            for e in torch.get("entries", []):
                ours = [time_us(b) for (m, op, t, tok), v in rows.items() for b in [v.get("fused")]
                        if b and m == e["model"] and op == "qkv" and tok == e["tokens"] and t in ("cold", "-")]
                mine = ours[0] if ours else None
                ratio = mine / e["median_us"] if mine else None
                print(f"  {e['model']:<12} tokens={e['tokens']:>6}: torch {e['median_us']:8.2f} us, "
                      f"fusebench {fmt(mine, '8.2f')} us, ratio {fmt(ratio, '.3f')}")
    if args.ncu:
        try:
            text = open(args.ncu).read()
        except OSError:
            text = ""
        ncu = ncu_compare.parse_ncu(text)
        print(f"ncu cross-check ({len(ncu)} regions):")
        if ncu:
            ncu_compare.print_table(ncu_compare.compare(ncu, report))
        elif text.strip():
            print("  " + text.strip().splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
