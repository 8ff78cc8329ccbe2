#!/usr/bin/env python3
"""PyTorch F.linear timed with CUDA events on the same shapes as fusebench's fused qkv GEMM.

The reference a kernel engineer would reach for: if our cold device time for the fused GEMM is
more than a few percent slower than this, our GEMM setup (algorithm, workspace) is at fault.
Cold = L2 flushed before every sample by READING a zeroed 2x-L2 buffer, like fusebench's cold
regime (a zero_() flush would leave L2 dirty and bill its write-back to the timed GEMM).
Writes JSON: one entry per (model, tokens) with median/min microseconds.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

MODELS = {  # hidden, heads, kv_heads, head_dim (same presets as fusebench)
    "qwen3-0.6b": (1024, 16, 8, 128),
    "llama3-8b": (4096, 32, 8, 128),
    "qwen3-32b": (5120, 64, 8, 128),
    "llama3-70b": (8192, 64, 8, 128),
}


def time_cold(fn, flush, samples):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        flush.sum()  # reads 2x L2 of clean data through L2
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)  # microseconds
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="qwen3-0.6b,llama3-8b")
    ap.add_argument("--tokens", default="1,16,128,1024,4096,16384")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    flush = torch.zeros(2 * l2 // 4, dtype=torch.int32, device=dev)
    flush.sum()
    flush.sum()  # the zero-fill's dirty lines are written back before any sample
    entries = []
    for name in args.models.split(","):
        hidden, heads, kv, hd = MODELS[name]
        n = (heads + 2 * kv) * hd
        w = torch.randn(n, hidden, device=dev, dtype=torch.bfloat16) / hidden**0.5
        for m in [int(t) for t in args.tokens.split(",")]:
            x = torch.randn(m, hidden, device=dev, dtype=torch.bfloat16)
            for _ in range(10):
                F.linear(x, w)
            torch.cuda.synchronize()
            t = time_cold(lambda: F.linear(x, w), flush, args.samples)
            entries.append({"model": name, "tokens": m, "n": n, "k": hidden,
                            "median_us": statistics.median(t), "min_us": min(t),
                            "samples": len(t)})
            print(f"torch F.linear {name} tokens={m}: median {statistics.median(t):.2f} us")
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                   "timing": "cold (L2 flushed by a read of 2x L2), CUDA events, one F.linear per sample",
                   "entries": entries}, f, indent=2)


if __name__ == "__main__":
    main()
