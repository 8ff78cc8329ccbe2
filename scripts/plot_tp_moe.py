"""TP or EP charts for the tp_moe op (issue 40; docs/charts.md, docs/tp.md), drawn by
plot_crossover.py beside the crossover charts.

Per model (and dtype, timing regime, weights): one column per tp and communicator, each variant's
measured time against tokens (log2 axis; the median's 95% interval as a band where the entry is
judged, a hollow marker where it is not: contended, or fewer than 6 values), and beside it the
cost model's prediction the entry carries (moe_ranks.predicted.pipeline_seconds: every rank's
plan by the roofline on nominal H200 ceilings, collectives on the nvlink-h200 link; modelled,
dashed). Each column names where the fastest variant changes from tp to an expert-parallel one
(or back): by the model, and by the measured medians where every entry at the token counts is
judged. Writes tp_moe_<model>[_<dtype>...].png/.svg; the summary goes to crossover.json's
"tp_moe".
"""
from __future__ import annotations

import math
from collections import defaultdict

import fusebench_report as fr

VARIANTS = ["tp", "ep_ar", "ep_ag_rs", "ep_a2a"]
COLORS = {"tp": "tab:blue", "ep_ar": "tab:orange", "ep_ag_rs": "tab:green", "ep_a2a": "tab:red"}


def predicted_seconds(e):
    """moe_ranks.predicted.pipeline_seconds, or None."""
    ranks = e.fields.get("moe_ranks")
    pred = ranks.get("predicted") if isinstance(ranks, dict) else None
    v = pred.get("pipeline_seconds") if isinstance(pred, dict) else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 else None


def judged(e):
    """Whether e's time may be judged: not contended, and 6 values or more (fusebench_report)."""
    return fr.not_judged_reason(e, None) is None


def group(reports):
    """{(model, dtype, timing, weights, report): {(tp, extra): {variant: {tokens: Entry}}}}"""
    out = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for ri, r in enumerate(reports):
        for e in r.entries:
            if e.op != "tp_moe" or e.tp < 2 or e.tokens <= 0 or e.error:
                continue
            out[(e.model, e.dtype, e.timing, e.weights, ri)][(e.tp, e.extra)][e.variant][e.tokens] = e
    return out


def side(variant):
    return "tp" if variant == "tp" else "ep"


def fastest(series, tokens, seconds):
    """{tokens: the variant with the least seconds(entry)} where two or more variants have one."""
    out = {}
    for t in tokens:
        vals = {v: seconds(s[t]) for v, s in series.items() if t in s}
        vals = {v: x for v, x in vals.items() if x is not None}
        if len(vals) >= 2:
            out[t] = min(vals, key=vals.get)
    return out


def crossovers(winners):
    """[{below, at, from, to}] where the winner's side (tp or ep) changes between token counts."""
    out, last = [], None
    for t in sorted(winners):
        if last is not None and side(winners[last]) != side(winners[t]):
            out.append({"below": last, "at": t, "from": winners[last], "to": winners[t]})
        last = t
    return out


def crossover_text(kind, found, winners):
    if not winners:
        return f"{kind}: none decided"
    if not found:
        return f"{kind}: {'TP' if side(next(iter(winners.values()))) == 'tp' else 'EP'} fastest throughout"
    return f"{kind}: " + "; ".join(f"{c['to']} from {c['at']} (after {c['from']} at {c['below']})"
                                   for c in found)


def column(ax, series, tokens):
    """Draws one column; returns its summary."""
    for v in sorted(series, key=lambda x: VARIANTS.index(x) if x in VARIANTS else len(VARIANTS)):
        s, color = series[v], COLORS.get(v, "tab:gray")
        ts = [t for t in tokens if t in s and s[t].time_ns]
        ax.plot(ts, [s[t].time_ns * 1e-9 for t in ts], "-", color=color, label=f"{v} measured")
        for t in ts:
            e = s[t]
            ax.plot([t], [e.time_ns * 1e-9], "o", color=color,
                    markerfacecolor=color if judged(e) else "none")
            ci = e.time_interval_ns() if judged(e) else None
            if ci:
                ax.fill_between([t * 0.95, t * 1.05], ci[0] * 1e-9, ci[1] * 1e-9, color=color, alpha=0.2)
        pts = [(t, predicted_seconds(s[t])) for t in tokens if t in s]
        pts = [(t, p) for t, p in pts if p is not None]
        if pts:
            ax.plot([t for t, _ in pts], [p for _, p in pts], "--", color=color, alpha=0.8,
                    label=f"{v} modelled (H200)")
    modelled = fastest(series, tokens, predicted_seconds)
    judged_tokens = [t for t in tokens if all(judged(s[t]) for s in series.values() if t in s)]
    measured = fastest(series, judged_tokens, lambda e: e.time_ns * 1e-9 if e.time_ns else None)
    not_judged = {f"{v}@{t}": fr.not_judged_reason(s[t], None)
                  for v, s in series.items() for t in s if not judged(s[t])}
    return {"fastest_modelled": modelled, "crossovers_modelled": crossovers(modelled),
            "fastest_measured": measured, "crossovers_measured": crossovers(measured),
            "not_judged": not_judged}


def figures(reports, output_dir, slug):
    """[(base path, figure)], [summary per column]. Figures are left open for the caller."""
    import os

    import matplotlib.pyplot as plt

    out, summary = [], []
    for (model, dtype, timing, weights, ri), columns in sorted(group(reports).items()):
        keys = sorted(columns)
        fig, axes = plt.subplots(1, len(keys), figsize=(max(6.4, 5.2 * len(keys)), 5.0), squeeze=False)
        for ax, (tp, extra) in zip(axes[0], keys):
            series = columns[(tp, extra)]
            tokens = sorted({t for s in series.values() for t in s})
            col = column(ax, series, tokens)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("tokens")
            ax.set_ylabel("seconds per layer")
            ax.grid(True, which="both", alpha=0.3)
            title = f"tp {tp}" + (f" · {extra}" if extra else "")
            lines = [crossover_text("modelled", col["crossovers_modelled"], col["fastest_modelled"]),
                     crossover_text("measured medians", col["crossovers_measured"], col["fastest_measured"])]
            if col["not_judged"]:
                lines.append(f"{len(col['not_judged'])} entries not judged (hollow)")
            ax.set_title(title + "\n" + "\n".join(lines), fontsize=7)
            ax.legend(fontsize=6)
            summary.append({"model": model, "dtype": dtype, "timing": timing, "weights": weights,
                            "report": reports[ri].label, "tp": tp, "comm": extra,
                            "variants": sorted(series), "tokens": tokens, **col})
        fig.suptitle(f"tp_moe · {model} · {dtype}" + (f" · {timing}" if timing else "") +
                     "\nmeasured: solid (hollow = not judged); modelled (H200, NVLink): dashed", fontsize=8)
        fig.tight_layout()
        name = "_".join(slug(x) for x in ("tp_moe", model, dtype, timing, weights) if x)
        if len(reports) > 1:
            name += f"_{slug(reports[ri].label)}"
        out.append((os.path.join(output_dir, name), fig))
    return out, summary
