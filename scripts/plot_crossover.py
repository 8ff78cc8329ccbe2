#!/usr/bin/env python3
"""Crossover charts from one or more fusebench reports (docs/charts.md).

For each model, op (and layer, when a model has several): the speedup of every variant over the
op's baseline (split; naive for the TP pipelines; plus sp and overlap over paired) against tokens
on a log2 axis, with the report's 95% intervals as bands; the crossover of a threshold, stated
only where the intervals resolve it, beside the cost model's prediction; decode and prefill
regions and the roofline ridge; panels for launches and bytes (measured vs model), bus bandwidth
for collectives, and eager vs graph when the reports have both. Only panels with data are drawn.

  scripts/plot_crossover.py reports/latest/report.json [more.json ...] -o reports/latest
Writes crossover_<model>_<op>[_<layer>].png and .svg, and crossover.json (for the HTML page).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import textwrap
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusebench_advice as fa  # noqa: E402
import fusebench_crossover as fx  # noqa: E402
import fusebench_report as fr  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # headless: CI and GPU boxes have no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# Per-launch overhead assumed by the cost-model prediction when not given (seconds).
DEFAULT_LAUNCH_OVERHEAD_US = {"cuda": 3.0, "cpu": 1.0}
# Variants in the order their styles are handed out (others follow alphabetically).
VARIANT_ORDER = ["split", "fused", "grouped", "batched", "naive", "paired", "sp", "overlap", "sum", "cols"]
COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
          "tab:gray", "tab:olive", "tab:cyan"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]
RIDGE_STYLES = [":", (0, (5, 2, 1, 2)), (0, (1, 3)), (0, (3, 1, 1, 1, 1, 1))]
PANEL_HEIGHT_IN = 3.0
NOTE_LINE_IN = 0.13
NOTE_FONT = 7
PNG_DPI = 110
LEGEND_ROW_IN = 0.19


def crossover(points, threshold):
    """Kept for callers of the old API: points [(tokens, speedup)] without intervals are
    classified like a model prediction (exact values). See fusebench_crossover.crossover."""
    return fx.crossover([(t, s, s, s) for t, s in points], threshold)


describe = fx.describe


def ridge_tokens(entries, ridge):
    """Token count at which the baseline variant's model intensity (FLOP/B) reaches `ridge`."""
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
    """{(model, op, layer): {(report_idx, dtype, tp, timing, weights, extra): {variant: {tokens: Entry}}}}"""
    figs = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for ri, r in enumerate(reports):
        for e in r.entries:
            if e.tokens <= 0 or not e.op or not e.variant:
                continue
            figs[(e.model, e.op, e.layer)][(ri, e.dtype, e.tp, e.timing, e.weights, e.extra)][e.variant][e.tokens] = e
    return figs


def chart_base_name(model, op, layer):
    """crossover_<model>_<op>, plus _<layer> unless the layer is the op's default one, so names
    stay the same for reports with and without layer: segments."""
    name = f"crossover_{slug(model)}_{slug(op)}"
    if layer and layer != fr.DEFAULT_LAYER.get(op):
        name += f"_{slug(layer)}"
    return name


def series_label(reports, key, multi):
    ri, dtype, tp, timing, weights, extra = key
    parts = []
    if multi["report"]:
        parts.append(reports[ri].label)
    parts.append(dtype)
    if multi["tp"]:
        parts.append(f"tp{tp}")
    if timing:
        parts.append(timing)
    if weights:
        parts.append(f"weights:{weights}")
    if extra:
        parts.append(extra)
    return " ".join(parts)


def order_variants(variants, baseline):
    known = [v for v in VARIANT_ORDER if v in variants]
    rest = sorted(v for v in variants if v not in VARIANT_ORDER)
    ordered = known + rest
    if baseline in ordered:
        ordered.remove(baseline)
        ordered.insert(0, baseline)
    return ordered


