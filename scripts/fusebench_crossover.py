"""Where a speedup curve crosses a threshold, stated only where the 95% intervals resolve it
(docs/charts.md, "Crossovers"). Pure Python: used by the charts, the HTML page and the summary.

Each token count is classified against the threshold:
  above       the interval lies wholly above it (ci_low > threshold),
  below       wholly below it (ci_high < threshold),
  unresolved  the interval straddles it, or the point has no interval at all.
A crossing is placed only between two consecutive *resolved* points on opposite sides; its
interval is the token range between them (the unresolved points in between, if any, are inside
it). A model prediction has no noise: pass its values as degenerate intervals (lo = hi = value).
"""
from __future__ import annotations

import math

ABOVE, BELOW, UNRESOLVED = "above", "below", "unresolved"


def classify(value, lo, hi, threshold):
    if lo is None or hi is None:
        return UNRESOLVED
    if lo > threshold:
        return ABOVE
    if hi < threshold:
        return BELOW
    return UNRESOLVED


def _log2_interp(t0, v0, t1, v1, threshold):
    """Token count where the straight line between (log2 t0, v0) and (log2 t1, v1) meets threshold."""
    if v0 == v1:
        return math.sqrt(t0 * t1)
    f = (threshold - v0) / (v1 - v0)
    f = min(max(f, 0.0), 1.0)
    return 2 ** (math.log2(t0) + f * (math.log2(t1) - math.log2(t0)))


def crossover(points, threshold):
    """points: [(tokens, value, ci_low, ci_high)] (ci_* None when there is no interval).

    Returns a dict:
      kind: "cross_up" | "cross_down" | "multiple" | "always_above" | "always_below" |
            "not_resolved" | "no_data"
      crossings: [{"direction": "up"|"down", "tokens_low", "tokens_high", "tokens"}] where
            tokens is the central values' crossing, interpolated on the log2 axis, inside
            [tokens_low, tokens_high] (the crossing's interval);
      states: [[tokens, "above"|"below"|"unresolved"]];
      has_intervals: whether any point had an interval;
      tokens: the first crossing's interpolated token count, or None (kept for older readers).
    always_above / always_below need every point resolved on that side: one unresolved point
    makes the curve "not_resolved" unless a resolved crossing exists.
    """
    pts = sorted((t, v, lo, hi) for t, v, lo, hi in points
                 if t and t > 0 and v is not None and math.isfinite(v))
    if not pts:
        return {"kind": "no_data", "crossings": [], "states": [], "has_intervals": False, "tokens": None,
                "threshold": threshold}
    states = [(t, classify(v, lo, hi, threshold)) for t, v, lo, hi in pts]
    resolved = [i for i, (_, s) in enumerate(states) if s != UNRESOLVED]
    crossings = []
    for a, b in zip(resolved, resolved[1:]):
        sa, sb = states[a][1], states[b][1]
        if sa == sb:
            continue
        direction = "up" if sa == BELOW else "down"
        est = None
        # The central values go from one side to the other between a and b: find the first
        # neighbouring pair that does so in this direction.
        for i in range(a, b):
            v0, v1 = pts[i][1], pts[i + 1][1]
            if (direction == "up" and v0 < threshold <= v1) or (direction == "down" and v0 > threshold >= v1):
                est = _log2_interp(pts[i][0], v0, pts[i + 1][0], v1, threshold)
                break
        crossings.append({"direction": direction, "tokens_low": pts[a][0], "tokens_high": pts[b][0],
                          "tokens": est})
    kinds = {s for _, s in states}
    if len(crossings) == 1:
        kind = "cross_up" if crossings[0]["direction"] == "up" else "cross_down"
    elif crossings:
        kind = "multiple"
    elif kinds == {ABOVE}:
        kind = "always_above"
    elif kinds == {BELOW}:
        kind = "always_below"
    else:
        kind = "not_resolved"
    return {"kind": kind, "crossings": crossings, "states": [[t, s] for t, s in states],
            "has_intervals": any(lo is not None and hi is not None for _, _, lo, hi in pts),
            "tokens": crossings[0]["tokens"] if crossings else None, "threshold": threshold}


def _state_runs(states):
    """[[t, s], ...] -> [[s, first t, last t]] over consecutive token counts of one state."""
    runs = []
    for t, s in states:
        if runs and runs[-1][0] == s:
            runs[-1][2] = t
        else:
            runs.append([s, t, t])
    return runs


def _runs(states):
    """[[t, s], ...] -> "above 1-16, unresolved 64-256" (consecutive token counts of one state)."""
    runs = _state_runs(states)
    return ", ".join(f"{s} {a}" if a == b else f"{s} {a}-{b}" for s, a, b in runs)


def _token_range(c):
    lo, hi = c["tokens_low"], c["tokens_high"]
    est = f", ~{c['tokens']:.0f}" if c.get("tokens") else ""
    return f"{lo}-{hi} tokens{est}"


def not_resolved_by_contention(c, oversubscribed):
    """c restated as not resolved: the ranks' threads outnumbered the cores, so the curve shows
    their contention, not the computation (oversubscribed: fusebench_report.Oversubscription's
    as_dict). The per-token states stay, for the record; no crossing is kept."""
    return dict(c, kind="not_resolved", crossings=[], tokens=None, oversubscribed=oversubscribed)


def crossing_interval(c, threshold=None):
    """The token interval of each resolved crossing ("16-256"), else why there is none: one cell
    of the page's crossover table."""
    if c.get("crossings"):
        return "; ".join(f"{x['direction']} {x['tokens_low']}-{x['tokens_high']}" for x in c["crossings"])
    if c.get("oversubscribed"):
        return "none: ranks oversubscribe the cores"
    kind = c.get("kind")
    if kind in ("always_above", "always_below"):
        return f"none: {kind.split('_')[1]} at every token count"
    if kind == "not_resolved":
        if not c.get("has_intervals"):
            return "none: no 95% interval"
        thr = f"{(threshold if threshold is not None else c.get('threshold', 0)):g}x"
        runs = [r for r in _state_runs(c.get("states") or []) if r[0] == UNRESOLVED]
        where = ", ".join(f"{a}" if a == b else f"{a}-{b}" for _, a, b in runs)
        return f"none resolved: intervals straddle {thr} at {where}" if runs else "none resolved"
    return "no data"


def describe(c, threshold=None):
    """One line for a chart note or a table cell; says "not resolved" where it is."""
    thr = f"{(threshold if threshold is not None else c.get('threshold', 0)):g}x"
    kind = c.get("kind")
    states = c.get("states") or []
    span = f"{states[0][0]}-{states[-1][0]}" if states else ""
    if c.get("oversubscribed"):
        return f"not resolved: {c['oversubscribed']['text']} (contention, not the computation)"
    if kind == "cross_up":
        return f"rises above {thr} between {_token_range(c['crossings'][0])}"
    if kind == "cross_down":
        return f"falls under {thr} between {_token_range(c['crossings'][0])}"
    if kind == "multiple":
        return f"crosses {thr} {len(c['crossings'])} times: " + "; ".join(
            f"{x['direction']} {_token_range(x)}" for x in c["crossings"])
    if kind == "always_above":
        return f"none: above {thr} at every token count ({span})"
    if kind == "always_below":
        return f"none: below {thr} at every token count ({span})"
    if kind == "not_resolved":
        if not c.get("has_intervals"):
            return "not resolved (no 95% interval at any token count: too few pairs, contended, or a ratio of medians)"
        return f"not resolved (vs {thr}: {_runs(states)})"
    return "no data"
