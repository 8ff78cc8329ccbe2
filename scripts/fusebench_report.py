"""Reads fusebench reports (Google Benchmark JSON) for the chart, HTML and summary scripts.

Tolerant by design: unknown keys are kept, missing counters stay missing (None, never 0),
non-finite numbers are treated as missing, aggregates and failed runs are folded or skipped.
Speedups come from the report's interleaved, paired ratios with their 95% intervals when it has
them; otherwise from the ratio of the two medians, labelled so and without an interval
(`speedup_between`).
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

# Each op's baseline variant when the report does not name one (`speedup_baseline`): the op's
# first variant (COMMON contract 2).
BASELINE_VARIANT = {"qkv": "split", "gate_up": "split", "tp_attn": "naive", "tp_mlp": "naive",
                    "moe": "per_expert"}
# Further comparisons drawn and tabled when both variants are present: (variant, over).
EXTRA_COMPARISONS = {
    "tp_attn": [("sp", "paired"), ("overlap", "paired")],
    "tp_mlp": [("sp", "paired"), ("overlap", "paired")],
}
# A layer segment with this value keeps the chart's historic file name (no layer suffix).
DEFAULT_LAYER = {"qkv": "attention", "tp_attn": "attention", "gate_up": "dense", "tp_mlp": "dense",
                 "moe": "expert"}
# A quantized variant is "less accurate" than its baseline where a shard's quant_error grew by more
# than this fraction of the baseline's and this much (fusebench-advise's rule, docs/advise.md).
LESS_ACCURATE_RELATIVE = 0.01
LESS_ACCURATE_ABSOLUTE = 1e-4
# TP ops: at tp 1 there is nothing to exchange, so their variants run one computation
# (src/ops/tp_mlp.cpp, tp_attn.cpp build the same plan for every variant when tp == 1).
TP_OPS = {"tp_attn", "tp_mlp"}
# Variants that run a communication lane (a second thread per rank on the CPU backend).
LANE_VARIANTS = {"overlap"}
# An interval needs this many paired ratios to exist at 95% (the order-statistic interval of a
# median); below it an entry is "not judged: n < 6", whatever interval an older report carries.
MIN_PAIRS = 6
# timing_stop of a group that preemption kept from a valid interval (docs/timing.md, Contention).
CONTENDED = "contended"
# How a speedup was obtained (Ratio.method).
PAIRED = "paired"  # the report's median of per-round paired ratios, interleaved measurement
MEDIANS = "ratio of medians"  # baseline median / variant median; no interval


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
    fields: dict = field(default_factory=dict)  # non-numeric per-entry fields (str, dict, list)
    error: str | None = None
    layer: str = ""  # name segment layer: ("" when the name has none)
    weights: str = ""  # name segment weights: ("" when the name has none)

    def counter(self, key):
        v = self.counters.get(key)
        return v if isinstance(v, (int, float)) and math.isfinite(v) else None

    def config(self):
        """What makes two entries of one op and variant different measurements, tokens aside."""
        return (self.model, self.layer, self.tp, self.dtype, self.timing, self.weights, self.extra)

    def time_interval_ns(self):
        """(low, high) of the median's 95% interval in ns, or None. The counters are taken in
        seconds (as time_median) when they bracket time_median, else in the entry's time unit
        (as real_time) when they bracket the median; anything else is not shown."""
        lo, hi = self.counter("time_median_ci_low"), self.counter("time_median_ci_high")
        if lo is None or hi is None or not lo <= hi:
            return None
        med_s = self.counter("time_median")
        if med_s is not None and lo <= med_s * (1 + 1e-9) and med_s <= hi * (1 + 1e-9):
            return lo * 1e9, hi * 1e9
        scale = TIME_SCALE_NS.get(self.fields.get("time_unit", "ns"))
        t = self.time_ns
        if t and scale and lo * scale <= t * (1 + 1e-9) and t <= hi * scale * (1 + 1e-9):
            return lo * scale, hi * scale
        return None


@dataclass
class Ratio:
    """A speedup (baseline time / variant time) with its 95% interval when the report has one."""
    value: float
    ci_low: float | None
    ci_high: float | None
    method: str  # PAIRED or MEDIANS
    over: str  # the variant it is measured against
    pairs: int | None = None
    # Why no chart, summary or gate may judge it ("contended", "n < 6"), or None. Such a ratio
    # never has an interval here.
    not_judged: str | None = None

    @property
    def has_interval(self):
        return self.ci_low is not None and self.ci_high is not None

    def text(self, spec=".3g"):
        if self.not_judged:
            return f"{self.value:{spec}} (not judged: {self.not_judged})"
        if self.has_interval:
            return f"{self.value:{spec}} [{self.ci_low:{spec}}, {self.ci_high:{spec}}]"
        return f"{self.value:{spec}} (ratio of medians, no interval)"


def not_judged_reason(e: Entry, pairs) -> str | None:
    """Why entry e's speedup is no evidence: its group was contended, or it rests on too few
    values for a 95% interval (the ratio's `pairs`, then e's `samples`). None when it may be
    judged. Mirrors the C++ contract the gate and the advisor share (fusebench/evidence.hpp);
    tests/advise/test_not_judged_contract.py runs both on the same entries."""
    if e.fields.get("timing_stop") == CONTENDED:
        return CONTENDED
    for count in (pairs, e.counter("samples")):
        if count is not None and count < MIN_PAIRS:
            return f"n < {MIN_PAIRS}"
    return None


def _judged(r: Ratio, e: Entry) -> Ratio:
    """r without its interval when e's speedup may not be judged (not_judged_reason)."""
    why = not_judged_reason(e, r.pairs)
    if why:
        r.ci_low = r.ci_high = None
        r.not_judged = why
    return r


