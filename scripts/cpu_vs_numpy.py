#!/usr/bin/env python3
"""fusebench's CPU time beside numpy's for the same shapes, cache state and sampling.

For each token count M, in R rounds, alternately (fusebench first in even rounds, numpy first in
odd ones): one run of the fusebench binary (`--backend=cpu --dtypes=fp32 --tokens=M`, its own
timing engine, report read back), then numpy timing the same ops on the same shapes with the
policy that run reported per entry: the same number of rotation sets (fresh copies of x, the
weights and the outputs, cycled so weights are not cache-warm), the same runs per sample and the
same number of samples, median per run. numpy writes into preallocated outputs (`out=`), as
fusebench does. Per round the ratio fusebench/numpy is taken; the table gives the median ratio
over the rounds with an exact order-statistic interval (and its coverage, which is below 95%
with fewer than 6 rounds).

  python3 scripts/cpu_vs_numpy.py                     # qwen3-0.6b qkv + gate_up, M = 1..1024
  python3 scripts/cpu_vs_numpy.py --tokens=1,64 --rounds=3 --threads=1 --markdown=out.md
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# qwen3-0.6b (the only model whose shapes are built in here; fusebench's preset is the source).
HIDDEN, Q_SIZE, KV_SIZE, INTERMEDIATE = 1024, 2048, 1024, 3072


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fusebench", default=os.path.join(ROOT, "build", "bin", "fusebench"))
    p.add_argument("--tokens", default=",".join(str(2**i) for i in range(11)),
                   help="token counts M (default 1,2,4,...,1024)")
    p.add_argument("--ops", default="qkv,gate_up")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=0,
                   help="threads for both sides (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS); "
                        "0 = each library's default (all cores)")
    p.add_argument("--markdown", help="also write the table as Markdown to this file")
    p.add_argument("--fusebench-arg", action="append", default=[],
                   help="extra argument for fusebench (repeatable)")
    a = p.parse_args()
    try:
        a.tokens = [int(t) for t in a.tokens.split(",")]
        if any(t < 1 for t in a.tokens):
            raise ValueError
    except ValueError:
        p.error(f"--tokens: '{a.tokens}' is not a list of positive integers (e.g. 1,4,64)")
    a.ops = a.ops.split(",")
    for op in a.ops:
        if op not in ("qkv", "gate_up"):
            p.error(f"--ops: unknown op '{op}' (valid: qkv, gate_up)")
    if a.rounds < 1:
        p.error(f"--rounds: {a.rounds} must be at least 1")
    if a.threads < 0:
        p.error(f"--threads: {a.threads} must be 0 (library default) or more")
    if not os.access(a.fusebench, os.X_OK):
        p.error(f"--fusebench: {a.fusebench} is not an executable (build first: "
                "cmake --preset release && cmake --build --preset release)")
    return a


ARGS = parse_args()
if ARGS.threads:
    # Before numpy is imported: OpenBLAS reads these when it loads.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
import numpy as np  # noqa: E402


def numpy_blas():
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{cfg.get('name')} {cfg.get('version')}"
    except Exception:  # older numpy: no dict mode
        return "unknown"


# The ops as numpy runs them: (buffers of one set, the region), mirroring fusebench's plans.
def qkv_split(m, rng):
    x = rng.uniform(-1, 1, (m, HIDDEN)).astype(np.float32)
    ws = [rng.uniform(-1, 1, (n, HIDDEN)).astype(np.float32) / math.sqrt(HIDDEN)
          for n in (Q_SIZE, KV_SIZE, KV_SIZE)]
    ys = [np.empty((m, n), np.float32) for n in (Q_SIZE, KV_SIZE, KV_SIZE)]
    return [x] + ws + ys


def run_qkv_split(b):
    x, wq, wk, wv, q, k, v = b
    np.matmul(x, wq.T, out=q)
    np.matmul(x, wk.T, out=k)
    np.matmul(x, wv.T, out=v)


def qkv_fused(m, rng):
    x = rng.uniform(-1, 1, (m, HIDDEN)).astype(np.float32)
    n = Q_SIZE + 2 * KV_SIZE
    w = rng.uniform(-1, 1, (n, HIDDEN)).astype(np.float32) / math.sqrt(HIDDEN)
    return [x, w, np.empty((m, n), np.float32)]


def run_qkv_fused(b):
    x, w, y = b
    np.matmul(x, w.T, out=y)


def silu_mul(g, u, out, tmp):
    # out = g * sigmoid(g) * u, without temporaries beyond one preallocated buffer.
    np.negative(g, out=tmp)
    np.exp(tmp, out=tmp)
    tmp += 1
    np.divide(g, tmp, out=tmp)
    np.multiply(tmp, u, out=out)


def gate_up_split(m, rng):
    x = rng.uniform(-1, 1, (m, HIDDEN)).astype(np.float32)
    ws = [rng.uniform(-1, 1, (INTERMEDIATE, HIDDEN)).astype(np.float32) / math.sqrt(HIDDEN)
          for _ in range(2)]
    bufs = [np.empty((m, INTERMEDIATE), np.float32) for _ in range(4)]
    return [x] + ws + bufs


def run_gate_up_split(b):
    x, wg, wu, g, u, act, tmp = b
    np.matmul(x, wg.T, out=g)
    np.matmul(x, wu.T, out=u)
    silu_mul(g, u, act, tmp)


def gate_up_fused(m, rng):
    x = rng.uniform(-1, 1, (m, HIDDEN)).astype(np.float32)
    w = rng.uniform(-1, 1, (2 * INTERMEDIATE, HIDDEN)).astype(np.float32) / math.sqrt(HIDDEN)
    return [x, w, np.empty((m, 2 * INTERMEDIATE), np.float32),
            np.empty((m, INTERMEDIATE), np.float32), np.empty((m, INTERMEDIATE), np.float32)]


def run_gate_up_fused(b):
    x, w, y, act, tmp = b
    np.matmul(x, w.T, out=y)
    silu_mul(y[:, :INTERMEDIATE], y[:, INTERMEDIATE:], act, tmp)


NUMPY_OPS = {("qkv", "split"): (qkv_split, run_qkv_split),
             ("qkv", "fused"): (qkv_fused, run_qkv_fused),
             ("gate_up", "split"): (gate_up_split, run_gate_up_split),
             ("gate_up", "fused"): (gate_up_fused, run_gate_up_fused)}


def fusebench_block(m):
    """One fusebench run at M; returns {(op, variant): entry} with its timing policy."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [ARGS.fusebench, "--backend=cpu", "--models=qwen3-0.6b", f"--ops={','.join(ARGS.ops)}",
               "--variants=split,fused", "--dtypes=fp32", f"--tokens={m}", "--timing=eager",
               "--launch-counts=off", f"--report={report}"] + ARGS.fusebench_arg
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"cpu_vs_numpy: fusebench failed (exit {done.returncode}): "
                     f"{' '.join(cmd)}\n{done.stderr[-2000:]}")
        with open(report) as f:
            data = json.load(f)
    out = {}
    for e in data["benchmarks"]:
        if e.get("run_type", "iteration") != "iteration" or e.get("error_occurred"):
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[e.get("time_unit", "ns")]
        out[(e["op"], e["variant"])] = {
            "time_s": e["real_time"] * scale,
            "sets": int(e.get("rotation_sets", 1)),
            "runs_per_sample": int(e.get("runs_per_sample", 1)),
            "samples": max(5, int(e.get("samples", 5))),
            "gemm": sorted(set(e.get("gemm_algorithms", []))),
        }
    return out, data["context"]


