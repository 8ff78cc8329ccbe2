"""Synthetic fusebench reports for the chart, HTML and summary tests: the shape of a real report
(Google Benchmark entries with fusebench's fields, names per COMMON contract 1) with chosen
times and, when asked, the interleaved speedups and intervals of contract 2."""
from __future__ import annotations

import copy
import json

CPU_CONTEXT = {
    "backend": "cpu",
    "backend_reason": "requested with --backend=cpu",
    "cpu_model": "AMD EPYC",
    "num_cpus": 2,
    "library_build_type": "release",
    "git_revision": "0123456789abcdef0123456789abcdef01234567",
    "command_line": "build/bin/fusebench --backend=cpu --report=x.json",
    "ceilings": {"bandwidth": 1.6e10, "peak_flops": 4.5e10, "peak_flops_by_dtype": {"fp32": 4.5e10},
                 "source": "measured"},
    "caches": [{"level": 1, "num_sharing": 1, "size": 49152, "type": "Data"},
               {"level": 3, "num_sharing": 2, "size": 33554432, "type": "Unified"}],
    "libraries": {"google_benchmark": "1.7.1", "nccl": "2.28.9"},
    "timing": {"regimes": ["eager"], "stopping_rule": {"max_time_s": 0.5, "min_samples": 5},
               "interval_method": "95% order-statistic interval of the median of per-round paired ratios"},
    "verification": [
        {"op": "qkv", "variant": "split", "model": "qwen3-0.6b", "tp": 1, "tokens": 1, "dtype": "fp32", "ok": True,
         "float64_reference": True,
         "comparisons": [{"output": "q", "against": "float64", "elements": 2048, "max_abs_error": 4.5e-07,
                          "max_rel_error": 0.0033, "mismatches": 0}]},
        {"op": "qkv", "variant": "fused", "model": "qwen3-0.6b", "tp": 1, "tokens": 37, "dtype": "bf16", "ok": False,
         "float64_reference": True,
         "comparisons": [{"output": "q", "against": "split", "elements": 2048, "max_abs_error": 0.25,
                          "max_rel_error": 0.5, "mismatches": 3},
                         {"output": "q", "against": "float64", "elements": 2048, "max_abs_error": 0.2,
                          "max_rel_error": 0.4, "mismatches": 2}]},
    ],
}

# Model counters per (op, variant) at one token; scaled with tokens below.
MODEL = {
    "split": (3, 8.4e6, 1.68e7), "fused": (1, 8.4e6, 1.68e7), "grouped": (1, 8.4e6, 1.68e7),
    "naive": (5, 1.2e7, 3.8e7), "paired": (4, 1.2e7, 3.8e7), "sp": (4, 1.2e7, 3.7e7), "overlap": (8, 1.2e7, 3.7e7),
    "sum": (1, 0.0, 0.0), "cols": (1, 0.0, 0.0),
}


def name(op, variant, model, tokens, tp, dtype, timing, layer=None, weights=None, comm=None):
    parts = [op, variant, f"model:{model}"]
    if layer:
        parts.append(f"layer:{layer}")
    parts += [f"tokens:{tokens}", f"tp:{tp}", f"dtype:{dtype}"]
    if weights:
        parts.append(f"weights:{weights}")
    if comm:
        parts.append(f"comm:{comm}")
    parts += [f"timing:{timing}", "iterations:1", "manual_time"]
    return "/".join(parts)


def entry(op, variant, tokens, time_s, *, model="qwen3-0.6b", tp=1, dtype="fp32", timing="eager", layer=None,
          weights=None, comm=None, time_ci=None, **counters):
    launches, flops, nbytes = MODEL.get(variant, (2, 1e6, 1e6))
    n = name(op, variant, model, tokens, tp, dtype, timing, layer, weights, comm)
    e = {
        "backend": "cpu", "name": n, "run_name": n, "run_type": "iteration", "family_index": 0,
        "per_family_instance_index": 0, "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": 1,
        "real_time": time_s * 1e6, "cpu_time": time_s * 1e6 * 1.1, "time_unit": "us",
        "op": op, "variant": variant, "model": model, "tokens": tokens, "tp": tp, "dtype": dtype, "timing": timing,
        "time_median": time_s, "time_mean": time_s * 1.02, "time_min": time_s * 0.9, "time_cv": 0.05,
        "samples": 50.0, "converged": 0.0, "timing_stop": "timed_out", "rotation_sets": 15.0,
        "model_launches": float(launches), "launches": float(launches), "launches_vs_model": 1.0,
        "model_flops": flops * tokens, "model_bytes": nbytes + 1e3 * tokens if nbytes else 0.0,
        "model_intensity": flops * tokens / (nbytes + 1e3 * tokens) if nbytes else 0.0,
        "counters_unavailable": {"dram_read_bytes": "no device: the CPU backend has no DRAM counters"},
    }
    if layer:
        e["layer"] = layer
    if weights:
        e["weights"] = weights
    if comm:
        e["comm"] = comm
        e["comm_bytes"] = 0.0 if comm == "none" else 4096.0 * tokens
    if time_ci:
        e["time_median_ci_low"], e["time_median_ci_high"] = time_s * time_ci[0], time_s * time_ci[1]
    e.update(counters)
    return e


def group(op, tokens, base_time_s, speedups, *, baseline, over=None, **kw):
    """Entries of one interleaved comparison. speedups: {variant: (r, lo, hi) or r (no interval)}
    over the baseline; over: {(variant, other): (r, lo, hi)} for speedup_over beyond the baseline.
    A variant given as a bare number gets no speedup fields (a report without intervals)."""
    variants = [baseline] + list(speedups)
    out = {baseline: entry(op, baseline, tokens, base_time_s, **kw)}
    for v, s in speedups.items():
        r = s[0] if isinstance(s, tuple) else s
        out[v] = entry(op, v, tokens, base_time_s / r, **kw)
    for v, s in speedups.items():
        if not isinstance(s, tuple):
            continue
        e = out[v]
        e["speedup"], e["speedup_ci_low"], e["speedup_ci_high"] = s
        e["speedup_pairs"] = 40.0
        e["speedup_baseline"] = baseline
        e["interleaved_with"] = variants
        e["timing_stop"] = "converged"
        e["timing_target"] = "speedup_ci_half_width <= 0.03"
        so = {baseline: {"speedup": s[0], "ci_low": s[1], "ci_high": s[2]}}
        for (a, b), t in (over or {}).items():
            if a == v:
                so[b] = {"speedup": t[0], "ci_low": t[1], "ci_high": t[2]}
        e["speedup_over"] = so
    if any(isinstance(s, tuple) for s in speedups.values()):
        out[baseline]["interleaved_with"] = variants
    return list(out.values())


def curve(op, points, *, baseline="split", variant="fused", base_time_s=1e-3, **kw):
    """points: [(tokens, (r, lo, hi) | r)] for one variant over the baseline."""
    out = []
    for t, s in points:
        out += group(op, t, base_time_s * t ** 0.5, {variant: s}, baseline=baseline, **kw)
    return out


def report(entries, context=None):
    return {"context": copy.deepcopy(context if context is not None else CPU_CONTEXT), "benchmarks": entries}


def write(path, entries, context=None):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report(entries, context), f, indent=1)
    return path
