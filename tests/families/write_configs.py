#!/usr/bin/env python3
"""Writes each case of cases.py as transformers' config class saves it: OUTDIR/<case>/config.json.

    write_configs.py OUTDIR

Needs the `transformers` package only (no torch): config classes import without it.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES  # noqa: E402


def main():
    out = sys.argv[1]
    try:
        from transformers import CONFIG_MAPPING
    except ImportError as e:
        print(f"write_configs: transformers is not installed ({e}); pip install transformers",
              file=sys.stderr)
        return 1
    for name, model_type, kwargs, _ in CASES:
        cfg = CONFIG_MAPPING[model_type](**kwargs)
        cfg.save_pretrained(os.path.join(out, name))
    print(f"write_configs: {len(CASES)} configs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