class Styles:
    """One (colour, marker) per series (variant x configuration), the same in every panel.
    Colour follows the variant and the marker the configuration while that stays unique;
    beyond 10 variants or 12 configurations every series gets the next pair in turn."""

    def __init__(self, variants, keys):
        self.variants, self.by_series = list(variants), {}
        if len(variants) <= len(COLORS) and len(keys) <= len(MARKERS):
            for vi, v in enumerate(variants):
                for ki, k in enumerate(keys):
                    self.by_series[(v, k)] = (COLORS[vi], MARKERS[ki])
        else:
            i = 0
            for v in variants:
                for k in keys:
                    self.by_series[(v, k)] = (COLORS[i % len(COLORS)], MARKERS[(i // len(COLORS)) % len(MARKERS)])
                    i += 1

    def __call__(self, variant, key):
        return self.by_series[(variant, key)]


class Panel:
    def __init__(self, pid, ylabel, title, yscale="linear", speedup_over=None):
        self.pid, self.ylabel, self.title, self.yscale = pid, ylabel, title, yscale
        self.speedup_over = speedup_over
        self.lines = []  # dicts: x, y, lo, hi, series, kind (measured|model), linestyle
        self.crossings = []  # (series, crossover dict, kind)
        self.notes = []
        self.methods = set()
        self.advice = []  # [(series key, advice comparison)]: strips drawn by fa.shade

    def add(self, series, kind, pts, lo=None, hi=None, linestyle=None):
        pts = [(t, y) for t, y in pts if y is not None and math.isfinite(y)]
        if not pts:
            return
        self.lines.append({"series": series, "kind": kind, "x": [t for t, _ in pts], "y": [y for _, y in pts],
                           "lo": lo, "hi": hi, "linestyle": linestyle})


def figure_ceilings(report, dtype, args):
    if args.peak_flops and args.bandwidth:
        return (args.peak_flops, args.bandwidth, "given on the command line")
    return report.ceilings(dtype)


def has_comm(e):
    return bool(e.counter("comm_bytes"))


def build_figure(model, op, layer, groups, reports, args, summary):
    """Builds one figure (returned, not saved: tests inspect it). Appends to summary."""
    keys = sorted(groups, key=lambda k: tuple(str(x) for x in k))
    multi = {"report": len({k[0] for k in keys}) > 1, "tp": len({k[2] for k in keys}) > 1}
    all_entries = [e for k in keys for v in groups[k].values() for e in v.values()]
    variants_all = {v for k in keys for v in groups[k]}
    baseline = fr.baseline_variant(op, all_entries)
    variants = order_variants(variants_all, baseline)
    comps = fr.comparisons(op, variants, baseline)
    styles = Styles(variants, keys)
    all_tokens = sorted({e.tokens for e in all_entries})
    thr = args.threshold

    speed_panels = {}
    for _, over in comps:
        if over not in speed_panels:
            speed_panels[over] = Panel(f"speedup:{over}", f"speedup over {over} (x)", "", speedup_over=over)
    p_time = Panel("time", "time / call (us)", "Time per call (median; band: 95% interval when the report has one)",
                   yscale="log")
    p_busbw = Panel("busbw", "bus bandwidth (GB/s)",
                    "Bus bandwidth, nccl-tests conventions (all-reduce x 2(n-1)/n, all-gather x (n-1)/n)")
    p_launch = Panel("launches", "launches / iteration", "")
    p_bytes = Panel("bytes", "bytes / iteration", "", yscale="log")
    p_graph = Panel("graph", "eager time / graph time", "Eager vs CUDA graph (host launch cost the graph removes)")
    ridges = []  # (tokens, label)
    ridge_notes = []
    ridge_marked = set()

    for key in keys:
        vmap = groups[key]
        ri = key[0]
        report = reports[ri]
        label = series_label(reports, key, multi)
        ceil = figure_ceilings(report, key[1], args)
        backend = str(report.context.get("backend", "cuda" if report.context.get("gpu_name") else "cpu"))
        overhead_us = args.launch_overhead_us if args.launch_overhead_us is not None else \
            DEFAULT_LAUNCH_OVERHEAD_US.get(backend, 3.0)
        base_pts = vmap.get(baseline, {}) if baseline else {}

        # Roofline ridge: once per report and ceiling, from the baseline's model intensity.
        if ceil and base_pts:
            ridge = ceil[0] / ceil[1]
            mark = (report.label, round(ridge, 3))
            if mark not in ridge_marked:
                ridge_marked.add(mark)
                rt = ridge_tokens(base_pts.values(), ridge)
                who = f"{key[1]}, {ceil[2]}" + (f", {report.label}" if multi["report"] else "")
                if rt:
                    ridges.append((rt, f"roofline ridge {ridge:.3g} FLOP/B at {rt:.0f} tokens ({who})"))
                elif any(e.counter("model_intensity") for e in base_pts.values()):
                    ridge_notes.append(f"roofline ridge {ridge:.3g} FLOP/B ({who}): not reached in the token range")

        for variant in variants:
            pts = vmap.get(variant)
            if not pts:
                continue
            series = (variant, key)
            toks = sorted(pts)
            p_launch.add(series, "model", [(t, pts[t].counter("model_launches")) for t in toks])
            p_launch.add(series, "measured", [(t, pts[t].counter("launches")) for t in toks])
            p_bytes.add(series, "model", [(t, pts[t].counter("model_bytes") or None) for t in toks])
            p_bytes.add(series, "measured", [(t, fr.measured_bytes(pts[t]) or None) for t in toks])
            if not comps:
                ivs = [pts[t].time_interval_ns() for t in toks]
                p_time.add(series, "measured", [(t, pts[t].time_ns / 1e3 if pts[t].time_ns else None) for t in toks],
                           lo=[iv[0] / 1e3 if iv else None for iv in ivs],
                           hi=[iv[1] / 1e3 if iv else None for iv in ivs])
                kinds = sorted({k[: -len("_busbw")] for t in toks for k in pts[t].counters
                                if k.endswith("_busbw") and pts[t].counter(k)})
                for i, kind in enumerate(kinds):
                    p_busbw.add(series, "measured",
                                [(t, (pts[t].counter(f"{kind}_busbw") or 0) / 1e9 or None) for t in toks],
                                linestyle=["-", "-.", ":"][i % 3])
                    if len(kinds) > 1:
                        p_busbw.notes.append(f"{variant} ({label}): {kind} line style {['solid', 'dash-dot', 'dotted'][i % 3]}")

        for variant, over in comps:
            pts, base = vmap.get(variant), vmap.get(over)
            if not pts or not base:
                continue
            panel = speed_panels[over]
            series = (variant, key)
            ratios = {t: fr.speedup_between(pts[t], base.get(t), over) for t in sorted(pts) if t in base}
            ratios = {t: r for t, r in ratios.items() if r is not None}
            if not ratios:
                continue
            toks = sorted(ratios)
            methods = {ratios[t].method for t in toks}
            panel.methods |= methods
            panel.add(series, "measured", [(t, ratios[t].value) for t in toks],
                      lo=[ratios[t].ci_low for t in toks], hi=[ratios[t].ci_high for t in toks])
            cm = fx.crossover([(t, ratios[t].value, ratios[t].ci_low, ratios[t].ci_high) for t in toks], thr)
            panel.crossings.append((series, cm, "measured"))
            predicted, cp, model_why = [], None, None
            if not ceil:
                model_why = "n/a (no ceilings)"
            elif any(has_comm(pts[t]) or has_comm(base[t]) for t in toks):
                model_why = "n/a (communication is not in the cost model)"
            else:
                for t in toks:
                    a = fr.predicted_seconds(base[t], ceil[0], ceil[1], overhead_us * 1e-6)
                    b = fr.predicted_seconds(pts[t], ceil[0], ceil[1], overhead_us * 1e-6)
                    if a and b:
                        predicted.append((t, a / b))
                if predicted:
                    panel.add(series, "model", predicted)
                    cp = fx.crossover([(t, s, s, s) for t, s in predicted], thr)
                    panel.crossings.append((series, cp, "model"))
                else:
                    model_why = "n/a (no model counters)"
            how = "" if methods == {fr.PAIRED} else (" [ratio of medians, no interval]" if methods == {fr.MEDIANS}
                                                     else " [intervals at some token counts only]")
            unjudged = sorted({ratios[t].not_judged for t in toks if ratios[t].not_judged})
            if unjudged:
                # No band and no crossover rest on them (fusebench_report.not_judged_reason).
                n = sum(1 for t in toks if ratios[t].not_judged)
                how += f" [not judged at {n} token count(s): {', '.join(unjudged)}]"
            panel.notes.append(f"{variant} ({label}){how}: measured {fx.describe(cm, thr)} | model "
                               f"{fx.describe(cp, thr) if cp else model_why}")
            summary.append({
                "model": model, "op": op, "layer": layer, "variant": variant, "over": over,
                "report": report.label, "dtype": key[1], "tp": key[2], "timing": key[3], "weights": key[4],
                "extra": key[5], "threshold": thr, "measured": cm, "model_prediction": cp,
                "model_note": model_why,
                "ceilings": {"peak_flops": ceil[0], "bandwidth": ceil[1], "source": ceil[2]} if ceil else None,
                "launch_overhead_us": overhead_us,
                "speedup_method": sorted(methods),
                "speedup_measured": [[t, ratios[t].value, ratios[t].ci_low, ratios[t].ci_high, ratios[t].method]
                                     for t in toks],
                "not_judged": {str(t): ratios[t].not_judged for t in toks if ratios[t].not_judged},
                "speedup_model": predicted,
            })

    add_advice(speed_panels.get(baseline), keys, reports, model, op, layer, args)

    # Eager vs graph, per variant, when both regimes are present.
    for key in keys:
        if key[3] != "eager":
            continue
        gkey = key[:3] + ("graph",) + key[4:]
        if gkey not in groups:
            continue
        for variant in variants:
            e, g = groups[key].get(variant, {}), groups[gkey].get(variant, {})
            p_graph.add((variant, key), "measured", [(t, e[t].time_ns / g[t].time_ns) for t in sorted(e)
                                                     if t in g and e[t].time_ns and g[t].time_ns])

    for over, panel in speed_panels.items():
        if panel.methods == {fr.PAIRED}:
            how = "bands: 95% intervals of the paired, interleaved ratios"
        elif panel.methods == {fr.MEDIANS}:
            how = "ratio of medians: the report has no intervals, so no crossover is resolved"
        else:
            how = "bands where the report has intervals; ratio of medians elsewhere"
        panel.title = f"Speedup over {over} ({how})"
    any_measured_launches = any(ln["kind"] == "measured" for ln in p_launch.lines)
    p_launch.title = "Launches: model (dashed) vs measured (solid)" + \
        ("" if any_measured_launches else " - no measured launches in these reports")
    any_measured_bytes = any(ln["kind"] == "measured" for ln in p_bytes.lines)
    p_bytes.title = "Bytes: model minimal (dashed) vs measured DRAM read+write (solid)" + \
        ("" if any_measured_bytes else " - no measured DRAM bytes in these reports")

    panels = [p for p in list(speed_panels.values()) + [p_time, p_busbw, p_launch, p_bytes, p_graph] if p.lines]
    if not panels:
        return None
    fig = draw(model, op, layer, panels, styles, reports, keys, multi, ridges, ridge_notes, all_tokens, args)
    return fig


def add_advice(panel, keys, reports, model, op, layer, args):
    """The advice (fusebench-advise's advice.json, --advice) of each series of the panel over the
    baseline, drawn as strips at its bottom (the legend says which strip is which)."""
    doc = getattr(args, "advice_doc", None)
    if not doc or panel is None:
        return
    for key in keys:
        c = fa.find(doc, reports[key[0]].context, model, op, layer, key[1], key[2], key[3], key[4], key[5])
        if c is not None and any(ln["series"][1] == key for ln in panel.lines):
            panel.advice.append((key, c))


def _note_text(panel, ridge_notes, threshold):
    lines = []
    if panel.speedup_over:
        lines.append(f"crossover of {threshold:g}x (measured: only between token counts whose 95% intervals lie "
                     f"wholly on opposite sides; model: cost-model prediction):")
    lines += panel.notes
    if panel.speedup_over:
        lines += ridge_notes
    return lines


def wrap_lines(lines, width):
    wrapped = []
    for ln in lines:
        wrapped += textwrap.wrap(ln, max(int(width), 40), subsequent_indent="    ") or [""]
    return "\n".join(wrapped)


def draw(model, op, layer, panels, styles, reports, keys, multi, ridges, ridge_notes, all_tokens, args):
    notes = [_note_text(p, ridge_notes, args.threshold) for p in panels]
    note_lines = sum(wrap_lines(n, 120).count("\n") + 1 for n in notes if n)
    # Legend: one entry per series drawn, then the style key.
    drawn_series = sorted({ln["series"] for p in panels for ln in p.lines},
                          key=lambda s: (styles.variants.index(s[0]), keys.index(s[1])))
    n_legend = len(drawn_series) + 8 + len(ridges) + \
        ((len(styles.variants) + 3 + sum(len(p.advice) for p in panels)) if any(p.advice for p in panels) else 0)
    height = max(PANEL_HEIGHT_IN * len(panels) + NOTE_LINE_IN * note_lines + 1.2, 4.5)
    rows_fit = max(int((height - 0.6) / LEGEND_ROW_IN), 8)
    ncol = max(1, math.ceil(n_legend / rows_fit))
    width = 11 + 3.0 * ncol
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, height), sharex=True, layout="constrained",
                             squeeze=False, dpi=PNG_DPI)
    axes = [a[0] for a in axes]
    thr = args.threshold
    ridge_handles = []
    note_artists = []
    advice_drawn = set()
    for ax, panel, note in zip(axes, panels, notes):
        ax.set_gid(f"panel:{panel.pid}")
        for ln in panel.lines:
            color, marker = styles(*ln["series"])
            if ln["kind"] == "model":
                ax.plot(ln["x"], ln["y"], linestyle="--", color=color, marker=marker, markersize=4,
                        fillstyle="none", alpha=0.8, gid="data:model")
                continue
            ax.plot(ln["x"], ln["y"], linestyle=ln["linestyle"] or "-", color=color, marker=marker,
                    markersize=4, gid="data:measured")
            if ln["lo"] is not None and any(v is not None for v in ln["lo"]):
                lo = [v if v is not None else math.nan for v in ln["lo"]]
                hi = [v if v is not None else math.nan for v in ln["hi"]]
                ax.fill_between(ln["x"], lo, hi, color=color, alpha=0.15, linewidth=0, gid="interval-band")
                xs = [x for x, a in zip(ln["x"], ln["lo"]) if a is not None]
                ys = [y for y, a in zip(ln["y"], ln["lo"]) if a is not None]
                err = [[y - a for y, a in zip(ys, [v for v in ln["lo"] if v is not None])],
                       [b - y for y, b in zip(ys, [v for v in ln["hi"] if v is not None])]]
                ax.errorbar(xs, ys, yerr=err, fmt="none", ecolor=color, elinewidth=0.8, capsize=2,
                            gid="interval-bars")
        if panel.speedup_over:
            ax.axhline(1.0, color="0.5", linewidth=0.8, gid="reference")
            ax.axhline(thr, color="0.35", linewidth=0.9, linestyle=(0, (4, 3)), gid="threshold")
            for series, c, kind in panel.crossings:
                color, marker = styles(*series)
                for x in c["crossings"]:
                    if kind == "measured":
                        est = x["tokens"] or math.sqrt(x["tokens_low"] * x["tokens_high"])
                        ax.errorbar([est], [thr], xerr=[[est - x["tokens_low"]], [x["tokens_high"] - est]],
                                    fmt=marker, color=color, markersize=6, capsize=4, elinewidth=2.2,
                                    gid="crossing")
                    elif x["tokens"]:
                        ax.axvline(x["tokens"], color=color, linewidth=1, linestyle="--", gid="model-crossing")
        advice_drawn |= fa.shade(ax, panel.advice, lambda v, k: styles.by_series.get((v, k), (None,))[0])
        for i, (rt, _) in enumerate(ridges):
            ax.axvline(rt, color="0.25", linestyle=RIDGE_STYLES[i % len(RIDGE_STYLES)], linewidth=1.2, gid="ridge")
        ax.set_ylabel(panel.ylabel)
        ax.set_title(panel.title, fontsize=9.5)
        ax.set_yscale(panel.yscale)
        ax.set_xscale("log", base=2)
        lo_t = min(all_tokens[0], 1) if all_tokens else 1
        hi_t = max(all_tokens[-1] if all_tokens else 1, args.prefill_min) * 1.5
        ax.axvspan(lo_t / 2, args.decode_max, color="tab:green", alpha=0.07, gid="decode")
        ax.axvspan(args.prefill_min, hi_t, color="tab:orange", alpha=0.07, gid="prefill")
        ax.grid(True, which="both", alpha=0.25)
        if note:
            # Below the panel, outside the data area: the layout makes room for it.
            a = ax.annotate(wrap_lines(note, 120), xy=(0, 0), xycoords="axes fraction", xytext=(0, -6),
                            textcoords="offset points", va="top", ha="left", fontsize=NOTE_FONT, family="monospace",
                            gid="crossover-notes", bbox={"facecolor": "white", "alpha": 0.9, "edgecolor": "0.7"})
            note_artists.append((ax, a, note))
    for i, (_, text) in enumerate(ridges):
        ridge_handles.append(Line2D([], [], color="0.25", linestyle=RIDGE_STYLES[i % len(RIDGE_STYLES)], label=text))

    handles = []
    for series in drawn_series:
        color, marker = styles(*series)
        handles.append(Line2D([], [], color=color, marker=marker, markersize=5,
                              label=f"{series[0]} ({series_label(reports, series[1], multi)})"))
    handles.append(Line2D([], [], color="0.3", marker="o", markersize=4, label="solid, filled: measured"))
    if any(ln["kind"] == "model" for p in panels for ln in p.lines):
        handles.append(Line2D([], [], color="0.3", marker="o", fillstyle="none", linestyle="--", markersize=4,
                              label="dashed, hollow: model (speedup: max(F/peak, B/bw) + launches x overhead)"))
    if any(ln["lo"] and any(v is not None for v in ln["lo"]) for p in panels for ln in p.lines):
        handles.append(Patch(color="0.3", alpha=0.25, label="band and bars: 95% interval"))
    if any(p.speedup_over for p in panels):
        handles.append(Line2D([], [], color="0.35", linestyle=(0, (4, 3)), label=f"threshold {thr:g}x"))
        if any(c["crossings"] for p in panels for _, c, k in p.crossings if k == "measured"):
            handles.append(Line2D([], [], color="0.3", marker="o", linewidth=2.2,
                                  label="measured crossover: interval between resolved points"))
        if any(c["crossings"] for p in panels for _, c, k in p.crossings if k == "model"):
            handles.append(Line2D([], [], color="0.3", linestyle="--", label="model crossover"))
    handles += ridge_handles
    strips = [series_label(reports, k, multi) for p in panels for k, _ in p.advice]
    handles += advice_handles(advice_drawn, strips)
    handles.append(Patch(color="tab:green", alpha=0.2, label=f"decode (<= {args.decode_max} tokens)"))
    handles.append(Patch(color="tab:orange", alpha=0.2, label=f"prefill (>= {args.prefill_min} tokens)"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, ncol=ncol, frameon=True)

    if all_tokens:
        axes[-1].set_xticks(all_tokens)
        axes[-1].set_xticklabels([str(t) for t in all_tokens], fontsize=7, rotation=45)
        axes[-1].set_xlim(all_tokens[0] / 1.5, all_tokens[-1] * 1.5)
    axes[-1].set_xlabel("tokens (M), log2")
    devices = ", ".join(sorted({reports[k[0]].label for k in keys}))
    # Left-aligned and wrapped so that it never runs under the legend at the right.
    title = textwrap.fill(f"fusebench crossover: {model} {op}{' ' + layer if layer else ''}  [{devices}]", 95)
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    # Notes wrapped to the width the layout gave their panel, so they never widen it (a wider
    # note would squeeze the panel) and never run under the legend.
    chars = {id(a): 120 for _, a, _ in note_artists}
    for _ in range(4):
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        too_wide = False
        for ax, a, note in note_artists:
            aw, nw = ax.get_window_extent(r).width, a.get_bbox_patch().get_window_extent(r).width
            if nw > aw or nw < 0.9 * aw:
                chars[id(a)] = max(chars[id(a)] * (0.97 * aw / nw), 40)
                a.set_text(wrap_lines(note, chars[id(a)]))
                too_wide = too_wide or nw > aw
        if not too_wide:
            break
    return fig


def advice_handles(drawn, strips):
    """Legend entries for the advice strips drawn (fa.shade): which strip is which, and colours."""
    out = []
    if strips:
        out.append(Patch(facecolor="none", edgecolor="none",
                         label="advice strips (fusebench-advise), bottom up:\n  " + "\n  ".join(strips)))
    for kind, variant, color in sorted(drawn):
        if kind == "use":
            out.append(Patch(facecolor=color, alpha=0.55, label=f"advice strip: use {variant}"))
        elif kind == "either":
            out.append(Patch(facecolor=color, alpha=0.7, label="advice strip: either"))
        else:
            out.append(Patch(facecolor="none", edgecolor="0.6", hatch="////", label="advice strip: unresolved"))
    return out


def plot_all(reports, args):
    """[(base path, figure)], summary. Figures are left open for the caller to save or inspect."""
    figs = group_entries(reports)
    summary, out = [], []
    for (model, op, layer) in sorted(figs):
        fig = build_figure(model, op, layer, figs[(model, op, layer)], reports, args, summary)
        if fig is None:
            continue
        base = os.path.join(args.output, chart_base_name(model, op, layer))
        out.append((base, fig))
    return out, summary


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+", help="fusebench JSON reports (several GPUs or runs share each chart)")
    p.add_argument("-o", "--output", default="reports/latest", help="folder for the charts")
    p.add_argument("--labels", help="comma-separated labels, one per report (default: device name)")
    p.add_argument("--threshold", type=float, default=1.05, help="crossover threshold (default 1.05)")
    p.add_argument("--decode-max", type=int, default=64, help="decode region: tokens <= this (default 64)")
    p.add_argument("--prefill-min", type=int, default=512, help="prefill region: tokens >= this (default 512)")
    p.add_argument("--peak-flops", type=float, help="FLOP/s for the model prediction (default: report ceilings)")
    p.add_argument("--bandwidth", type=float, help="bytes/s for the model prediction (default: report ceilings)")
    p.add_argument("--launch-overhead-us", type=float,
                   help="per-launch cost in the model prediction (default 3 on cuda, 1 on cpu)")
    p.add_argument("--formats", default="png,svg", help="comma-separated (default png,svg)")
    p.add_argument("--advice", help="fusebench-advise's JSON (advice.json): shade each token range by its decision")
    args = p.parse_args(argv)
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if args.threshold <= 0:
        p.error(f"--threshold must be positive (got {args.threshold:g})")
    return args


def main(argv=None):
    args = parse_args(argv)
    labels = args.labels.split(",") if args.labels else None
    if labels and len(labels) != len(args.reports):
        print(f"plot_crossover: --labels has {len(labels)} label(s) for {len(args.reports)} report(s): "
              f"give one per report", file=sys.stderr)
        return 2
    try:
        reports = fr.load_all(args.reports, labels)
    except (OSError, ValueError) as exc:
        print(f"plot_crossover: {exc}", file=sys.stderr)
        return 2
    try:
        args.advice_doc = fa.load(args.advice) if args.advice else None
    except (OSError, ValueError) as exc:
        print(f"plot_crossover: --advice: {exc}", file=sys.stderr)
        return 2
    if not group_entries(reports):
        print("plot_crossover: no benchmark entries with tokens in the reports", file=sys.stderr)
        return 2
    os.makedirs(args.output, exist_ok=True)
    figures, summary = plot_all(reports, args)
    written = []
    for base, fig in figures:
        for fmt in args.formats:
            fig.savefig(f"{base}.{fmt}")  # at the figure's dpi: the layout was measured at it
            written.append(f"{base}.{fmt}")
        plt.close(fig)
    out = {"threshold": args.threshold, "decode_max": args.decode_max, "prefill_min": args.prefill_min,
           "reports": [{"path": r.path, "label": r.label} for r in reports],
           "charts": [os.path.basename(w) for w in written], "crossovers": summary}
    tmp = os.path.join(args.output, "crossover.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, os.path.join(args.output, "crossover.json"))
    for w in written:
        print(f"plot_crossover: wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
