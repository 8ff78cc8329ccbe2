#!/usr/bin/env bash
# The TP pipelines under mpirun -np 2, interleaved: rank 0 leads, rank 1 follows the group
# protocol (group of naive, paired, sp and overlap, run member k, end), every repetition a fresh
# group measurement. Passes when every entry succeeded, each non-naive entry has a speedup
# over naive with an interval, and the compute pass ran on both processes (the slower kept).
#   tp_mpi_interleaved.sh REPORT.json MPIEXEC [mpiexec flags...] FUSEBENCH [fusebench flags...]
set -euo pipefail
report=$1
shift
rm -f "$report"
"$@" --report="$report"
python3 - "$report" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = [b for b in d["benchmarks"] if b.get("run_type") == "iteration"]
assert rows, "no entries"
for b in rows:
    assert not b.get("error_occurred"), b["name"] + ": " + str(b.get("error_message"))
    assert "/comm:mpi/" in b["name"], b["name"]
    assert b["interleaved_with"] == ["naive", "paired", "sp", "overlap"], b["interleaved_with"]
    # The compute pass ran on both processes at once; the slower one is reported.
    assert b["compute_ranks"] == 2, b["name"]
    assert 0 < b["compute_seconds_fastest_rank"] <= b["compute_seconds"], b["name"]
    assert "comm_by_difference_seconds" in b, b["name"]
    if b["variant"] == "overlap":
        assert abs(b["comm_exposed_seconds"] + b["comm_hidden_seconds"] - b["comm_seconds"]) <= 1e-9 * b["comm_seconds"] + 1e-12, b["name"]
    else:
        assert "comm_hidden_fraction" not in b, b["name"]
    if b["variant"] != "naive":
        for k in ("speedup", "speedup_pairs"):
            assert k in b, b["name"] + " lacks " + k
        if b["speedup_pairs"] >= 6:
            assert b["speedup_ci_low"] <= b["speedup"] <= b["speedup_ci_high"], b["name"]
        else:  # a loaded machine in 0.1 s: no 95% interval exists, and the entry says why
            assert "speedup_ci_low" not in b and "speedup_ci_note" in b, b["name"]
    else:
        assert "paired" in b["speedup_over"], b["name"]
paired = sum(1 for b in rows if b["variant"] == "paired")
assert paired == 4, f"{paired} paired entries (2 ops x 2 repetitions expected)"
print(f"tp_mpi_interleaved: {len(rows)} entries, every non-naive one with a speedup (an interval from 6 pairs)")
PY
