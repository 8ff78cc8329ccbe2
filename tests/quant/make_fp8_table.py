#!/usr/bin/env python3
"""Writes fp8_e4m3fn_ml_dtypes.inc: float32 values (as bits) and the e4m3fn code ml_dtypes rounds
each to, after clamping to +-448 as vLLM does before torch's .to(float8_e4m3fn), as C++
initializers. test_quant.cpp includes it and checks src/core/quant.cpp's rounding against it, so
the test needs no Python.

Values: every code's value, every midpoint between neighbouring codes (ties) and the float32
values either side of it, and random float32 values of log-uniform magnitude 2^-12..2^10 with
random signs. Run again only to regenerate (needs numpy and ml_dtypes, scripts/requirements.txt).
"""
import sys
from pathlib import Path

import ml_dtypes
import numpy as np


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name(
        "fp8_e4m3fn_ml_dtypes.inc")
    codes = np.arange(256, dtype=np.uint8)
    values = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    finite = np.sort(np.unique(values[np.isfinite(values)]))
    mids = (finite[:-1] + finite[1:]) / 2
    mids32 = mids.astype(np.float32)
    assert np.all(mids32.astype(np.float64) == mids)  # midpoints are exact in float32
    rng = np.random.default_rng(29)
    n = 2048
    magnitudes = np.exp2(rng.uniform(-12, 10, n))
    randoms = (magnitudes * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    xs = np.concatenate([
        finite.astype(np.float32), mids32,
        np.nextafter(mids32, np.float32(np.inf)), np.nextafter(mids32, np.float32(-np.inf)),
        np.array([448.0, 449.0, 464.0, 465.0, 1e6, -1e6], np.float32), randoms
    ]).astype(np.float32)
    clamped = np.clip(xs, -448.0, 448.0).astype(np.float32)
    got = clamped.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    bits = xs.view(np.uint32)
    lines = [f"// ml_dtypes {ml_dtypes.__version__}: {{float32 bits, e4m3fn code}}, written by "
             "tests/quant/make_fp8_table.py"]
    lines += [f"{{0x{b:08x}u, 0x{c:02x}}}," for b, c in zip(bits, got)]
    out.write_text("\n".join(lines) + "\n")
    print(f"{out}: {len(xs)} values")


if __name__ == "__main__":
    main()
