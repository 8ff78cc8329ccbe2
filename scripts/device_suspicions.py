#!/usr/bin/env python3
"""The device check's rows for issue 21's suspicions, each PASS, FAIL or SKIP with its evidence.

    python3 scripts/device_suspicions.py --report report.json [--report more.json ...]
        [--build-log build-and-test.log] >> checks.txt

Rows (tab-separated name, result, detail, as the device check's checks.txt holds them):
- grouped GEMM in the batch, cold and graph regimes (host problem arrays, cuBLAS's workspace):
  one row per regime, PASS when the grouped entries of that regime ran without an error;
- split-K from cuBLASLt's timed policy: FAIL when an entry's launches_vs_model is not 1;
- CUPTI kernel records of graphs captured while activity was disabled: every graph entry's
  graph_launches read and equal to its launches;
- the modelled-collective spin kernel: the GPU test GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent
  with the timer step and spin times it printed.
SKIP says what was missing (no report, no such entries, a counter unavailable and why).
"""
import argparse
import json
import os
import re
import sys

DELAY_TEST = "GpuTp.ModelledDelaySpinLastsItsTimeWithinTwoPercent"


def entries(paths):
    out, problems = [], []
    for p in paths:
        try:
            with open(p) as f:
                out += [b for b in json.load(f).get("benchmarks", [])
                        if b.get("run_type", "iteration") == "iteration"]
        except FileNotFoundError:
            problems.append(f"no {os.path.basename(p)} (its sweep did not run)")
        except (OSError, ValueError) as e:
            problems.append(f"{os.path.basename(p)}: {e}")
    return out, problems


def short(b):
    return b.get("run_name", b.get("name", "?")).split("/iterations:")[0]


def grouped_rows(benchmarks, missing):
    rows = []
    for regime in ("batch", "cold", "graph"):
        name = f"suspicion: grouped GEMM, timing:{regime}"
        mine = [b for b in benchmarks if b.get("variant") == "grouped" and b.get("timing") == regime]
        if not mine:
            rows.append((name, "SKIP", missing or f"no grouped entry in timing:{regime}"))
            continue
        bad = [b for b in mine if b.get("error_occurred") or b.get("error_message")]
        if bad:
            rows.append((name, "FAIL", f"{len(bad)} of {len(mine)} failed: {short(bad[0])}: "
                                       f"{bad[0].get('error_message', '')}"))
        else:
            rows.append((name, "PASS", f"{len(mine)} grouped entries ran"))
    return rows


def split_k_row(benchmarks, missing):
    name = "suspicion: split-K (launches_vs_model != 1)"
    read = [b for b in benchmarks if isinstance(b.get("launches_vs_model"), (int, float))]
    if not read:
        why = next((b.get("counters_unavailable", {}).get("launches_vs_model")
                    for b in benchmarks if b.get("counters_unavailable", {}).get("launches_vs_model")),
                   None)
        return [(name, "SKIP", missing or f"launches_vs_model not read: {why or 'no entries'}")]
    off = [b for b in read if abs(b["launches_vs_model"] - 1) > 1e-9]
    if not off:
        return [(name, "PASS", f"launches_vs_model = 1 in all {len(read)} entries")]
    b = off[0]
    algos = "; ".join(b.get("gemm_algorithms", []))
    return [(name, "FAIL", f"{len(off)} of {len(read)} entries: {short(b)} has "
                           f"{b['launches_vs_model']:g} ({algos})")]


def graph_row(benchmarks, missing):
    name = "suspicion: CUPTI records of captured graphs"
    graphs = [b for b in benchmarks if b.get("timing") == "graph" and not b.get("error_message")]
    if not graphs:
        return [(name, "SKIP", missing or "no graph entry")]
    unread = [b for b in graphs if not isinstance(b.get("graph_launches"), (int, float))]
    if unread:
        why = unread[0].get("counters_unavailable", {}).get("graph_launches", "not in the entry")
        return [(name, "FAIL", f"graph_launches not read in {len(unread)} of {len(graphs)} graph "
                               f"entries: {short(unread[0])}: {why}")]
    bad = [b for b in graphs if b.get("graph_launches") != b.get("launches")]
    if bad:
        b = bad[0]
        return [(name, "FAIL", f"{len(bad)} of {len(graphs)}: {short(b)}: graph_launches "
                               f"{b['graph_launches']:g} vs launches {b.get('launches')}")]
    return [(name, "PASS", f"graph_launches = launches in all {len(graphs)} graph entries")]


RESULT = re.compile(r"^\[ +(OK|FAILED|SKIPPED) +\] (\S+)")


def delay_row(build_log):
    name = "suspicion: delay kernel accuracy (10/25 us)"
    if not build_log:
        return [(name, "SKIP", "no GPU test log")]
    try:
        with open(build_log) as f:
            text = f.read()
    except OSError as e:
        return [(name, "SKIP", f"cannot read {build_log}: {e.strerror}")]
    notes = [line.strip() for line in text.splitlines()
             if line.startswith(("global timer step:", "SM clock:", "spin of "))]
    for line in text.splitlines():
        m = RESULT.match(line)
        if m and m.group(2) == DELAY_TEST:
            status = {"OK": "PASS", "FAILED": "FAIL", "SKIPPED": "SKIP"}[m.group(1)]
            return [(name, status, "; ".join(notes) or DELAY_TEST)]
    return [(name, "SKIP", f"{DELAY_TEST} did not run (test_tp cut or not built?)")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="append", default=[])
    ap.add_argument("--build-log")
    args = ap.parse_args()
    benchmarks, problems = entries(args.report)
    missing = "; ".join(problems) if problems and not benchmarks else None
    rows = grouped_rows(benchmarks, missing) + split_k_row(benchmarks, missing)
    rows += graph_row(benchmarks, missing) + delay_row(args.build_log)
    for name, status, detail in rows:
        print(f"{name}\t{status}\t{' '.join(detail.split())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
