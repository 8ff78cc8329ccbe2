#!/usr/bin/env python3
"""Crossover charts from one or more fusebench reports (docs/charts.md).

For each model and op: speedup of every variant over split against tokens (log2 axis), decode
and prefill regions shaded, the roofline ridge marked, the crossover (speedup falls under a
threshold) annotated as measured and as predicted by the cost model; panels for launches and
bytes (measured vs model) and, when the reports have both, eager vs graph.

  scripts/plot_crossover.py reports/latest/report.json [more.json ...] -o reports/latest
Writes crossover_<model>_<op>.png and .svg, and crossover.json (the crossovers, for the HTML page).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusebench_report as fr  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # headless: CI and GPU boxes have no display
import matplotlib.pyplot as plt  # noqa: E402

# Per-launch overhead assumed by the cost-model prediction when not given (seconds).
DEFAULT_LAUNCH_OVERHEAD_US = {"cuda": 3.0, "cpu": 1.0}


def crossover(points, threshold):
    """points: [(tokens, speedup)] sorted by tokens. The token count where the speedup first
    falls under `threshold` after being at or above it, interpolated on a log2 axis.
    Returns {"kind": "cross"|"always_above"|"never_above", "tokens": float|None}."""
    pts = [(t, s) for t, s in points if t > 0 and s is not None and math.isfinite(s)]
    if not pts:
        return {"kind": "no_data", "tokens": None}
    if all(s < threshold for _, s in pts):
        return {"kind": "never_above", "tokens": None}
    for (t0, s0), (t1, s1) in zip(pts, pts[1:]):
        if s0 >= threshold > s1:
            f = (s0 - threshold) / (s0 - s1)
            return {"kind": "cross", "tokens": 2 ** (math.log2(t0) + f * (math.log2(t1) - math.log2(t0)))}
    return {"kind": "always_above", "tokens": pts[-1][0]}


def describe(c, threshold):
    if c["kind"] == "cross":
        return f"{c['tokens']:.0f} tokens"
    if c["kind"] == "always_above":
        return f"none (>= {threshold:g}x up to {c['tokens']} tokens)"
    if c["kind"] == "never_above":
        return f"none (< {threshold:g}x at every token count)"
    return "no data"


def ridge_tokens(entries, ridge):
    """Token count at which the split variant's model intensity (FLOP/B) reaches `ridge`."""
    pts = sorted((e.tokens, e.counter("model_intensity")) for e in entries
                 if e.tokens > 0 and e.counter("model_intensity"))
    for (t0, i0), (t1, i1) in zip(pts, pts[1:]):
        if i0 < ridge <= i1:
            f = (math.log(ridge) - math.log(i0)) / (math.log(i1) - math.log(i0))
            return 2 ** (math.log2(t0) + f * (math.log2(t1) - math.log2(t0)))
    return None


def slug(s):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-")


def group_entries(reports):
    """{(model, op): {(report_idx, dtype, tp, timing, extra): {variant: {tokens: Entry}}}}"""
    figs = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for ri, r in enumerate(reports):
        for e in r.entries:
            if e.tokens <= 0 or not e.op or not e.variant:
                continue
            figs[(e.model, e.op)][(ri, e.dtype, e.tp, e.timing, e.extra)][e.variant][e.tokens] = e
    return figs


def series_label(reports, key, multi):
    ri, dtype, tp, timing, extra = key
    parts = []
    if multi["report"]:
        parts.append(reports[ri].label)
    parts.append(dtype)
    if multi["tp"]:
        parts.append(f"tp{tp}")
    if timing:
        parts.append(timing)
    if extra:
        parts.append(extra)
    return " ".join(parts)