def _interval(value, lo, hi):
    """(lo, hi) when both are finite and lo <= hi; else (None, None): never half an interval."""
    lo, hi = _num(lo), _num(hi)
    if lo is None or hi is None or lo > hi or value is None:
        return None, None
    return lo, hi


def _paired_ratio(e: Entry, over: str):
    """The report's own paired speedup of e over `over`, or None."""
    if e.fields.get("speedup_baseline") == over and e.counter("speedup") is not None:
        v = e.counter("speedup")
        lo, hi = _interval(v, e.counter("speedup_ci_low"), e.counter("speedup_ci_high"))
        pairs = e.counter("speedup_pairs")
        return _judged(Ratio(v, lo, hi, PAIRED, over, int(pairs) if pairs is not None else None), e)
    so = e.fields.get("speedup_over")
    if isinstance(so, dict) and isinstance(so.get(over), dict) and _num(so[over].get("speedup")):
        d = so[over]
        v = _num(d["speedup"])
        lo, hi = _interval(v, d.get("ci_low"), d.get("ci_high"))
        pairs = _num(d.get("pairs"))
        return _judged(Ratio(v, lo, hi, PAIRED, over, int(pairs) if pairs is not None else None), e)
    return None


def speedup_between(e: Entry, base: Entry | None, over: str):
    """Speedup of entry e over variant `over` (whose entry in the same comparison is `base`, or
    None): the report's paired ratio and interval (from e, or inverted from base's), else the
    ratio of the medians without an interval, else None."""
    r = _paired_ratio(e, over)
    if r is not None:
        return r
    if base is not None:
        inv = _paired_ratio(base, e.variant)
        if inv is not None and inv.value > 0:
            lo, hi = (1 / inv.ci_high, 1 / inv.ci_low) if inv.has_interval and inv.ci_low > 0 else (None, None)
            return Ratio(1 / inv.value, lo, hi, PAIRED, over, inv.pairs, inv.not_judged)
        if base.time_ns and e.time_ns:
            return Ratio(base.time_ns / e.time_ns, None, None, MEDIANS, over)
    return None


def baseline_variant(op: str, entries) -> str | None:
    """The op's baseline: what the report names (`speedup_baseline`), else BASELINE_VARIANT."""
    named = {e.fields.get("speedup_baseline") for e in entries if e.op == op} - {None, ""}
    if len(named) == 1:
        return named.pop()
    return BASELINE_VARIANT.get(op)


def comparisons(op: str, variants, baseline: str | None):
    """[(variant, over)]: every variant over the baseline, then EXTRA_COMPARISONS present."""
    out = [(v, baseline) for v in variants if baseline and v != baseline and baseline in variants]
    out += [(v, o) for v, o in EXTRA_COMPARISONS.get(op, []) if v in variants and o in variants]
    return out


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


def _text(v, fallback):
    return v if isinstance(v, str) else fallback


def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def parse_name(name: str) -> dict:
    """'qkv/fused/model:m[/layer:l]/tokens:16/tp:1/dtype:bf16[/weights:w][/comm:c]/timing:cold
    /iterations:1/manual_time' -> fields; layer and weights are optional (COMMON contract 1)."""
    parts = name.split("/")
    out = {"op": parts[0] if parts else "", "variant": parts[1] if len(parts) > 1 else "", "extra": []}
    for seg in parts[2:]:
        if ":" in seg:
            k, v = seg.split(":", 1)
            if k in ("model", "layer", "tokens", "tp", "dtype", "timing", "weights"):
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
        fields_ = {k: v for k, v in b.items() if isinstance(v, (str, dict, list))}
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
            layer=_text(b.get("layer"), p.get("layer", "")),
            weights=_text(b.get("weights"), p.get("weights", "")),
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


def one_computation(op: str, tp: int) -> bool:
    """Whether every variant of op at this tp is the same computation (TP ops at tp 1)."""
    return op in TP_OPS and tp == 1


def host_cores(context: dict):
    """The cores the run had: context.cpu_threads.cores, else hardware_threads, else num_cpus."""
    ct = context.get("cpu_threads")
    for v in ((ct or {}).get("cores") if isinstance(ct, dict) else None, context.get("hardware_threads"),
              context.get("num_cpus")):
        n = _num(v)
        if n and n >= 1:
            return int(n)
    return None


