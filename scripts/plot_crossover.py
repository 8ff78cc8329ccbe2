#!/usr/bin/env python3
"""Crossover charts from one or more fusebench reports (docs/charts.md).

For each model, op (and layer, when a model has several): the speedup of every variant over the
op's baseline (split; naive for the TP pipelines; plus sp and overlap over paired) against tokens
on a log2 axis, with the report's 95% intervals as bands; the crossover of a threshold, stated
only where the intervals resolve it, beside the cost model's prediction; decode and prefill
regions and the roofline ridge; panels for launches and bytes (measured vs model), bus bandwidth
for collectives, and eager vs graph when the reports have both. Only panels with data are drawn.
Small multiples: one column of panels per tp, a colour per series (the same in every column);
at tp 1 a TP op's variants are one computation, charted once. A CPU TP group whose ranks'
threads outnumber the cores states no crossover (its times are contention: docs/tp.md); the
column's title says so.

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
import plot_tp_moe  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # headless: CI and GPU boxes have no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

# Per-launch overhead assumed by the cost-model prediction when not given (seconds).
DEFAULT_LAUNCH_OVERHEAD_US = {"cuda": 3.0, "cpu": 1.0}
# Variants in the order their styles are handed out (others follow alphabetically).
VARIANT_ORDER = ["split", "fused", "fused_channelwise", "grouped", "batched", "per_expert", "per_expert_split",
                 "padded", "naive", "paired", "sp", "overlap", "sum", "cols"]
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


def split_comm(extra):
    """("comm:inprocess", the other segments) of an Entry.extra."""
    parts = extra.split("/") if extra else []
    return ("/".join(p for p in parts if p.startswith("comm:")),
            "/".join(p for p in parts if not p.startswith("comm:")))


class Series:
    """Who a line is: its variant and configuration, tp aside (each tp has its own column of
    panels), and the communicator aside when each column has one (it is in the column's title).
    Labels name only what differs between the figure's series; the rest is in the subtitle."""

    FIELDS = ("report", "dtype", "timing", "weights", "extra")

    def __init__(self, reports, keys):
        self.reports = reports
        comms = defaultdict(set)
        for k in keys:
            comms[k[2]].add(split_comm(k[5])[0])
        self.comm_in_column = all(len(c) == 1 for c in comms.values())
        self.column_comm = {tp: next(iter(c)) for tp, c in comms.items()} if self.comm_in_column else {}
        values = defaultdict(set)
        for k in keys:
            for f, v in zip(self.FIELDS, self._parts(k)):
                values[f].add(v)
        self.varying = {f for f, vs in values.items() if len(vs) > 1}
        self.common = [self._show(f, next(iter(values[f]))) for f in self.FIELDS
                       if f not in self.varying and next(iter(values[f]))]
        self.accuracy = {}  # ident -> "quant err ..." (quantized entries: accuracy beside speed)

    def report_name(self, ri):
        """A report's label, or its file's stem where the label is the device plus the path
        (fusebench_report.load_all's way to tell two runs on one device apart)."""
        r = self.reports[ri]
        if r.label.endswith(f" ({r.path})"):
            return os.path.splitext(os.path.basename(r.path))[0]
        return r.label

    def _parts(self, key):
        ri, dtype, _tp, timing, weights, extra = key
        return (self.report_name(ri), dtype, timing,
                weights, split_comm(extra)[1] if self.comm_in_column else extra)

    @staticmethod
    def _show(field, v):
        return f"weights:{v}" if field == "weights" and v else v

    def ident(self, variant, key):
        return (variant,) + self._parts(key)

    def label(self, ident):
        shown = [self._show(f, v) for f, v in zip(self.FIELDS, ident[1:]) if f in self.varying and v]
        label = ident[0] + (f" ({' '.join(shown)})" if shown else "")
        return label + (f"; {self.accuracy[ident]}" if ident in self.accuracy else "")


def order_variants(variants, baseline):
    known = [v for v in VARIANT_ORDER if v in variants]
    rest = sorted(v for v in variants if v not in VARIANT_ORDER)
    ordered = known + rest
    if baseline in ordered:
        ordered.remove(baseline)
        ordered.insert(0, baseline)
    return ordered


def distinct_colors(n):
    """n colours, no two alike: tab10, then tab20, then evenly spaced on a perceptual map."""
    if n <= len(COLORS):
        return COLORS[:n]
    if n <= 20:
        return [matplotlib.colors.to_hex(c) for c in matplotlib.colormaps["tab20"].colors[:n]]
    cmap = matplotlib.colormaps["turbo"]
    return [matplotlib.colors.to_hex(cmap(i / (n - 1))) for i in range(n)]


class Styles:
    """One (colour, marker) per series identity (Series.ident), the same in every panel: no two
    series of a figure share a colour, and a series keeps its colour in every tp column."""

    def __init__(self, idents, pairs):
        self.idents = list(idents)
        colors = distinct_colors(len(self.idents))
        self.by_ident = {i: (colors[n], MARKERS[n % len(MARKERS)]) for n, i in enumerate(self.idents)}
        # (variant, key) -> style, for fusebench_advice.shade
        self.by_series = {(v, k): self.by_ident[i] for (v, k), i in pairs.items()}

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


def new_panels(comps):
    """The panels of one tp column, in drawing order (speedups first)."""
    out = {}
    for _, over in comps:
        out.setdefault(f"speedup:{over}", Panel(f"speedup:{over}", f"speedup over {over} (x)", "",
                                                speedup_over=over))
    out["time"] = Panel("time", "time / call (us)", "Time per call (median; band: 95% interval)", yscale="log")
    out["busbw"] = Panel("busbw", "bus bandwidth (GB/s)",
                         "Bus bandwidth, nccl-tests conventions (all-reduce x 2(n-1)/n, all-gather x (n-1)/n)")
    out["launches"] = Panel("launches", "launches / iteration", "")
    out["bytes"] = Panel("bytes", "bytes / iteration", "", yscale="log")
    out["graph"] = Panel("graph", "eager time / graph time", "Eager vs CUDA graph (host launch cost the graph removes)")
    return out


def group_oversubscription(vmap, report):
    """The oversubscription of a configuration's groups (fusebench_report.oversubscription), the
    first token count that has one, or None."""
    for t in sorted({t for pts in vmap.values() for t in pts}):
        o = fr.oversubscription([pts.get(t) for pts in vmap.values()], report.context)
        if o is not None:
            return o
    return None


def build_figure(model, op, layer, groups, reports, args, summary):
    """Builds one figure (returned, not saved: tests inspect it): small multiples, one column of
    panels per tp. Appends the figure's crossovers to summary."""
    keys = sorted(groups, key=lambda k: tuple(str(x) for x in k))
    tps = sorted({k[2] for k in keys})
    all_entries = [e for k in keys for v in groups[k].values() for e in v.values()]
    baseline = fr.baseline_variant(op, all_entries)
    variants = order_variants({v for k in keys for v in groups[k]}, baseline)
    comps = fr.comparisons(op, variants, baseline)
    series = Series(reports, keys)
    thr = args.threshold

    # At tp 1 a TP op's variants are one computation: charted once, as the baseline.
    collapsed = {}  # tp -> the variants folded into one line
    drawn_variants = {}
    for key in keys:
        present = [v for v in variants if groups[key].get(v)]
        if fr.one_computation(op, key[2]) and len(present) > 1:
            keep = baseline if baseline in present else present[0]
            collapsed[key[2]] = present
            drawn_variants[key] = [keep]
        else:
            drawn_variants[key] = present
    pairs = {(v, k): series.ident(v, k) for k in keys for v in drawn_variants[k]}
    # Accuracy beside speed (issue 29): each quantized series' worst quant_error in its label, and
    # where it grew over the baseline's, "less accurate".
    for (v, k), ident in pairs.items():
        acc = fr.accuracy(groups[k].get(v, {}), groups[k].get(baseline) if baseline else None)
        if acc is not None:
            series.accuracy[ident] = acc.text(baseline)
    idents = sorted(set(pairs.values()), key=lambda i: (variants.index(i[0]), [str(x) for x in i[1:]]))
    styles = Styles(idents, pairs)
    all_tokens = sorted({e.tokens for e in all_entries})

    cols = {tp: new_panels(comps) for tp in tps}
    ridges = []  # (tokens, label)
    ridge_notes = []
    ridge_marked = set()
    model_why_all = set()
    oversub = {}  # key -> Oversubscription

    for key in keys:
        vmap = groups[key]
        ri, tp = key[0], key[2]
        panels_here = cols[tp]
        report = reports[ri]
        ceil = figure_ceilings(report, key[1], args)
        backend = str(report.context.get("backend", "cuda" if report.context.get("gpu_name") else "cpu"))
        overhead_us = args.launch_overhead_us if args.launch_overhead_us is not None else \
            DEFAULT_LAUNCH_OVERHEAD_US.get(backend, 3.0)
        base_pts = vmap.get(baseline, {}) if baseline else {}
        over_cores = group_oversubscription(vmap, report)
        if over_cores is not None:
            oversub[key] = over_cores

        # Roofline ridge: once per report and ceiling, from the baseline's model intensity.
        if ceil and base_pts:
            ridge = ceil[0] / ceil[1]
            mark = (report.label, round(ridge, 3))
            if mark not in ridge_marked:
                ridge_marked.add(mark)
                rt = ridge_tokens(base_pts.values(), ridge)
                who = f"{key[1]}, {ceil[2]}" + (f", {series.report_name(ri)}" if "report" in series.varying else "")
                if rt:
                    ridges.append((rt, f"roofline ridge {ridge:.3g} FLOP/B at {rt:.0f} tokens ({who})"))
                elif any(e.counter("model_intensity") for e in base_pts.values()):
                    ridge_notes.append(f"roofline ridge {ridge:.3g} FLOP/B ({who}): not reached in the token range")

        for variant in drawn_variants[key]:
            pts = vmap.get(variant)
            s = (variant, key)
            toks = sorted(pts)
            p_launch, p_bytes = panels_here["launches"], panels_here["bytes"]
            p_launch.add(s, "model", [(t, pts[t].counter("model_launches")) for t in toks])
            p_launch.add(s, "measured", [(t, pts[t].counter("launches")) for t in toks])
            p_bytes.add(s, "model", [(t, pts[t].counter("model_bytes") or None) for t in toks])
            p_bytes.add(s, "measured", [(t, fr.measured_bytes(pts[t]) or None) for t in toks])
            if not comps or collapsed:  # a tp 1 column shows time: the other columns do too
                ivs = [pts[t].time_interval_ns() for t in toks]
                panels_here["time"].add(s, "measured",
                                        [(t, pts[t].time_ns / 1e3 if pts[t].time_ns else None) for t in toks],
                                        lo=[iv[0] / 1e3 if iv else None for iv in ivs],
                                        hi=[iv[1] / 1e3 if iv else None for iv in ivs])
            if not comps:
                kinds = sorted({k[: -len("_busbw")] for t in toks for k in pts[t].counters
                                if k.endswith("_busbw") and pts[t].counter(k)})
                for i, kind in enumerate(kinds):
                    panels_here["busbw"].add(s, "measured",
                                             [(t, (pts[t].counter(f"{kind}_busbw") or 0) / 1e9 or None) for t in toks],
                                             linestyle=["-", "-.", ":"][i % 3])
                    if len(kinds) > 1:
                        panels_here["busbw"].notes.append(
                            f"{series.label(pairs[s])}: {kind} line style {['solid', 'dash-dot', 'dotted'][i % 3]}")

        if tp in collapsed:
            continue  # one computation: no speedup to state
        for variant, over in comps:
            pts, base = vmap.get(variant), vmap.get(over)
            if not pts or not base:
                continue
            panel = panels_here[f"speedup:{over}"]
            s = (variant, key)
            label = series.label(pairs[s])
            ratios = {t: fr.speedup_between(pts[t], base.get(t), over) for t in sorted(pts) if t in base}
            ratios = {t: r for t, r in ratios.items() if r is not None}
            if not ratios:
                continue
            toks = sorted(ratios)
            methods = {ratios[t].method for t in toks}
            panel.methods |= methods
            panel.add(s, "measured", [(t, ratios[t].value) for t in toks],
                      lo=[ratios[t].ci_low for t in toks], hi=[ratios[t].ci_high for t in toks])
            cm = fx.crossover([(t, ratios[t].value, ratios[t].ci_low, ratios[t].ci_high) for t in toks], thr)
            if over_cores is not None:
                cm = fx.not_resolved_by_contention(cm, over_cores.as_dict())
            panel.crossings.append((s, cm, "measured"))
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
                    panel.add(s, "model", predicted)
                    cp = fx.crossover([(t, v, v, v) for t, v in predicted], thr)
                    panel.crossings.append((s, cp, "model"))
                else:
                    model_why = "n/a (no model counters)"
            if model_why:
                model_why_all.add(model_why)
            how = "" if methods == {fr.PAIRED} else (" [ratio of medians, no interval]" if methods == {fr.MEDIANS}
                                                     else " [intervals at some token counts only]")
            unjudged = sorted({ratios[t].not_judged for t in toks if ratios[t].not_judged})
            if unjudged:
                # No band and no crossover rest on them (fusebench_report.not_judged_reason).
                n = sum(1 for t in toks if ratios[t].not_judged)
                how += f" [not judged at {n} token count(s): {', '.join(unjudged)}]"
            measured = "not resolved: ranks oversubscribe the cores" if over_cores is not None \
                else fx.describe(cm, thr)
            if how:
                panel.notes.append(f"{label}{how}: measured {measured}" +
                                   (f" | model {fx.describe(cp, thr)}" if cp else ""))
            else:
                panel.notes.append((label, f"measured {measured}" + (f" | model {fx.describe(cp, thr)}" if cp else "")))
            summary.append({
                "model": model, "op": op, "layer": layer, "variant": variant, "over": over,
                "report": report.label, "dtype": key[1], "tp": key[2], "timing": key[3], "weights": key[4],
                "extra": key[5], "threshold": thr, "measured": cm, "model_prediction": cp,
                "model_note": model_why,
                "oversubscribed": over_cores.as_dict() if over_cores is not None else None,
                "ceilings": {"peak_flops": ceil[0], "bandwidth": ceil[1], "source": ceil[2]} if ceil else None,
                "launch_overhead_us": overhead_us,
                "speedup_method": sorted(methods),
                "speedup_measured": [[t, ratios[t].value, ratios[t].ci_low, ratios[t].ci_high, ratios[t].method]
                                     for t in toks],
                "not_judged": {str(t): ratios[t].not_judged for t in toks if ratios[t].not_judged},
                "speedup_model": predicted,
            })

    for tp in tps:
        add_advice(cols[tp].get(f"speedup:{baseline}"), [k for k in keys if k[2] == tp], reports,
                   model, op, layer, args)

    # Eager vs graph, per variant, when both regimes are present.
    for key in keys:
        if key[3] != "eager":
            continue
        gkey = key[:3] + ("graph",) + key[4:]
        if gkey not in groups:
            continue
        for variant in drawn_variants[key]:
            e, g = groups[key].get(variant, {}), groups[gkey].get(variant, {})
            cols[key[2]]["graph"].add((variant, key), "measured",
                                      [(t, e[t].time_ns / g[t].time_ns) for t in sorted(e)
                                       if t in g and e[t].time_ns and g[t].time_ns])

    for col in cols.values():
        for pid, panel in col.items():
            if panel.speedup_over:
                if panel.methods == {fr.PAIRED}:
                    how = "bands: 95% intervals of the paired, interleaved ratios"
                elif panel.methods == {fr.MEDIANS}:
                    how = "ratio of medians: the report has no intervals, so no crossover is resolved"
                else:
                    how = "bands where the report has intervals; ratio of medians elsewhere"
                panel.title = f"Speedup over {panel.speedup_over}" + (f" ({how})" if panel.methods else "")
        measured_launches = any(ln["kind"] == "measured" for ln in col["launches"].lines)
        col["launches"].title = "Launches: model (dashed) vs measured (solid)" + \
            ("" if measured_launches else " - no measured launches in these reports")
        measured_bytes = any(ln["kind"] == "measured" for ln in col["bytes"].lines)
        col["bytes"].title = "Bytes: model minimal (dashed) vs measured DRAM read+write (solid)" + \
            ("" if measured_bytes else " - no measured DRAM bytes in these reports")

    rows = [pid for pid in next(iter(cols.values())) if any(cols[tp][pid].lines for tp in tps)]
    if not rows:
        return None
    headers = {tp: column_header(op, tp, series, collapsed.get(tp), [oversub.get(k) for k in keys if k[2] == tp],
                                 baseline, bool(comps)) for tp in tps} if len(tps) > 1 or collapsed or oversub else {}
    fig = draw(model, op, layer, rows, cols, tps, headers, styles, series, pairs, ridges, ridge_notes,
               sorted(model_why_all), all_tokens, reports, keys, args, collapsed)
    return fig


def column_header(op, tp, series, collapsed, oversubs, baseline, has_speedup):
    """The title of a tp column: tp, its communicator, and what the reader must know first."""
    comm = series.column_comm.get(tp)
    head = f"tp {tp}" + (f" ({comm})" if comm else "")
    if collapsed:
        return (f"{head}: {', '.join(collapsed)} are one computation at tp 1 (nothing to exchange): "
                f"charted once, as {baseline if baseline in collapsed else collapsed[0]}")
    over = [o for o in oversubs if o is not None]
    if over:
        some = "" if len(over) == len(oversubs) else "some series: "
        return (f"{head}: {some}{over[0].text()}: times show contention, not the computation"
                + ("; no crossover is a result" if has_speedup else ""))
    return head


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


def _note_text(panel, ridge_notes):
    """The panel's notes, series that say the same thing on one line ("a, b: text")."""
    lines, said = [], {}
    for n in panel.notes:
        if isinstance(n, tuple):
            label, text = n
            if text in said:
                lines[said[text]][0].append(label)
                continue
            said[text] = len(lines)
            lines.append(([label], text))
        else:
            lines.append(n)
    lines = [f"{', '.join(x[0])}: {x[1]}" if isinstance(x, tuple) else x for x in lines]
    if panel.speedup_over:
        lines += ridge_notes
    return lines


def fill_lines(text, width):
    """Each line of text wrapped on its own (textwrap.fill would join them)."""
    return "\n".join(textwrap.fill(ln, width) for ln in text.split("\n"))


def wrap_lines(lines, width):
    wrapped = []
    for ln in lines:
        wrapped += textwrap.wrap(ln, max(int(width), 40), subsequent_indent="    ") or [""]
    return "\n".join(wrapped)


def figure_subtitle(args, series, model_whys, has_speedup):
    """What every panel shares, said once: the common configuration and the crossover rule."""
    parts = []
    if series.common:
        parts.append("every series: " + " ".join(series.common))
    if has_speedup:
        rule = (f"crossover of {args.threshold:g}x: measured only between token counts whose 95% intervals lie "
                f"wholly on opposite sides; model: cost-model prediction")
        if model_whys:
            rule += f" ({'; '.join(model_whys)})"
        parts.append(rule)
    return parts


class Legend:
    """Legend entries for what was drawn, and nothing else: each entry is added when the artist
    it explains is drawn (the artist carries the same label, so tests can match them)."""

    # The style key's order, after the series (by the start of each entry's label).
    KEY_ORDER = ("dashed, hollow: model", "band and bars", "threshold", "measured crossover", "model crossover",
                 "roofline ridge", "decode", "prefill")

    def __init__(self, series_order):
        self.series_order = list(series_order)  # series labels in the figure's order
        self.series, self.keys, self.labels = {}, [], set()

    def add(self, artist, handle, is_series=False):
        """artist: what was drawn (its label set to the handle's); handle: the legend's proxy."""
        label = handle.get_label()
        if artist is not None:
            artist.set_label(label)
        if label in self.labels:
            return
        self.labels.add(label)
        if is_series:
            self.series[label] = handle
        else:
            self.keys.append(handle)

    @property
    def handles(self):
        rank = lambda h: next((i for i, p in enumerate(self.KEY_ORDER) if h.get_label().startswith(p)),  # noqa: E731
                              len(self.KEY_ORDER))
        return [self.series[lb] for lb in self.series_order if lb in self.series] + \
            sorted(self.keys, key=rank)


def draw(model, op, layer, rows, cols, tps, headers, styles, series, pairs, ridges, ridge_notes, model_whys,
         all_tokens, reports, keys, args, collapsed):
    thr = args.threshold
    ncols = len(tps)
    notes = {(pid, tp): _note_text(cols[tp][pid], ridge_notes) for pid in rows for tp in tps}
    col_chars = 120 if ncols == 1 else 70
    title_chars = 90 if ncols == 1 else 62
    note_lines = sum(max(wrap_lines(notes[(pid, tp)], col_chars).count("\n") + 1 if notes[(pid, tp)] else 0
                         for tp in tps) for pid in rows)
    n_series = len({pairs[ln["series"]] for tp in tps for p in cols[tp].values() for ln in p.lines})
    n_legend = n_series + 8 + len(ridges) + sum(len(cols[tp][pid].advice) + 4 for tp in tps for pid in rows
                                                if cols[tp][pid].advice)
    panel_h = PANEL_HEIGHT_IN if ncols == 1 else 2.6
    height = max(panel_h * len(rows) + NOTE_LINE_IN * note_lines + 1.4 + (0.5 if headers else 0), 4.5)
    rows_fit = max(int((height - 0.6) / LEGEND_ROW_IN), 8)
    ncol = max(1, math.ceil(n_legend / rows_fit))
    col_w = 11 if ncols == 1 else 5.2
    width = col_w * ncols + 3.2 * ncol
    fig, grid = plt.subplots(len(rows), ncols, figsize=(width, height), sharex=True, layout="constrained",
                             squeeze=False, dpi=PNG_DPI)
    legend = Legend(series.label(i) for i in styles.idents)
    raw_titles = {}  # id(axes) -> its title before wrapping
    note_artists = []
    advice_drawn = set()
    lo_x = all_tokens[0] / 1.5 if all_tokens else 0.5
    hi_x = all_tokens[-1] * 1.5 if all_tokens else 2
    for r, pid in enumerate(rows):
        for c, tp in enumerate(tps):
            ax, panel = grid[r][c], cols[tp][pid]
            suffix = "" if ncols == 1 else f"@tp{tp}"
            title = panel.title
            if r == 0 and headers.get(tp):
                title = textwrap.fill(headers[tp], title_chars) + "\n" + title
            if not panel.lines:
                ax.set_gid(f"empty:{pid}{suffix}")
                why = (f"tp {tp}: one computation,\nno speedup to show" if panel.speedup_over and tp in collapsed
                       else f"no {pid} data at tp {tp}")
                ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.3")
                ax.set_xticks([])
                ax.set_yticks([])
                raw_titles[id(ax)] = title
                ax.set_title(fill_lines(title, title_chars), fontsize=9)
                continue
            ax.set_gid(f"panel:{pid}{suffix}")
            draw_panel(ax, panel, styles, pairs, series, legend, thr)
            advice_drawn |= fa.shade(ax, panel.advice, lambda v, k: styles.by_series.get((v, k), (None,))[0])
            for i, (rt, text) in enumerate(ridges):
                if lo_x <= rt <= hi_x:
                    legend.add(ax.axvline(rt, color="0.25", linestyle=RIDGE_STYLES[i % len(RIDGE_STYLES)],
                                          linewidth=1.2, gid="ridge"),
                               Line2D([], [], color="0.25", linestyle=RIDGE_STYLES[i % len(RIDGE_STYLES)], label=text))
            ax.set_ylabel(panel.ylabel if c == 0 or ncols == 1 else "")
            raw_titles[id(ax)] = title
            ax.set_title(fill_lines(title, title_chars), fontsize=9.5 if ncols == 1 else 9)
            ax.set_yscale(panel.yscale)
            if pid == "launches":  # after set_yscale, which resets the locator
                # A launch count is a whole number: integer ticks even when the view holds one integer.
                ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
            ax.set_xscale("log", base=2)
            if lo_x <= args.decode_max:
                legend.add(ax.axvspan(lo_x, min(args.decode_max, hi_x), color="tab:green", alpha=0.07, gid="decode"),
                           Patch(color="tab:green", alpha=0.2, label=f"decode (<= {args.decode_max} tokens)"))
            if args.prefill_min <= hi_x:
                legend.add(ax.axvspan(max(args.prefill_min, lo_x), hi_x, color="tab:orange", alpha=0.07,
                                      gid="prefill"),
                           Patch(color="tab:orange", alpha=0.2, label=f"prefill (>= {args.prefill_min} tokens)"))
            ax.grid(True, which="both", alpha=0.25)
            note = notes[(pid, tp)]
            if note:
                # Below the panel, outside the data area: the layout makes room for it.
                a = ax.annotate(wrap_lines(note, col_chars), xy=(0, 0), xycoords="axes fraction", xytext=(0, -6),
                                textcoords="offset points", va="top", ha="left", fontsize=NOTE_FONT,
                                family="monospace", gid="crossover-notes",
                                bbox={"facecolor": "white", "alpha": 0.9, "edgecolor": "0.7"})
                note_artists.append((ax, a, note))

    strips = [series_key_label(series, k) for tp in tps for pid in rows for k, _ in cols[tp][pid].advice]
    handles = legend.handles + advice_handles(advice_drawn, strips)
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, ncol=ncol, frameon=True)

    for c in range(ncols):
        bottom = grid[-1][c]
        if all_tokens and (bottom.get_gid() or "").startswith("panel:"):
            bottom.set_xticks(all_tokens)
            bottom.set_xticklabels([str(t) for t in all_tokens], fontsize=7, rotation=45)
            bottom.set_xlim(lo_x, hi_x)
        bottom.set_xlabel("tokens (M), log2")
    devices = ", ".join(sorted({reports[k[0]].device() for k in keys}))
    # Left-aligned and wrapped so that it never runs under the legend at the right.
    wrap = int(95 * (col_w * ncols) / 11)
    head = f"fusebench crossover: {model} {op}{' ' + layer if layer else ''}  [{devices}]"
    foot = figure_subtitle(args, series, model_whys, any(p.startswith("speedup:") for p in rows))
    fig.suptitle(textwrap.fill(head, wrap), fontsize=11, x=0.01, ha="left")
    if foot:
        fig.supxlabel("\n".join(textwrap.fill(x, int(wrap * 1.3)) for x in foot), fontsize=7.5, x=0.01, ha="left",
                      color="0.25")
    # The title re-wrapped until it ends left of the legend, each panel's title until it fits
    # its panel's width.
    titles = {id(ax): (raw_titles.get(id(ax), ""), title_chars) for row in grid for ax in row}
    for _ in range(4):
        fig.canvas.draw()
        rnd = fig.canvas.get_renderer()
        fits = True
        room = fig.legends[0].get_window_extent(rnd).x0 - fig._suptitle.get_window_extent(rnd).x0
        used = fig._suptitle.get_window_extent(rnd).width
        if used > room - 4:
            fits = False
            wrap = max(int(wrap * (room - 8) / used), 30)
            fig._suptitle.set_text(textwrap.fill(head, wrap))
        for row in grid:
            for ax in row:
                text, n = titles[id(ax)]
                aw, tw = ax.get_window_extent(rnd).width, ax.title.get_window_extent(rnd).width
                if text and tw > aw:
                    fits = False
                    n = max(int(n * 0.97 * aw / tw), 20)
                    titles[id(ax)] = (text, n)
                    ax.set_title(fill_lines(text, n), fontsize=ax.title.get_fontsize())
        if fits:
            break
    # Notes wrapped to the width the layout gave their panel, so they never widen it (a wider
    # note would squeeze the panel) and never run under the legend.
    chars = {id(a): col_chars for _, a, _ in note_artists}
    for _ in range(4):
        fig.canvas.draw()
        rnd = fig.canvas.get_renderer()
        too_wide = False
        for ax, a, note in note_artists:
            aw, nw = ax.get_window_extent(rnd).width, a.get_bbox_patch().get_window_extent(rnd).width
            if nw > aw or nw < 0.9 * aw:
                chars[id(a)] = max(chars[id(a)] * (0.97 * aw / nw), 40)
                a.set_text(wrap_lines(note, chars[id(a)]))
                too_wide = too_wide or nw > aw
        if not too_wide:
            break
    return fig