def plot_figure(model, op, groups, reports, args, summary):
    keys = sorted(groups, key=lambda k: (k[0], k[1], k[2], k[3], k[4]))
    multi = {"report": len(reports) > 1, "tp": len({k[2] for k in keys}) > 1}
    timings = {k[3] for k in keys}
    eager_graph = "eager" in timings and "graph" in timings
    any_measured_launches = any(e.counter("launches") is not None for k in keys
                                for v in groups[k].values() for e in v.values())
    any_measured_bytes = any(fr.measured_bytes(e) is not None for k in keys
                             for v in groups[k].values() for e in v.values())
    nrows = 3 + (1 if eager_graph else 0)
    fig, axes = plt.subplots(nrows, 1, figsize=(11, 3.6 * nrows + 1.2), sharex=True)
    ax_s, ax_l, ax_b = axes[0], axes[1], axes[2]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_i = 0
    all_tokens = sorted({t for k in keys for v in groups[k].values() for t in v})
    notes = []
    ridge_marked = set()

    for key in keys:
        variants = groups[key]
        ri = key[0]
        report = reports[ri]
        label = series_label(reports, key, multi)
        split = variants.get("split", {})
        ceil = None
        if args.peak_flops and args.bandwidth:
            ceil = (args.peak_flops, args.bandwidth, "given on the command line")
        else:
            ceil = report.ceilings(key[1])
        backend = str(report.context.get("backend", "cuda" if report.context.get("gpu_name") else "cpu"))
        overhead_us = args.launch_overhead_us if args.launch_overhead_us is not None else \
            DEFAULT_LAUNCH_OVERHEAD_US.get(backend, 3.0)

        # Roofline ridge, once per device and ceiling.
        if ceil and split:
            ridge = ceil[0] / ceil[1]
            rt = ridge_tokens(split.values(), ridge)
            mark = (report.label, round(ridge, 3))
            if not rt and mark not in ridge_marked:
                ridge_marked.add(mark)
                notes.append(f"ridge {ridge:.3g} FLOP/B ({key[1]}, {ceil[2]}): not reached in the measured token range")
            if rt and mark not in ridge_marked:
                ridge_marked.add(mark)
                for ax in axes:
                    ax.axvline(rt, color="0.3", linestyle=":", linewidth=1.2)
                ax_s.annotate(f"ridge {ridge:.3g} FLOP/B\n({key[1]}, {ceil[2]}{', ' + report.label if multi['report'] else ''})",
                              xy=(rt, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -4),
                              textcoords="offset points", va="top", fontsize=7, color="0.3")

        for variant in sorted(variants):
            pts = variants[variant]
            color = colors[color_i % len(colors)]
            color_i += 1
            toks = sorted(pts)
            name = f"{variant} ({label})"
            # Launches and bytes: model dashed, measured solid with markers.
            ml = [(t, pts[t].counter("model_launches")) for t in toks if pts[t].counter("model_launches") is not None]
            if ml:
                ax_l.plot(*zip(*ml), "--", color=color, alpha=0.8, label=f"{name} model")
            ms = [(t, pts[t].counter("launches")) for t in toks if pts[t].counter("launches") is not None]
            if ms:
                ax_l.plot(*zip(*ms), "-o", color=color, markersize=3, label=f"{name} measured")
            mb = [(t, pts[t].counter("model_bytes")) for t in toks if pts[t].counter("model_bytes")]
            if mb:
                ax_b.plot(*zip(*mb), "--", color=color, alpha=0.8, label=f"{name} model")
            bb = [(t, fr.measured_bytes(pts[t])) for t in toks if fr.measured_bytes(pts[t])]
            if bb:
                ax_b.plot(*zip(*bb), "-o", color=color, markersize=3, label=f"{name} measured DRAM r+w")
            if variant == "split" or not split:
                continue
            common = [t for t in toks if t in split and split[t].time_ns and pts[t].time_ns]
            measured = [(t, split[t].time_ns / pts[t].time_ns) for t in common]
            if measured:
                ax_s.plot(*zip(*measured), "-o", color=color, markersize=4, label=f"{name} measured")
            cm = crossover(measured, args.threshold)
            predicted, cp = [], {"kind": "no_data", "tokens": None}
            if ceil:
                for t in sorted(set(toks) & set(split)):
                    a = fr.predicted_seconds(split[t], ceil[0], ceil[1], overhead_us * 1e-6)
                    b = fr.predicted_seconds(pts[t], ceil[0], ceil[1], overhead_us * 1e-6)
                    if a and b:
                        predicted.append((t, a / b))
                if predicted:
                    ax_s.plot(*zip(*predicted), "--", color=color, alpha=0.7,
                              label=f"{name} model: max(F/peak, B/bw) + {overhead_us:g} us/launch "
                                    f"({ceil[2]})")
                    cp = crossover(predicted, args.threshold)
            if cm["kind"] == "cross":
                ax_s.axvline(cm["tokens"], color=color, linewidth=1)
            if cp["kind"] == "cross":
                ax_s.axvline(cp["tokens"], color=color, linewidth=1, linestyle="--")
            notes.append(f"{name}: measured {describe(cm, args.threshold)} | model "
                         f"{describe(cp, args.threshold) if ceil else 'n/a (no ceilings)'}")
            summary.append({
                "model": model, "op": op, "variant": variant, "report": report.label, "dtype": key[1],
                "tp": key[2], "timing": key[3], "extra": key[4], "threshold": args.threshold,
                "measured": cm, "model_prediction": cp if ceil else None,
                "ceilings": {"peak_flops": ceil[0], "bandwidth": ceil[1], "source": ceil[2]} if ceil else None,
                "launch_overhead_us": overhead_us,
                "speedup_measured": measured, "speedup_model": predicted,
            })

    # Eager vs graph: host launch cost removed by a CUDA graph, per variant.
    if eager_graph:
        ax_g = axes[3]
        for key in keys:
            if key[3] != "eager":
                continue
            gkey = (key[0], key[1], key[2], "graph", key[4])
            if gkey not in groups:
                continue
            for variant in sorted(groups[key]):
                e, g = groups[key][variant], groups[gkey].get(variant, {})
                pts = [(t, e[t].time_ns / g[t].time_ns) for t in sorted(e)
                       if t in g and e[t].time_ns and g[t].time_ns]
                if pts:
                    ax_g.plot(*zip(*pts), "-o", markersize=3,
                              label=f"{variant} ({series_label(reports, key, multi).replace(' eager', '')})")
        ax_g.axhline(1.0, color="0.5", linewidth=0.8)
        ax_g.set_ylabel("eager time / graph time")
        ax_g.set_title("Eager vs CUDA graph (host launch cost the graph removes)", fontsize=10)
        ax_g.legend(fontsize=7, loc="best")

    ax_s.axhline(1.0, color="0.5", linewidth=0.8)
    ax_s.axhline(args.threshold, color="0.5", linewidth=0.8, linestyle="--")
    ax_s.set_ylabel("speedup over split (x)")
    ax_s.set_title(f"{model} / {op}: speedup over split; crossover = first token count under "
                   f"{args.threshold:g}x (solid line measured, dashed model)", fontsize=10)
    if notes:
        ax_s.text(0.01, 0.02, "crossover:\n" + "\n".join(notes), transform=ax_s.transAxes, fontsize=7,
                  va="bottom", ha="left", bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "0.7"})
    ax_l.set_ylabel("launches / iteration")
    ax_l.set_title("Launches: model (dashed) vs measured (solid)" +
                   ("" if any_measured_launches else " - no measured launches in these reports"), fontsize=10)
    ax_b.set_ylabel("bytes / iteration")
    ax_b.set_yscale("log")
    ax_b.set_title("Bytes: model minimal (dashed) vs measured DRAM read+write (solid)" +
                   ("" if any_measured_bytes else " - no measured DRAM bytes in these reports"), fontsize=10)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.axvspan(min(all_tokens[0], 1) if all_tokens else 1, args.decode_max, color="tab:green", alpha=0.07)
        ax.axvspan(args.prefill_min, max(all_tokens[-1] if all_tokens else 1, args.prefill_min) * 1.5,
                   color="tab:orange", alpha=0.07)
        ax.grid(True, which="both", alpha=0.25)
    ax_s.text(0.005, 0.98, f"decode (<= {args.decode_max} tokens)", transform=ax_s.transAxes, fontsize=7,
              va="top", color="tab:green")
    ax_s.text(0.995, 0.98, f"prefill (>= {args.prefill_min} tokens)", transform=ax_s.transAxes, fontsize=7,
              va="top", ha="right", color="tab:orange")
    for ax in (ax_s, ax_l, ax_b):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5, loc="upper right", bbox_to_anchor=(1.0, 0.93))
    if all_tokens:
        axes[-1].set_xticks(all_tokens)
        axes[-1].set_xticklabels([str(t) for t in all_tokens], fontsize=7, rotation=45)
        axes[-1].set_xlim(all_tokens[0] / 1.5, all_tokens[-1] * 1.5)
    axes[-1].set_xlabel("tokens (M), log2")
    devices = ", ".join(sorted({r.label for r in reports}))
    fig.suptitle(f"fusebench crossover: {model} {op}  [{devices}]", fontsize=11)
    fig.tight_layout()
    base = os.path.join(args.output, f"crossover_{slug(model)}_{slug(op)}")
    written = []
    for fmt in args.formats:
        fig.savefig(f"{base}.{fmt}", dpi=110 if fmt == "png" else None)
        written.append(f"{base}.{fmt}")
    plt.close(fig)
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+", help="fusebench JSON reports (several GPUs or runs share each chart)")
    p.add_argument("-o", "--output", default="reports/latest", help="folder for the charts")
    p.add_argument("--labels", help="comma-separated labels, one per report (default: device name)")
    p.add_argument("--threshold", type=float, default=1.05, help="crossover: speedup under this (default 1.05)")
    p.add_argument("--decode-max", type=int, default=64, help="decode region: tokens <= this (default 64)")
    p.add_argument("--prefill-min", type=int, default=512, help="prefill region: tokens >= this (default 512)")
    p.add_argument("--peak-flops", type=float, help="FLOP/s for the model prediction (default: report ceilings)")
    p.add_argument("--bandwidth", type=float, help="bytes/s for the model prediction (default: report ceilings)")
    p.add_argument("--launch-overhead-us", type=float,
                   help="per-launch cost in the model prediction (default 3 on cuda, 1 on cpu)")
    p.add_argument("--formats", default="png,svg", help="comma-separated (default png,svg)")
    args = p.parse_args(argv)
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if args.threshold <= 0:
        p.error("--threshold must be positive")
    try:
        reports = fr.load_all(args.reports, args.labels.split(",") if args.labels else None)
    except (OSError, ValueError) as exc:
        print(f"plot_crossover: {exc}", file=sys.stderr)
        return 2
    os.makedirs(args.output, exist_ok=True)
    figs = fr_groups = group_entries(reports)
    if not fr_groups:
        print("plot_crossover: no benchmark entries with tokens in the reports", file=sys.stderr)
        return 2
    summary, written = [], []
    for (model, op) in sorted(figs):
        written += plot_figure(model, op, figs[(model, op)], reports, args, summary)
    out = {"threshold": args.threshold, "decode_max": args.decode_max, "prefill_min": args.prefill_min,
           "reports": [{"path": r.path, "label": r.label} for r in reports],
           "charts": [os.path.basename(w) for w in written], "crossovers": summary}
    with open(os.path.join(args.output, "crossover.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    for w in written:
        print(f"plot_crossover: wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
