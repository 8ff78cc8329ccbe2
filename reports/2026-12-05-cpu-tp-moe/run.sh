#!/usr/bin/env bash
# The runs of this report (README.md), from the repository root on a release build; niced, as
# the machine was shared with two other builds.
set -euo pipefail
B=${FUSEBENCH:-build/bin/fusebench}
D=reports/2026-12-05-cpu-tp-moe
common=(--backend=cpu --models=qwen3-30b-a3b --ops=tp_moe --dtypes=bf16 --seed=1 --timing-max-time=1)
# Every variant at tp/ep 2 and 4 (in-process ranks), 1 to 1024 tokens, verified.
nice -n 19 "$B" "${common[@]}" --tp=2,4 --tokens=1,16,256,1024 --routing=uniform --verify \
  --report=$D/threads-uniform.json
# Skew at ep 4: zipf:1.2, then with 8 redundant experts (EPLB).
nice -n 19 "$B" "${common[@]}" --tp=4 --tokens=256 --routing=zipf:1.2 --verify \
  --report=$D/ep4-zipf.json
nice -n 19 "$B" "${common[@]}" --tp=4 --tokens=256 --routing=zipf:1.2 --redundant-experts=8 \
  --verify --report=$D/ep4-zipf-eplb.json
# An engine-style expert-load file (tokens_per_expert, 256 tokens) through EP. Not --verify: the
# verifier sizes its float64 budget on a plan at 1 token, which a 256-token count file refuses.
nice -n 19 "$B" "${common[@]}" --tp=4 --tokens=256 --routing=file:$D/tokens_per_expert_m256.json \
  --report=$D/ep4-file.json
# Two processes (comm:mpi); correctness over MPI is ctest's test_comm_mpi_np2.
nice -n 19 mpirun -np 2 --allow-run-as-root --oversubscribe "$B" "${common[@]}" --tp=2 \
  --tokens=1,16,256,1024 --routing=uniform --report=$D/mpi-uniform.json
