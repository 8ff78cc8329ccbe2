"""Reads fusebench reports (Google Benchmark JSON) for the chart and HTML scripts.

Tolerant by design: unknown keys are kept, missing counters stay missing (None, never 0),
non-finite numbers are treated as missing, aggregates and failed runs are folded or skipped.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field

# Google Benchmark's structural fields: not counters.
STRUCTURAL = {
    "family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads",
    "iterations", "real_time", "cpu_time",
}
TIME_SCALE_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# Nominal datasheet ceilings, used only when a report carries no measured ones (labelled so).
NOMINAL_CEILINGS = {
    # substring of gpu_name: (dense bf16/fp16 FLOP/s, HBM bytes/s)
    "H200": (989e12, 4.8e12),
    "H100": (989e12, 3.35e12),
    "A100": (312e12, 2.0e12),
}


@dataclass
class Entry:
    name: str
    op: str
    variant: str
    model: str
    tokens: int
    tp: int
    dtype: str
    timing: str  # "" when the report has no timing regimes
    extra: str  # other name segments (e.g. comm:...), so distinct series stay distinct
    time_ns: float | None
    counters: dict = field(default_factory=dict)
    fields: dict = field(default_factory=dict)  # non-numeric per-entry fields
    error: str | None = None

    def counter(self, key):
        v = self.counters.get(key)
        return v if isinstance(v, (int, float)) and math.isfinite(v) else None


@dataclass
class Report:
    path: str
    label: str
    context: dict
    entries: list

    def device(self) -> str:
        c = self.context
        if c.get("gpu_name") and c.get("backend") != "cpu":
            return str(c["gpu_name"])
        return f"{c.get('backend', 'cpu')}: {c.get('cpu_model', 'unknown CPU')}"

    def ceilings(self, dtype: str):
        """(peak FLOP/s, bandwidth B/s, source) or None: measured context ceilings first, then
        nominal figures for a known GPU."""
        c = self.context.get("ceilings")
        if isinstance(c, dict):
            bw = _num(c.get("bandwidth"))
            peak = None
            by = c.get("peak_flops_by_dtype")
            if isinstance(by, dict):
                peak = _num(by.get(dtype))
            peak = peak or _num(c.get("peak_flops"))
            if bw and peak:
                return peak, bw, str(c.get("source", "context"))
        gpu = str(self.context.get("gpu_name", ""))
        for key, (peak, bw) in NOMINAL_CEILINGS.items():
            if key in gpu and dtype in ("bf16", "fp16"):
                return peak, bw, "nominal " + key
        return None


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def parse_name(name: str) -> dict:
    """'qkv/fused/model:m/tokens:16/tp:1/dtype:bf16/timing:cold/manual_time' -> fields."""
    parts = name.split("/")
    out = {"op": parts[0] if parts else "", "variant": parts[1] if len(parts) > 1 else "", "extra": []}
    for seg in parts[2:]:
        if ":" in seg:
            k, v = seg.split(":", 1)
            if k in ("model", "tokens", "tp", "dtype", "timing"):
                out[k] = v
            elif k in ("iterations", "repeats", "min_time", "min_warmup_time", "threads"):
                pass  # Google Benchmark's run settings, not a different configuration
            else:
                out["extra"].append(seg)
        elif seg not in ("manual_time", "real_time", "process_time"):
            out["extra"].append(seg)
    return out


def load(path: str, label: str | None = None) -> Report:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)  # Python accepts NaN; such values are dropped below
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError(f"{path}: not a Google Benchmark report (no 'benchmarks' array)")
    context = doc.get("context") if isinstance(doc.get("context"), dict) else {}
    groups: dict[str, dict] = {}
    order = []
    for b in doc["benchmarks"]:
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            continue
        run_name = b.get("run_name") if isinstance(b.get("run_name"), str) else b["name"]
        if run_name not in groups:
            groups[run_name] = {"reps": [], "aggs": {}, "first": None, "error": None}
            order.append(run_name)
        g = groups[run_name]
        scale = TIME_SCALE_NS.get(b.get("time_unit", "ns"), 1.0)
        if b.get("error_occurred"):
            g["error"] = str(b.get("error_message", "error"))
            continue
        t = _num(b.get("real_time"))
        if b.get("run_type") == "aggregate":
            if t is not None and b.get("aggregate_name") in ("median", "mean"):
                g["aggs"][b["aggregate_name"]] = t * scale
            if g["first"] is None and b.get("aggregate_name") == "mean":
                g["first"] = b
            continue
        if t is not None:
            g["reps"].append(t * scale)
        if g["first"] is None or g["first"].get("run_type") == "aggregate":
            g["first"] = b
    entries = []
    for run_name in order:
        g = groups[run_name]
        b = g["first"] or {}
        p = parse_name(run_name)
        if "median" in g["aggs"]:
            t = g["aggs"]["median"]
        elif g["reps"]:
            t = statistics.median(g["reps"])
        else:
            t = g["aggs"].get("mean")
        counters = {k: v for k, v in b.items() if _num(v) is not None and k not in STRUCTURAL}
        fields_ = {k: v for k, v in b.items() if isinstance(v, str)}
        try:
            tokens = int(b.get("tokens", p.get("tokens", 0)))
        except (TypeError, ValueError):
            tokens = 0
        try:
            tp = int(b.get("tp", p.get("tp", 1)))
        except (TypeError, ValueError):
            tp = 1
        entries.append(Entry(
            name=run_name,
            op=str(b.get("op", p["op"])),
            variant=str(b.get("variant", p["variant"])),
            model=str(b.get("model", p.get("model", "?"))),
            tokens=tokens,
            tp=tp,
            dtype=str(b.get("dtype", p.get("dtype", "?"))),
            timing=str(b.get("timing", p.get("timing", ""))) if isinstance(b.get("timing", ""), str) else p.get("timing", ""),
            extra="/".join(p["extra"]),
            time_ns=t if (t is not None and t > 0 and g["error"] is None) else None,
            counters=counters,
            fields=fields_,
            error=g["error"] if not g["reps"] and not g["aggs"] else None,
        ))
    rep = Report(path=path, label=label or "", context=context, entries=entries)
    if not rep.label:
        rep.label = rep.device()
    return rep


def load_all(paths, labels=None) -> list:
    reports = [load(p, (labels or [None] * len(paths))[i] if labels and i < len(labels) else None)
               for i, p in enumerate(paths)]
    # Two runs on one device would share a label: add the file name so lines stay apart.
    seen = {}
    for r in reports:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in reports:
        if seen[r.label] > 1:
            r.label = f"{r.label} ({r.path})"
    return reports


def measured_bytes(e: Entry):
    """DRAM bytes read + written when the report has them, else None (unavailable)."""
    r, w = e.counter("dram_read_bytes"), e.counter("dram_write_bytes")
    if r is None and w is None:
        return None
    return (r or 0.0) + (w or 0.0)


def predicted_seconds(e: Entry, peak_flops: float, bandwidth: float, launch_overhead_s: float):
    """Cost-model time: roofline on the entry's totals plus a fixed cost per launch."""
    f, b, n = e.counter("model_flops"), e.counter("model_bytes"), e.counter("model_launches")
    if f is None or b is None or n is None:
        return None
    return max(f / peak_flops, b / bandwidth) + n * launch_overhead_s
