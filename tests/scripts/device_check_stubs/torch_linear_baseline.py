#!/usr/bin/env python3
"""Stand-in for scripts/torch_linear_baseline.py (no torch here): writes an empty torch.json."""
import json
import sys

out = sys.argv[sys.argv.index("--out") + 1]
with open(out, "w") as f:
    json.dump({"torch": "stand-in", "entries": []}, f)
