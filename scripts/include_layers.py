#!/usr/bin/env python3
"""Counts the include edges that run from a lower layer of src/ up to a higher one.

    scripts/include_layers.py [--max N]     # exit 1 when src/core includes a higher layer or
                                            # more than N edges run upwards (default 4)

A public header include/fusebench/X.hpp belongs to the folder of the .cpp that includes it as its
own header on its first #include line (src/core/shapes.cpp: fusebench/shapes.hpp); a header under
src/ belongs to its folder. The layers, lowest first, are LAYERS below.
"""
import argparse
import os
import re
import sys

LAYERS = ["io", "core", "weights", "ops", "backends", "exec", "measure", "comm", "report", "cli",
          "runner", "advise", "gate", "bench"]
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources():
    for top in ("src", "bench"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".cpp", ".hpp", ".cu")):
                    yield os.path.join(d, f)


def folder_of(path):
    rel = os.path.relpath(path, ROOT).split(os.sep)
    return "bench" if rel[0] == "bench" else rel[1]


def owners():
    """fusebench/X.hpp -> the folder whose .cpp implements it."""
    out = {}
    for path in sources():
        if not path.endswith((".cpp", ".cu")):
            continue
        with open(path, encoding="utf-8") as f:
            first = INCLUDE.search(f.read())
        if first and first.group(1).startswith("fusebench/"):
            stem = os.path.splitext(os.path.basename(first.group(1)))[0]
            if stem == os.path.splitext(os.path.basename(path))[0]:
                out[first.group(1)] = folder_of(path)
    return out


def target_folder(include, path, owned):
    if include in owned:
        return owned[include]
    head = include.split("/")[0]
    if head in LAYERS:
        return head
    if os.path.exists(os.path.join(os.path.dirname(path), include)):
        return folder_of(path)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=4)
    a = ap.parse_args()
    owned = owners()
    up = []
    for path in sources():
        here = folder_of(path)
        if here not in LAYERS:
            continue
        with open(path, encoding="utf-8") as f:
            for inc in INCLUDE.findall(f.read()):
                there = target_folder(inc, path, owned)
                if there in LAYERS and LAYERS.index(there) > LAYERS.index(here):
                    up.append((os.path.relpath(path, ROOT), inc, here, there))
    for p, inc, here, there in sorted(up):
        print(f"{p}: {inc} ({here} -> {there})")
    core_up = [u for u in up if u[2] == "core"]
    print(f"{len(up)} edges from a lower layer up to a higher one (at most {a.max}); "
          f"{len(core_up)} from src/core")
    return 1 if core_up or len(up) > a.max else 0


if __name__ == "__main__":
    sys.exit(main())
