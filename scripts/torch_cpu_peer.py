#!/usr/bin/env python3
"""PyTorch on the CPU as fusebench's peer: the same projections, the same steps, the same threads,
measured in alternating blocks with fusebench in one run.

For each model shape, token count and dtype it times what an engineer would write in PyTorch:
  gate_up split:  F.linear(x, w_gate), F.linear(x, w_up), then F.silu(g) * u
  gate_up fused:  F.linear(x, w_gate_up), then F.silu(h[:, :I]) * h[:, I:]
  qkv split/fused: three F.linear calls / one
  int8 (per-token activations, per-channel weights, vLLM's w8a8): the dynamic quantize
  (amax, scale, round, clamp, to int8), torch._int_mm, the scale epilogue to bf16
and, in the blocks between, runs fusebench (--report) on the same shapes, reading each entry's
median and its step profile (fields.step_profile: the GEMM, activation and quantize steps).
Each block of either side is one sample; the ratio fusebench / PyTorch is reported per block
pair (the median and the range over blocks), so the two sides share the machine's state.

Writes JSON (--out) and prints a markdown table. Needs torch (pip install torch); not a test
dependency.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

# hidden, intermediate, q width (heads * head_dim), kv width (kv_heads * head_dim)
MODELS = {
    "qwen3-0.6b": (1024, 3072, 2048, 1024),
    "llama3-8b": (4096, 14336, 4096, 1024),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# fusebench's spec for each dtype here: int8 is vLLM's w8a8 (per-channel weights, per-token
# dynamic activations), fusebench's int8:channel.
FUSEBENCH_SPEC = {"fp32": "fp32", "bf16": "bf16", "int8": "int8:channel"}


def best_median(fn, reps, min_s=0.2):
    """Median of `reps` timed calls after one warm-up (more calls while under min_s)."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < reps or time.perf_counter() - start < min_s:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 200:
            break
    return statistics.median(times)


def quantize_int8(x):
    """vLLM's dynamic per-token int8 (scaled_int8_quant): scale = amax / 127, round half even."""
    scale = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-10) / 127.0
    q = torch.clamp(torch.round(x.float() / scale), -127, 127).to(torch.int8)
    return q, scale


def torch_case(op, model, tokens, dtype, reps):
    """Each step's median seconds and the total of one PyTorch case (split and fused)."""
    hidden, inter, qw, kvw = MODELS[model]
    g = torch.Generator().manual_seed(0)
    quant = dtype == "int8"
    act_dtype = torch.bfloat16 if quant else DTYPES[dtype]
    x = torch.randn(tokens, hidden, generator=g).to(act_dtype)
    widths = [inter, inter] if op == "gate_up" else [qw, kvw, kvw]
    ws = [torch.randn(n, hidden, generator=g).to(act_dtype) * 0.05 for n in widths]
    out = {}
    for variant in ("split", "fused"):
        mats = ws if variant == "split" else [torch.cat(ws, 0)]
        steps = {}
        if quant:
            wq = []
            for w in mats:
                ws_ = w.abs().amax(dim=1, keepdim=True).float() / 127.0
                wq.append((torch.round(w.float() / ws_).to(torch.int8).t().contiguous().t(), ws_))
            n_quant = len(mats)  # each GEMM quantizes its own x, as fusebench's split does
            steps["quantize"] = best_median(lambda: quantize_int8(x), reps) * n_quant
            xq, sx = quantize_int8(x)

            def gemms():
                for q, sw in wq:
                    acc = torch._int_mm(xq, q.t())
                    (acc.float() * sx * sw.t()).to(torch.bfloat16)

            steps["gemm"] = best_median(gemms, reps)
            ys = [(torch._int_mm(xq, q.t()).float() * sx * sw.t()).to(torch.bfloat16)
                  for q, sw in wq]
        else:
            steps["gemm"] = best_median(lambda: [F.linear(x, w) for w in mats], reps)
            ys = [F.linear(x, w) for w in mats]
        if op == "gate_up":
            if variant == "split":
                gt, up = ys
            else:
                gt, up = ys[0][:, :inter], ys[0][:, inter:]
            steps["activation"] = best_median(lambda: F.silu(gt) * up, reps)
        out[variant] = {"steps": steps, "seconds": sum(steps.values())}
    return out


