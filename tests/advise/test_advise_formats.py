#!/usr/bin/env python3
"""fusebench-advise's four formats agree (docs/advise.md, "How it is tested").

  test_advise_formats.py ADVISE_BINARY CXX WORK_DIR [REPORT.json]

Without REPORT: the issue's synthetic report (fused wins at 1-64 tokens, loses at 1024-16384, is
within the margin at 256): JSON, Markdown, the C++ header (compiled with -Wall -Wextra -Werror,
its constexpr choose() checked by static_assert and at run time) and the Python module give
exactly those ranges. With REPORT (a real CPU report): every format is written, the header
compiles, and the C++ and Python choose() return each JSON range's decision at its ends and middle.
"""
import importlib.util
import json
import os
import subprocess
import sys

FIX = {"op": "qkv", "model": "qwen3-0.6b", "layer": "attention", "dtype": "fp32", "tp": 1, "timing": "eager"}
DEVICE = "cpu: AMD EPYC"


def name(variant, tokens):
    return (f"qkv/{variant}/model:qwen3-0.6b/layer:attention/tokens:{tokens}/tp:1/dtype:fp32/weights:random/"
            f"timing:eager/iterations:1/manual_time")


def entry(variant, tokens):
    n = name(variant, tokens)
    return dict(FIX, name=n, run_name=n, run_type="iteration", real_time=10.0, time_unit="us", variant=variant,
                tokens=tokens, weights="random", backend="cpu", timing_stop="converged", speedup_baseline="split")


def synthetic():
    benches = []
    points = [(t, 1.20, 1.15, 1.25) for t in (1, 4, 16, 64)] + [(256, 1.00, 0.99, 1.01)] + \
        [(t, 0.80, 0.77, 0.83) for t in (1024, 4096, 16384)]
    for t, s, lo, hi in points:
        split, fused = entry("split", t), entry("fused", t)
        split["speedup_over"] = {"fused": {"speedup": 1 / s, "ci_low": 1 / hi, "ci_high": 1 / lo, "pairs": 30}}
        fused.update(speedup=s, speedup_ci_low=lo, speedup_ci_high=hi, speedup_pairs=30,
                     speedup_over={"split": {"speedup": s, "ci_low": lo, "ci_high": hi, "pairs": 30}})
        benches += [split, fused]
    return {"context": {"backend": "cpu", "cpu_model": "AMD EPYC", "git_revision": "abc123"}, "benchmarks": benches}


