#!/usr/bin/env python3
"""Prints the short tables a device check ends with: every variant against its baseline (split;
naive for TP; sp and overlap also against paired), one row per model, layer, op, dtype, tp,
regime, weights, communicator and token count, with the speedup and its 95% interval, measured
launches and DRAM bytes beside the model; collectives with time and bus bandwidth; the crossovers;
and (when given) PyTorch and ncu cross-checks.

Only keys present in the report are shown; a missing counter is printed as "n/a", never 0. A
speedup without an interval in the report is the ratio of medians and says so.

  scripts/summarize_report.py REPORT.json [--torch torch.json] [--ncu ncu.csv] [--threshold 1.05]
"""
import argparse
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusebench_crossover as fx  # noqa: E402
import fusebench_report as fr  # noqa: E402
import ncu_compare  # noqa: E402


def fmt(v, spec=".3g"):
    return "n/a" if v is None else format(v, spec)


def speedup_text(r):
    if r is None:
        return "n/a"
    if r.not_judged:
        return f"{r.value:.3f} (not judged: {r.not_judged})"
    if r.has_interval:
        return f"{r.value:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]"
    return f"{r.value:.3f} (ratio of medians)"


def config_text(e):
    parts = [e.timing or "-"]
    if e.weights:
        parts.append(f"weights:{e.weights}")
    if e.extra:
        parts.append(e.extra)
    return " ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report")
    ap.add_argument("--torch")
    ap.add_argument("--ncu")
    ap.add_argument("--threshold", type=float, default=1.05, help="crossover threshold (default 1.05)")
    args = ap.parse_args(argv)
    try:
        report = fr.load(args.report)
        with open(args.report, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        print(f"summarize: cannot read {args.report}: {e}")
        return 1
    ctx = report.context
    print(f"device: {report.device()}  backend: {ctx.get('backend', 'n/a')}  "
          f"driver: {ctx.get('cuda_driver_version', 'n/a')}  rev: {str(ctx.get('git_revision', '?'))[:12]}")
    method = (ctx.get("timing") or {}).get("interval_method") if isinstance(ctx.get("timing"), dict) else None
    print(f"speedup intervals: {method or 'none in this report (speedups are ratios of medians)'}")
    failed = [e for e in report.entries if e.error]
    print(f"entries: {len(report.entries)}, failed: {len(failed)}")
    for e in failed[:5]:
        print(f"  FAILED {e.name}: {e.error}")

    # Comparison groups: every entry of one configuration and token count, by variant.
    groups = defaultdict(dict)
    for e in report.entries:
        if e.error is None:
            groups[(e.op, e.config(), e.tokens)][e.variant] = e
    by_op = defaultdict(list)
    for e in report.entries:
        by_op[e.op].append(e)
    baselines = {op: fr.baseline_variant(op, es) for op, es in by_op.items()}

    head = (f"{'model':<14} {'layer':<8} {'op':<8} {'dtype':<5} {'tp':>2} {'config':<22} {'tokens':>6} "
            f"{'variant':<8} {'over':<7} {'over us':>9} {'this us':>9} {'speedup [95% CI]':<26} "
            f"{'launches o/t (model)':>20} {'dram/model':>10}")
    quantized = any(fr.quant_errors(e) for e in report.entries)
    if quantized:
        head += f" {'quant err o/t (worst shard)':<40}"
    rows, coll, curves = [], [], defaultdict(list)
    oversub = {}  # (op, cfg) -> the first oversubscription of its groups
    one_computation = set()  # (op, tp) whose variants are one computation
    for (op, cfg, tokens), vm in groups.items():
        comps = fr.comparisons(op, list(vm), baselines.get(op))
        tp = next(iter(vm.values())).tp
        if comps and fr.one_computation(op, tp):
            one_computation.add((op, tp))
            continue  # nothing to compare: the variants run the same computation
        o = fr.oversubscription(list(vm.values()), ctx)
        if o is not None:
            oversub.setdefault((op, cfg), o)
        for variant, over in comps:
            e, b = vm[variant], vm[over]
            r = fr.speedup_between(e, b, over)
            if r is not None:
                curves[(op, cfg, variant, over)].append((tokens, r.value, r.ci_low, r.ci_high))
            ml = lambda x: x.counter("model_launches")  # noqa: E731
            launches = (f"{fmt(b.counter('launches'), '.0f')}/{fmt(e.counter('launches'), '.0f')} "
                        f"({fmt(ml(b), '.0f')}/{fmt(ml(e), '.0f')})")
            mb, dram = e.counter("model_bytes"), fr.measured_bytes(e)
            acc_text = ""
            if quantized:
                acc = fr.accuracy({tokens: e}, {tokens: b})
                bacc = fr.accuracy({tokens: b}, None)
                acc_text = (f" {fmt(bacc and bacc.worst, '.4g')}/{fmt(acc and acc.worst, '.4g')}"
                            + (" LESS ACCURATE" if acc and acc.less_accurate else "")
                            + (" (emulated)" if acc and acc.emulated else ""))
            rows.append(((e.model, e.layer, op, e.dtype, e.tp, config_text(e), tokens, variant, over),
                         f"{e.model:<14} {e.layer or '-':<8} {op:<8} {e.dtype:<5} {e.tp:>2} {config_text(e):<22} "
                         f"{tokens:>6} {variant:<8} {over:<7} {fmt(b.time_ns and b.time_ns / 1e3, '9.2f')} "
                         f"{fmt(e.time_ns and e.time_ns / 1e3, '9.2f')} {speedup_text(r):<26} {launches:>20} "
                         f"{fmt(dram / mb if dram is not None and mb else None, '10.3f')}" + acc_text
                         + ("  oversubscribed" if o is not None else "")))
        if not comps:
            for variant, e in vm.items():
                busbw = {k[:-6]: e.counter(k) for k in e.counters if k.endswith("_busbw") and e.counter(k)}
                if not busbw:
                    continue
                iv = e.time_interval_ns()
                t = fmt(e.time_ns and e.time_ns / 1e3, '.2f') + (f" [{iv[0] / 1e3:.2f}, {iv[1] / 1e3:.2f}]" if iv else "")
                coll.append(((e.model, op, e.dtype, e.tp, config_text(e), tokens, variant),
                             f"{e.model:<14} {op:<10} {variant:<6} {e.dtype:<5} {e.tp:>2} {config_text(e):<22} "
                             f"{tokens:>6} {t:>24} " + ", ".join(f"{k} {v / 1e9:.3g} GB/s" for k, v in sorted(busbw.items()))
                             + ("  oversubscribed" if o is not None else "")))
    order = lambda row: tuple(str(x).zfill(8) if isinstance(x, int) else str(x) for x in row[0])  # noqa: E731
    if rows:
        print(head)
        for _, line in sorted(rows, key=order):
            print(line)
    if coll:
        print(f"{'model':<14} {'op':<10} {'var':<6} {'dtype':<5} {'tp':>2} {'config':<22} {'tokens':>6} "
              f"{'time us [95% CI]':>24} bus bandwidth")
        for _, line in sorted(coll, key=order):
            print(line)
    for op, tp in sorted(one_computation):
        print(f"{op} tp {tp}: its variants are one computation (nothing to exchange at tp 1): not compared")
    if oversub:
        texts = sorted({o.text() for o in oversub.values()})
        print(f"oversubscribed (rows so marked): {'; '.join(texts)}. Their times and speedups show the ranks' "
              f"contention for the cores, not the computation (docs/tp.md): no crossover of them is a result.")
    if curves:
        print(f"crossover of {args.threshold:g}x (placed only where the 95% intervals resolve it):")
        for (op, cfg, variant, over), pts in sorted(curves.items(), key=lambda kv: str(kv[0])):
            model, layer, tp, dtype, timing, weights, extra = cfg
            where = " ".join(x for x in (model, layer, op, dtype, f"tp{tp}", timing, weights, extra) if x)
            c = fx.crossover(pts, args.threshold)
            if (op, cfg) in oversub:
                c = fx.not_resolved_by_contention(c, oversub[(op, cfg)].as_dict())
            print(f"  {where}: {variant} over {over}: {fx.describe(c, args.threshold)}")

    if args.torch:
        try:
            with open(args.torch, encoding="utf-8") as f:
                torch = json.load(f)
        except (OSError, ValueError) as e:
            print(f"summarize: cannot read {args.torch}: {e}")
            torch = None
        if torch:
            print(f"PyTorch {torch.get('torch')} F.linear (cold) vs fusebench qkv/fused:")
            for t in torch.get("entries", []):
                ours = [e.time_ns / 1e3 for e in report.entries
                        if e.op == "qkv" and e.variant == "fused" and e.model == t["model"] and e.tokens == t["tokens"]
                        and e.timing in ("cold", "") and e.dtype in (t.get("dtype", "bf16"), "?") and e.time_ns]
                mine = ours[0] if ours else None
                ratio = mine / t["median_us"] if mine else None
                print(f"  {t['model']:<12} tokens={t['tokens']:>6}: torch {t['median_us']:8.2f} us, "
                      f"fusebench {fmt(mine, '8.2f')} us, ratio {fmt(ratio, '.3f')}")
    if args.ncu:
        try:
            with open(args.ncu, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            text = ""
        ncu = ncu_compare.parse_ncu(text)
        print(f"ncu cross-check ({len(ncu)} regions):")
        if ncu:
            ncu_compare.print_table(ncu_compare.compare(ncu, raw))
        elif text.strip():
            print("  " + text.strip().splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
