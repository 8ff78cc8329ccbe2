#!/usr/bin/env python3
"""Tables of this folder's tp_moe reports for its README: per entry the measured time, each
rank's routed rows and compute pass, the slowest rank and the waiting share, the collectives'
bytes (the plan's model against what the counters say was moved), and the cost model's
prediction; and the verification results per variant and rank.

  python3 reports/2026-12-05-cpu-tp-moe/summarize.py REPORT.json [...]
"""
import json
import sys


def us(seconds):
    return f"{seconds * 1e6:.0f}"


def entry_rows(report):
    out = []
    for e in report["benchmarks"]:
        if e.get("op") != "tp_moe":
            continue
        ranks = e["moe_ranks"]
        place = ranks["placement"]
        tp = int(e["tp"])
        measured = [e.get(f"compute_seconds_rank{r}") for r in range(tp)]
        moved = {k[: -len("_bytes")]: e[k] for k in e
                 if k.endswith("_bytes") and k.split("_bytes")[0] in
                 ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")}
        pred = ranks["predicted"]
        out.append({
            "variant": e["variant"], "tp": tp, "tokens": int(e["tokens"]),
            "comm": e.get("comm", ""),
            "time_us": us(e["real_time"] * 1e-9 if e.get("time_unit") == "ns" else e["real_time"] * 1e-6)
            if "real_time" in e else "",
            "rows": place["rows_per_rank"], "imbalance_rows": round(place["imbalance"], 2),
            "slowest_rows": place["slowest_rank"],
            "compute_us": [us(m) if m is not None else "unavailable" for m in measured],
            "slowest_measured": int(e["compute_slowest_rank"]) if "compute_slowest_rank" in e else "unavailable",
            "imbalance_measured": round(e["compute_imbalance"], 2) if "compute_imbalance" in e else "unavailable",
            "wait_measured": round(e["compute_wait_fraction"], 2) if "compute_wait_fraction" in e else "unavailable",
            "comm_bytes_model": e.get("comm_bytes"), "comm_bytes_counters": moved,
            "launches": e.get("launches"), "model_launches": e.get("model_launches"),
            "pred_us": us(pred["pipeline_seconds"]), "pred_slowest": pred["slowest_rank"],
            "pred_imbalance": round(pred["imbalance"], 2),
            "redundant_bytes": ranks.get("redundant_weight_bytes_per_rank"),
            "held_bytes": ranks.get("expert_weight_bytes_held_per_rank"),
            "routing": e["moe"]["routing"]["routing"], "strategy": place.get("strategy"),
        })
    return out


def main(paths):
    for path in paths:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        print(f"### {path}\n")
        print("| variant | tp | tokens | routing | placement | time us | rows per rank | rows max/mean "
              "| compute us per rank (measured) | slowest (rows / measured / predicted) "
              "| imbalance measured | wait share | comm bytes (model) | launches (measured / model) "
              "| predicted us | extra weight bytes per rank |")
        print("|" + "---|" * 16)
        for r in entry_rows(report):
            extra = "" if not r["redundant_bytes"] else f"{r['redundant_bytes'][0] / 1e6:.1f} MB"
            print(f"| {r['variant']} | {r['tp']} | {r['tokens']} | {r['routing']} | {r['strategy']} "
                  f"| {r['time_us']} | {r['rows']} | {r['imbalance_rows']} | {', '.join(r['compute_us'])} "
                  f"| {r['slowest_rows']} / {r['slowest_measured']} / {r['pred_slowest']} "
                  f"| {r['imbalance_measured']} | {r['wait_measured']} | {r['comm_bytes_model']:.0f} "
                  f"| {r['launches']} / {r['model_launches']} | {r['pred_us']} | {extra} |")
        ver = report["context"].get("verification")
        if ver:
            results = ver if isinstance(ver, list) else ver.get("results", [])
            bad = [v for v in results if not v.get("ok")]
            print(f"\nverification: {len(results)} results (variant/rank at each shape), "
                  f"{len(bad)} failed; worst max_abs_error "
                  f"{max((c['max_abs_error'] for v in results for c in v['comparisons']), default=0):.3g}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