# (tokens_low, tokens_high, decision, variant, label, basis) of the synthetic report.
EXPECTED = [
    (1, 64, "use", "fused", "use: fused", "measured"),
    (65, 255, "unresolved", "split", "unresolved", "not measured"),
    (256, 256, "either", "split,fused", "either", "measured"),
    (257, 1023, "unresolved", "split", "unresolved", "not measured"),
    (1024, 16384, "use", "split", "use: split", "measured"),
]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def queries(doc):
    """[(table selectors, op_key, tokens, expected (decision, variant, label, basis))] from the JSON."""
    out = []
    for c in doc["comparisons"]:
        sel = (c["device"], c["model"], c["dtype"], c["tp"], c["timing"])
        for r in c["ranges"]:
            want = (r["decision"], ",".join(r["variants"]), r["label"], r["basis"])
            for t in sorted({r["tokens_low"], r["tokens_high"], (r["tokens_low"] + r["tokens_high"]) // 2}):
                out.append((sel, c["dispatch"]["op_key"], t, want))
        last = c["ranges"][-1]["tokens_high"]
        # Outside the measured tokens: unresolved, and the default (the baseline variant) to run.
        out.append((sel, c["dispatch"]["op_key"], last + 1, ("unresolved", c["default"], "unresolved",
                                                            "outside the measured tokens")))
    return out


def cpp_program(qs, static_checks):
    lines = ['#include "advice.hpp"', "#include <cstdio>", "", "using namespace fusebench::advice;", "",
             "static const char* name(Decision d) {",
             '  return d == Decision::kUse ? "use" : d == Decision::kEither ? "either" : "unresolved";', "}", ""]
    lines += static_checks
    lines += ["int main() {"]
    for (dev, model, dtype, tp, timing), op, t, _ in qs:
        args = ", ".join(json.dumps(x) for x in (dev, model, dtype)) + f", {tp}, {json.dumps(timing)}, " \
            f"{json.dumps(op)}, {t}"
        lines.append(f"  {{ const Choice c = choose({args}); std::printf(\"%s|%.*s|%.*s|%.*s\\n\", name(c.decision), "
                     "static_cast<int>(c.variant.size()), c.variant.data(), static_cast<int>(c.label.size()), "
                     "c.label.data(), static_cast<int>(c.basis.size()), c.basis.data()); }")
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    advise, cxx, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    real = len(sys.argv) == 5
    report = sys.argv[4] if real else os.path.join(work, "synthetic.json")
    if not real:
        with open(report, "w", encoding="utf-8") as f:
            json.dump(synthetic(), f)
    paths = {}
    for fmt, ext in (("json", "json"), ("markdown", "md"), ("cpp", "hpp"), ("python", "py")):
        paths[fmt] = os.path.join(work, f"advice.{ext}")
        run([advise, report, f"--format={fmt}", "-o", paths[fmt]])
    with open(paths["json"], encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["schema"] == "fusebench-advice" and doc["version"] == 1, doc.get("schema")
    md = open(paths["markdown"], encoding="utf-8").read()

    static_checks = []
    if not real:
        assert len(doc["comparisons"]) == 1, doc["comparisons"]
        c = doc["comparisons"][0]
        got = [(r["tokens_low"], r["tokens_high"], r["decision"], ",".join(r["variants"]), r["label"], r["basis"])
               for r in c["ranges"]]
        assert got == EXPECTED, f"JSON ranges {got}"
        for r in c["ranges"]:
            assert r["device"] == DEVICE and r["reports"][0]["git_revision"] == "abc123", r
            assert all(p["pairs"] for p in r["evidence"]), r
        for lo, hi, _, _, label, basis in EXPECTED:
            span = str(lo) if lo == hi else f"{lo}-{hi}"
            shown = f"{label} (default: split)" if label == "unresolved" else f"**{label}**"
            row = f"| {span} | {shown} | {basis} |"
            assert row in md, f"markdown lacks {row!r}:\n{md}"
        ns = "cpu_amd_epyc::qwen3_0_6b::fp32_tp1_eager"
        # The per-table choose() is constexpr: the table is checked while the header compiles.
        for t, dec, var in ((1, "kUse", "fused"), (64, "kUse", "fused"), (65, "kUnresolved", "split"),
                            (256, "kEither", "split,fused"), (1024, "kUse", "split"), (16384, "kUse", "split"),
                            (16385, "kUnresolved", "split")):
            static_checks.append(f'static_assert({ns}::choose("qkv", {t}).decision == Decision::{dec} && '
                                 f'{ns}::choose("qkv", {t}).variant == "{var}", "qkv at {t} tokens");')
        static_checks.append(f'static_assert({ns}::choose("gate_up", 16).basis == "op not in the table", "op");')
        static_checks.append("")

    qs = queries(doc)
    want = ["|".join(w) for _, _, _, w in qs]

    src = os.path.join(work, "choose_test.cpp")
    with open(src, "w", encoding="utf-8") as f:
        f.write(cpp_program(qs, static_checks))
    for std in ("c++17", "c++20"):
        exe = os.path.join(work, f"choose_test_{std}")
        run([cxx, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-Wpedantic", "-Wshadow", "-Wconversion",
             "-I", work, src, "-o", exe])
        got = run([exe]).stdout.splitlines()
        assert got == want, f"C++ ({std}) choose():\n" + "\n".join(
            f"{q[1]} {q[2]}: got {g} want {w}" for q, g, w in zip(qs, got, want) if g != w)

    spec = importlib.util.spec_from_file_location("advice", paths["python"])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.SCHEMA_VERSION == 1
    for ((dev, model, dtype, tp, timing), op, t, _), w in zip(qs, want):
        c = mod.choose(op, t, device=dev, model=model, dtype=dtype, tp=tp, timing=timing)
        assert "|".join(c) == w, f"python choose({op!r}, {t}): {c} want {w}"
    if not real:
        # One table: no selector is needed.
        assert mod.choose("qkv", 16) == ("use", "fused", "use: fused", "measured")
        assert mod.choose("qkv", 300).basis == "not measured"
        try:
            mod.choose("qkv", 16, device="gpu: none")
            sys.exit("FAIL: a selector matching no table was accepted")
        except LookupError as e:
            assert "0 tables match" in str(e), e
    print(f"advise formats: {len(doc['comparisons'])} comparison(s), {len(qs)} lookups agree in JSON, C++ "
          f"(c++17, c++20) and Python" + ("" if real else "; the synthetic ranges are exactly the expected ones"))


if __name__ == "__main__":
    main()
