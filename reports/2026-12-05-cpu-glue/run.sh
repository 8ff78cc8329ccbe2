#!/usr/bin/env bash
# The runs behind this report, in the order taken (see README.md). BEFORE is main before issue 39
# (66a8ae2), AFTER this change; both built Release. The two binaries alternate so that each pair
# of rounds shares the machine's state; then PyTorch beside fusebench in alternating blocks.
set -euo pipefail
BEFORE=${BEFORE:-/tmp/fusebench-base}
AFTER=${AFTER:-build/bin/fusebench}
OUT=${OUT:-reports/2026-12-05-cpu-glue}
PY=${PY:-python3}   # a Python with torch (pip install torch)
proj=(--backend=cpu --models=qwen3-0.6b --ops=qkv,gate_up --dtypes=fp32,bf16 --cpu-threads=2)
for round in 1 2; do
  "$BEFORE" "${proj[@]}" --report="$OUT/before-$round.json" > "$OUT/before-$round.txt" 2>&1
  "$AFTER" "${proj[@]}" --report="$OUT/after-$round.json" > "$OUT/after-$round.txt" 2>&1
done
# int8 (vLLM's w8a8: per-channel weights, per-token activations) beside bf16, both binaries.
q8=(--backend=cpu --models=qwen3-0.6b --ops=qkv,gate_up --dtypes=bf16,int8:channel --tokens=1,256,1024
    --cpu-threads=2)
"$BEFORE" "${q8[@]}" --report="$OUT/int8-before.json" > "$OUT/int8-before.txt" 2>&1
"$AFTER" "${q8[@]}" --report="$OUT/int8-after.json" > "$OUT/int8-after.txt" 2>&1
# PyTorch as the peer: the same shapes and steps, 2 threads, alternating blocks with fusebench.
"$PY" scripts/torch_cpu_peer.py --fusebench "$AFTER" --models qwen3-0.6b --ops gate_up,qkv \
  --tokens 256,1024 --dtypes bf16,fp32,int8 --threads 2 --blocks 3 --out "$OUT/peer.json" \
  > "$OUT/peer.md"