def series_key_label(series, key):
    """A configuration's label in the advice strips' legend entry."""
    shown = [series._show(f, v) for f, v in zip(Series.FIELDS, series._parts(key)) if v]
    return f"tp{key[2]} " + " ".join(shown)


def draw_panel(ax, panel, styles, pairs, series, legend, thr):
    """One cell: its lines, bands, reference and threshold lines, and crossings."""
    for ln in panel.lines:
        color, marker = styles(*ln["series"])
        if ln["kind"] == "model":
            art, = ax.plot(ln["x"], ln["y"], linestyle="--", color=color, marker=marker, markersize=4,
                           fillstyle="none", alpha=0.8, gid="data:model")
            legend.add(None, Line2D([], [], color=color, marker=marker, markersize=5,
                                    label=series.label(pairs[ln["series"]])), is_series=True)
            legend.add(art, Line2D([], [], color="0.3", marker="o", fillstyle="none", linestyle="--",
                                   markersize=4,
                                   label="dashed, hollow: model (speedup: max(F/peak, B/bw) + launches x overhead)"))
            continue
        art, = ax.plot(ln["x"], ln["y"], linestyle=ln["linestyle"] or "-", color=color, marker=marker,
                       markersize=4, gid="data:measured")
        legend.add(art, Line2D([], [], color=color, marker=marker, markersize=5,
                               label=series.label(pairs[ln["series"]])), is_series=True)
        if ln["lo"] is not None and any(v is not None for v in ln["lo"]):
            lo = [v if v is not None else math.nan for v in ln["lo"]]
            hi = [v if v is not None else math.nan for v in ln["hi"]]
            band = ax.fill_between(ln["x"], lo, hi, color=color, alpha=0.15, linewidth=0, gid="interval-band")
            legend.add(band, Patch(color="0.3", alpha=0.25, label="band and bars: 95% interval"))
            xs = [x for x, a in zip(ln["x"], ln["lo"]) if a is not None]
            ys = [y for y, a in zip(ln["y"], ln["lo"]) if a is not None]
            err = [[y - a for y, a in zip(ys, [v for v in ln["lo"] if v is not None])],
                   [b - y for y, b in zip(ys, [v for v in ln["hi"] if v is not None])]]
            ax.errorbar(xs, ys, yerr=err, fmt="none", ecolor=color, elinewidth=0.8, capsize=2,
                        gid="interval-bars")
    if not panel.speedup_over:
        return
    ax.axhline(1.0, color="0.5", linewidth=0.8, gid="reference")
    legend.add(ax.axhline(thr, color="0.35", linewidth=0.9, linestyle=(0, (4, 3)), gid="threshold"),
               Line2D([], [], color="0.35", linestyle=(0, (4, 3)), label=f"threshold {thr:g}x"))
    for s, c, kind in panel.crossings:
        color, marker = styles(*s)
        for x in c["crossings"]:
            if kind == "measured":
                est = x["tokens"] or math.sqrt(x["tokens_low"] * x["tokens_high"])
                eb = ax.errorbar([est], [thr], xerr=[[est - x["tokens_low"]], [x["tokens_high"] - est]],
                                 fmt=marker, color=color, markersize=6, capsize=4, elinewidth=2.2, gid="crossing")
                legend.add(eb.lines[0], Line2D([], [], color="0.3", marker="o", linewidth=2.2,
                                               label="measured crossover: interval between resolved points"))
            elif x["tokens"]:
                legend.add(ax.axvline(x["tokens"], color=color, linewidth=1, linestyle="--", gid="model-crossing"),
                           Line2D([], [], color="0.3", linestyle="--", label="model crossover"))


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
    # TP or EP (tp_moe): time against tokens with the cost model's prediction (plot_tp_moe.py).
    tp_moe, args.tp_moe_summary = plot_tp_moe.figures(reports, args.output, slug)
    return out + tp_moe, summary


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
           "charts": [os.path.basename(w) for w in written], "crossovers": summary,
           "tp_moe": args.tp_moe_summary}
    tmp = os.path.join(args.output, "crossover.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, os.path.join(args.output, "crossover.json"))
    for w in written:
        print(f"plot_crossover: wrote {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