def run_fusebench(binary, models, ops, tokens, dtypes, threads, report):
    cmd = [binary, "--backend=cpu", "--models=" + ",".join(models), "--ops=" + ",".join(ops),
           "--tokens=" + ",".join(map(str, tokens)),
           "--dtypes=" + ",".join(FUSEBENCH_SPEC[d] for d in dtypes),
           "--variants=split,fused", "--cpu-threads=%d" % threads, "--timing-blocks=1",
           "--report=" + report]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(report) as f:
        return json.load(f), cmd


def fusebench_entries(report):
    """(op, model, tokens, dtype, variant) -> seconds and step seconds by kind."""
    out = {}
    for b in report["benchmarks"]:
        if b.get("error_occurred") or "fields" not in b and "step_profile" not in b:
            continue
        prof = b.get("step_profile", {})
        kinds = {k["kind"]: k["seconds"] for k in prof.get("kinds", [])}
        if "scaled_gemm" in kinds:
            kinds["gemm"] = kinds.pop("scaled_gemm")
        spec = b.get("dtype", "")
        dtype = next((d for d, s in FUSEBENCH_SPEC.items() if s == spec), spec)
        key = (b["op"], b["model"], int(b["tokens"]), dtype, b["variant"])
        out[key] = {"seconds": b["real_time"] * 1e-6, "steps": kinds}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--fusebench", default="build/bin/fusebench")
    ap.add_argument("--models", default="qwen3-0.6b")
    ap.add_argument("--ops", default="gate_up,qkv")
    ap.add_argument("--tokens", default="256,1024")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=3, help="alternating blocks of each side")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    models, ops = a.models.split(","), a.ops.split(",")
    tokens, dtypes = [int(t) for t in a.tokens.split(",")], a.dtypes.split(",")
    samples = {}  # key -> list of {"torch": ..., "fusebench": ...} per block
    cmd = None
    with tempfile.TemporaryDirectory() as tmp:
        for block in range(a.blocks):
            torch_side = {}
            for op in ops:
                for m in models:
                    for t in tokens:
                        for d in dtypes:
                            for v, r in torch_case(op, m, t, d, a.reps).items():
                                torch_side[(op, m, t, d, v)] = r
            report, cmd = run_fusebench(a.fusebench, models, ops, tokens, dtypes, a.threads,
                                        os.path.join(tmp, "r%d.json" % block))
            fb = fusebench_entries(report)
            for key, r in torch_side.items():
                if key in fb:
                    samples.setdefault(key, []).append({"torch": r, "fusebench": fb[key]})
            print("block %d/%d done" % (block + 1, a.blocks), file=sys.stderr)
    rows = []
    for key, blocks in sorted(samples.items()):
        def ratios(step=None):
            vals = []
            for b in blocks:
                t = b["torch"]["seconds"] if step is None else b["torch"]["steps"].get(step)
                f = b["fusebench"]["seconds"] if step is None else b["fusebench"]["steps"].get(step)
                if t and f:
                    vals.append(f / t)
            if not vals:
                return None
            return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
                    "blocks": len(vals)}
        rows.append({"op": key[0], "model": key[1], "tokens": key[2], "dtype": key[3],
                     "variant": key[4], "blocks": blocks,
                     "ratio_total": ratios(), "ratio_gemm": ratios("gemm"),
                     "ratio_activation": ratios("activation"),
                     "ratio_quantize": ratios("quantize")})
    result = {"command": " ".join(sys.argv), "fusebench_command": " ".join(cmd or []),
              "threads": a.threads, "torch": torch.__version__,
              "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "ratio": "fusebench seconds / PyTorch seconds, per alternating block pair",
              "rows": rows}
    tmp_out = a.out + ".tmp"
    with open(tmp_out, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp_out, a.out)

    def fmt(r):
        return "-" if r is None else "%.2f [%.2f, %.2f]" % (r["median"], r["min"], r["max"])
    print("| op | model | tokens | dtype | variant | fusebench ms | torch ms | total | gemm | "
          "activation | quantize |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        fb = statistics.median(b["fusebench"]["seconds"] for b in r["blocks"]) * 1e3
        tt = statistics.median(b["torch"]["seconds"] for b in r["blocks"]) * 1e3
        print("| %s | %s | %d | %s | %s | %.3f | %.3f | %s | %s | %s | %s |" % (
            r["op"], r["model"], r["tokens"], r["dtype"], r["variant"], fb, tt,
            fmt(r["ratio_total"]), fmt(r["ratio_gemm"]), fmt(r["ratio_activation"]),
            fmt(r["ratio_quantize"])))


if __name__ == "__main__":
    main()
