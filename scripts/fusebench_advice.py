"""Reads the advice fusebench-advise writes (advice.json, docs/advise.md) for the charts and the
HTML page. The decisions are made once, by the C++ advisor; this module only finds and draws them.
"""
from __future__ import annotations

import html
import json
import re

SCHEMA = "fusebench-advice"
DEFAULT_LAYER = {"qkv": "attention", "tp_attn": "attention", "gate_up": "dense", "tp_mlp": "dense"}
EITHER_COLOR = "0.72"


def load(path):
    """The advice document; ValueError when the file is not fusebench-advise's JSON."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("comparisons"), list):
        raise ValueError(f"{path}: not a fusebench-advise JSON document (schema {SCHEMA!r})")
    return doc


def device_id(context):
    """The advisor's device identity ("gpu: NVIDIA H200", "cpu: AMD EPYC")."""
    backend = context.get("backend") if isinstance(context.get("backend"), str) else ""
    gpu = context.get("gpu_name") if isinstance(context.get("gpu_name"), str) else ""
    if gpu and backend != "cpu":
        return "gpu: " + gpu
    cpu = context.get("cpu_model") if isinstance(context.get("cpu_model"), str) else ""
    return f"{backend or 'cpu'}: {cpu or 'unknown'}"


def find(doc, context, model, op, layer, dtype, tp, timing, weights, extra):
    """The comparison of one chart series, or None. `extra` holds the name's other segments
    (e.g. comm:inprocess)."""
    if not doc:
        return None
    comm = ""
    for seg in (extra or "").split("/"):
        if seg.startswith("comm:"):
            comm = seg[len("comm:"):]
    dev = device_id(context)
    for c in doc["comparisons"]:
        if (c.get("device"), c.get("model"), c.get("op"), c.get("layer") or "", c.get("dtype"), c.get("tp"),
                c.get("timing") or "", c.get("weights") or "", c.get("comm") or "") == \
                (dev, model, op, layer or "", dtype, tp, timing or "", weights or "", comm):
            return c
    return None


def span(r):
    lo, hi = r["tokens_low"], r["tokens_high"]
    return str(lo) if lo == hi else f"{lo}-{hi}"


def summary(c):
    """"use: fused 1-64, either 256, use: split 1024-16384" (unresolved ranges left out)."""
    parts = [f"{r['label']} {span(r)}" for r in c["ranges"] if r["decision"] != "unresolved" or
             r["label"].startswith("modelled")]
    return ", ".join(parts) or "unresolved at every token count"


def shade(ax, rows, color_of):
    """Strips at the bottom of a speedup panel, one per configuration (bottom up), each token range
    coloured by its decision: the colour of the variant to use, grey for either, hatched for
    unresolved. rows: [(series key, comparison)]; color_of(variant, key) -> colour or None.
    Returns the decisions drawn, for the legend."""
    drawn = set()
    n = len(rows)
    if not n:
        return drawn
    h = min(0.05, 0.3 / n)
    for i, (key, c) in enumerate(rows):
        y0, y1 = 0.005 + i * h, 0.005 + (i + 0.8) * h
        # Unresolved first, so a one-token decision drawn over a gap stays visible.
        for r in sorted(c["ranges"], key=lambda r: r["decision"] != "unresolved"):
            lo, hi = r["tokens_low"], r["tokens_high"]
            # A range of few token counts is narrow on the log2 axis: give it a visible width.
            x0, x1 = min(lo - 0.5, lo / 2 ** 0.12), max(hi + 0.5, hi * 2 ** 0.12)
            if r["decision"] == "use":
                color = color_of(r["variants"][0], key) or "0.3"
                ax.axvspan(x0, x1, ymin=y0, ymax=y1, facecolor=color, alpha=0.55, linewidth=0, gid="advice-use")
                drawn.add(("use", r["variants"][0], color))
            elif r["decision"] == "either":
                ax.axvspan(x0, x1, ymin=y0, ymax=y1, facecolor=EITHER_COLOR, alpha=0.7, linewidth=0,
                           gid="advice-either")
                drawn.add(("either", "", EITHER_COLOR))
            else:
                ax.axvspan(x0, x1, ymin=y0, ymax=y1, facecolor="none", edgecolor="0.6", hatch="////",
                           linewidth=0, gid="advice-unresolved")
                drawn.add(("unresolved", "", "none"))
    return drawn


def chart_name(c):
    """The chart a comparison is drawn in (scripts/plot_crossover.py's chart_base_name)."""
    def slug(s):
        return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-")
    name = f"crossover_{slug(c['model'])}_{slug(c['op'])}"
    if c.get("layer") and c["layer"] != DEFAULT_LAYER.get(c["op"]):
        name += f"_{slug(c['layer'])}"
    return name


def html_table(comparisons):
    """One table: a row per token range of each comparison, with its basis and evidence."""
    if not comparisons:
        return ""
    rows = []
    devices = len({c.get("device") for c in comparisons}) > 1
    for c in comparisons:
        config = " ".join(x for x in (c.get("device") if devices else "", c.get("dtype"), f"tp{c.get('tp')}", c.get("timing"),
                                      f"comm:{c['comm']}" if c.get("comm") else "",
                                      f"weights:{c['weights']}" if c.get("weights") not in ("", "random", None)
                                      else "") if x)
        for r in c["ranges"]:
            ev = "; ".join(f"{p['tokens']}: {p['reason']}" for p in r.get("evidence", [])) or r.get("reason", "")
            cls = {"use": "adv-use", "either": "adv-either"}.get(r["decision"], "adv-unresolved")
            rows.append(f"<tr><td class='s'>{html.escape(c['op'])}</td><td class='s'>{html.escape(config)}</td>"
                        f"<td>{html.escape(span(r))}</td><td class='s {cls}'>{html.escape(r['label'])}</td>"
                        f"<td class='s'>{html.escape(r['basis'])}</td>"
                        f"<td class='s adv-ev' title='{html.escape(r.get('high_end', ''), quote=True)}'>"
                        f"{html.escape(ev)}</td></tr>")
    return ("<table class='advice'><thead><tr><th class='s'>op</th><th class='s'>configuration</th>"
            "<th>tokens</th><th class='s'>advice</th><th class='s'>basis</th><th class='s'>evidence</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table>")