def numpy_time(op, variant, m, policy, rng):
    make, run = NUMPY_OPS[(op, variant)]
    first = make(m, rng)
    sets = [first] + [[a.copy() for a in first] for _ in range(policy["sets"] - 1)]
    for b in sets:  # every set once, untimed (as fusebench does)
        run(b)
    runs, nxt, samples = policy["runs_per_sample"], 0, []
    for _ in range(policy["samples"]):
        t0 = time.perf_counter()
        for _ in range(runs):
            run(sets[nxt % len(sets)])
            nxt += 1
        samples.append((time.perf_counter() - t0) / runs)
    return statistics.median(samples)


def order_interval(values):
    """Exact order-statistic interval of the median: (low, high, coverage)."""
    v = sorted(values)
    n = len(v)
    # ranks j (0-based) with P(Bin(n,1/2) < j+1) <= 2.5%: [v[j], v[n-1-j]] covers >= 95%
    j, cover = 0, 1 - 2 * 0.5**n
    for cand in range(1, n // 2):
        c = 1 - 2 * sum(math.comb(n, i) for i in range(cand + 1)) / 2**n
        if c >= 0.95:
            j, cover = cand, c
        else:
            break
    return v[j], v[n - 1 - j], cover


def main():
    rng = np.random.default_rng(1)
    rows, context, started = [], None, time.time()
    for m in ARGS.tokens:
        fb, np_ = {}, {}
        loads = []
        policy = {}
        for r in range(ARGS.rounds):
            order = ("fusebench", "numpy") if r % 2 == 0 else ("numpy", "fusebench")
            for side in order:
                time.sleep(0.2)  # let the other side's BLAS threads stop spinning
                if side == "fusebench":
                    entries, context = fusebench_block(m)
                    for key, e in entries.items():
                        fb.setdefault(key, []).append(e["time_s"])
                        policy[key] = e
                else:
                    if not policy:  # numpy first in a round before any fusebench run: skip
                        continue
                    for key in policy:
                        np_.setdefault(key, []).append(numpy_time(*key, m, policy[key], rng))
            loads.append(os.getloadavg()[0])
        for key in sorted(policy):
            n = min(len(fb[key]), len(np_.get(key, [])))
            ratios = [a / b for a, b in zip(fb[key][-n:], np_[key][-n:])]
            lo, hi, cover = order_interval(ratios)
            rows.append({"op": key[0], "variant": key[1], "tokens": m,
                         "fusebench_s": statistics.median(fb[key]),
                         "numpy_s": statistics.median(np_[key]), "ratio": statistics.median(ratios),
                         "ci_low": lo, "ci_high": hi, "coverage": cover, "rounds": n,
                         "sets": policy[key]["sets"], "gemm": ", ".join(policy[key]["gemm"]),
                         "load": statistics.median(loads)})
            print_row(rows[-1])
    cpu = context.get("cpu_gemm", {}) if context else {}
    header = [f"fusebench {context.get('git_revision', '?') if context else '?'}; "
              f"numpy {np.__version__} on {numpy_blas()}; threads: "
              f"{ARGS.threads or 'library defaults'} (fusebench oneDNN "
              f"{cpu.get('onednn', {}).get('threads', '?') if isinstance(cpu.get('onednn'), dict) else 'n/a'}, "
              f"OpenBLAS {cpu.get('openblas', {}).get('threads', '?')}); "
              f"{ARGS.rounds} rounds; {time.time() - started:.0f} s; host load (1 min) "
              f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}"]
    print(header[0])
    if ARGS.markdown:
        write_markdown(ARGS.markdown, header[0], rows)


def print_row(r):
    print(f"{r['op']:8s} {r['variant']:6s} M={r['tokens']:5d}  fusebench {r['fusebench_s']*1e3:9.3f} ms"
          f"  numpy {r['numpy_s']*1e3:9.3f} ms  fusebench/numpy {r['ratio']:.3f} "
          f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}] ({r['coverage']:.0%}, {r['rounds']} rounds)"
          f"  sets={r['sets']}  load={r['load']:.1f}  {r['gemm']}", flush=True)


def write_markdown(path, header, rows):
    lines = [f"<!-- written by scripts/cpu_vs_numpy.py {' '.join(sys.argv[1:])} -->", "",
             header, "",
             "| op | variant | M | fusebench ms | numpy ms | fusebench / numpy | interval (coverage) "
             "| rotation sets | fusebench GEMM path |",
             "|---|---|---:|---:|---:|---:|---|---:|---|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['variant']} | {r['tokens']} | {r['fusebench_s']*1e3:.3f} | "
                     f"{r['numpy_s']*1e3:.3f} | {r['ratio']:.3f} | [{r['ci_low']:.3f}, "
                     f"{r['ci_high']:.3f}] ({r['coverage']:.0%}) | {r['sets']} | {r['gemm']} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