@dataclass
class Oversubscription:
    """A TP group whose ranks' threads outnumber the cores: its times show the ranks waiting for
    each other's cores (docs/tp.md, "On 2 cores the in-process figures mostly show thread
    contention"), so no speedup or crossover of it is a result."""
    threads: int | None  # busy threads of the group (None: only the report's word for it)
    cores: int | None
    source: str  # what says so: the report's preemption_unchecked, or its thread fields

    def text(self):
        if self.threads and self.cores:
            return f"ranks oversubscribe the cores: {self.threads} busy threads on {self.cores} cores"
        return "ranks oversubscribe the cores (the report's preemption_unchecked)"

    def as_dict(self):
        return {"threads": self.threads, "cores": self.cores, "source": self.source, "text": self.text()}


def oversubscription(group, context: dict):
    """Oversubscription of one interleaved group (its entries, every variant at one token count)
    on the CPU backend, or None. Busy threads as TpRun::busy_threads counts them: ranks x GEMM
    threads per rank, plus one lane per rank when a member runs overlap; compared with the cores
    (host_cores). A report that says its group's threads "outnumber" the cores
    (preemption_unchecked) is oversubscribed even where its thread fields are missing."""
    group = [e for e in group if e is not None]
    cpu = [e for e in group if str(e.fields.get("backend", context.get("backend", ""))) == "cpu"]
    tp = max((e.tp for e in cpu), default=1)
    said = any("outnumber" in str(e.fields.get("preemption_unchecked", "")) for e in cpu)
    ranks_share_host = any(seg in ("comm:inprocess", "comm:mpi") for e in cpu for seg in e.extra.split("/"))
    cores = host_cores(context)
    threads = None
    if tp > 1 and ranks_share_host:
        per_rank = max([int(e.counter("cpu_threads_per_rank") or 1) for e in cpu] or [1])
        lane = any(e.variant in LANE_VARIANTS for e in cpu)
        threads = tp * max(1, per_rank) + (tp if lane else 0)
    over_by_count = threads is not None and cores is not None and threads > cores
    if not said and not over_by_count:
        return None
    counted = "cpu_threads_per_rank x ranks (+ lanes) over the context's cores"
    source = (f"preemption_unchecked; {counted}" if over_by_count else "preemption_unchecked") if said else counted
    if over_by_count:
        return Oversubscription(threads, cores, source)
    return Oversubscription(None, cores, source)



def quant_errors(e: Entry, key: str = "quant_error") -> dict:
    """A quantized entry's accuracy per output shard ({"q": .., "k": .., "v": ..}); {} when it
    has none or a value is not a finite number >= 0 (never shown as 0)."""
    v = e.fields.get(key)
    if not isinstance(v, dict):
        return {}
    out = {}
    for shard, x in v.items():
        if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0:
            out[str(shard)] = float(x)
    return out


@dataclass
class Accuracy:
    """A variant's accuracy over entries (token counts) beside its baseline's, shard by shard."""
    worst: float  # its largest quant_error of any shard
    worst_shard: str
    growth: float = 0.0  # its largest growth of a shard's quant_error over the baseline's (absolute)
    growth_from: float = 0.0
    growth_shard: str = ""
    growth_tokens: int = 0
    vs_split: float | None = None  # its largest quant_error_vs_split
    emulated: bool = False

    @property
    def less_accurate(self):
        return self.growth > LESS_ACCURATE_ABSOLUTE and self.growth > LESS_ACCURATE_RELATIVE * self.growth_from

    def text(self, baseline=None):
        """"quant err 0.0412" plus, where less accurate, "+14.1% over split: less accurate"."""
        s = f"quant err {self.worst:.3g}"
        if self.less_accurate:
            pct = f"+{100 * self.growth / self.growth_from:.1f}%" if self.growth_from > 0 else "from 0"
            s += f", {pct} over {baseline or 'baseline'} (shard {self.growth_shard}): less accurate"
        if self.emulated:
            s += ", emulated"
        return s


def accuracy(entries_by_tokens: dict, base_by_tokens: dict | None) -> Accuracy | None:
    """{tokens: Entry} of one variant and of its baseline -> its Accuracy, or None without
    quant_error."""
    acc = None
    for t, e in sorted(entries_by_tokens.items()):
        errs = quant_errors(e)
        if not errs:
            continue
        shard = max(errs, key=errs.get)
        if acc is None:
            acc = Accuracy(errs[shard], shard)
        elif errs[shard] > acc.worst:
            acc.worst, acc.worst_shard = errs[shard], shard
        # `emulated` is a JSON boolean (kept in neither counters nor fields): its label and the
        # quant object's execution say it too.
        quant = e.fields.get("quant") if isinstance(e.fields.get("quant"), dict) else {}
        acc.emulated = acc.emulated or e.fields.get("label") == "emulated" or \
            str(quant.get("execution", "")).startswith("emulated")
        vs = quant_errors(e, "quant_error_vs_split")
        if vs:
            acc.vs_split = max([acc.vs_split or 0.0] + list(vs.values()))
        b = (base_by_tokens or {}).get(t)
        if b is None or b is e:
            continue
        for k, x in errs.items():
            y = quant_errors(b).get(k)
            if y is not None and x - y > acc.growth:
                acc.growth, acc.growth_from, acc.growth_shard, acc.growth_tokens = x - y, y, k, t
    return acc
