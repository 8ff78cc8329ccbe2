#!/usr/bin/env bash
# The runs of this report (README.md), from the repository root on a release build, with nothing
# else running on the machine: tp/ep 2 only (two ranks on two cores, so no rank waits for a core).
set -euo pipefail
B=${FUSEBENCH:-build/bin/fusebench}
A=${FUSEBENCH_ADVISE:-build/bin/fusebench-advise}
D=reports/2026-12-06-cpu-tp-moe-quiet
common=(--backend=cpu --models=qwen3-30b-a3b --ops=tp_moe --dtypes=bf16 --seed=1 --tp=2
        --timing-max-time=2)
# Every variant, 1 to 1024 tokens, uniform routing, verified on every rank.
"$B" "${common[@]}" --tokens=1,16,256,1024 --routing=uniform --verify \
  --report=$D/threads-uniform.json
# Skew: zipf:1.2, then with 4 redundant experts (EPLB).
"$B" "${common[@]}" --tokens=256,1024 --routing=zipf:1.2 --verify --report=$D/zipf.json
"$B" "${common[@]}" --tokens=256,1024 --routing=zipf:1.2 --redundant-experts=4 --verify \
  --report=$D/zipf-eplb.json
# An engine's recorded expert loads (tokens_per_expert, 256 tokens), verified (issue 40's gap).
"$B" "${common[@]}" --tokens=256 \
  --routing=file:reports/2026-12-05-cpu-tp-moe/tokens_per_expert_m256.json --verify \
  --report=$D/file.json
# Two processes (comm:mpi).
mpirun -np 2 --allow-run-as-root "$B" "${common[@]}" --tokens=1,16,256,1024 --routing=uniform \
  --verify --report=$D/mpi-uniform.json
# Where EP beats TP: the advisor's ep_vs_tp, and the chart.
"$A" $D/threads-uniform.json --format=markdown -o $D/advise.md
"$A" $D/threads-uniform.json --format=json -o $D/advise.json
"$A" $D/mpi-uniform.json --format=markdown -o $D/advise-mpi.md
python3 scripts/plot_crossover.py $D/threads-uniform.json -o $D/charts
