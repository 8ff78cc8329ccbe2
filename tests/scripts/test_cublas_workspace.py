#!/usr/bin/env python3
"""cublasSetStream resets a cuBLAS handle's workspace to the library's default pool (cuBLAS docs,
cublasSetStream), so the statement after every cublasSetStream call in src/ must be a
cublasSetWorkspace call (issue 21 item 5). Comments are skipped; at least one call must exist, so
the check cannot pass on a tree that moved the calls elsewhere."""
import pathlib
import re
import sys

CALL = re.compile(r"\bcublasSetStream(_v2)?\s*\(")
WORKSPACE = re.compile(r"\bcublasSetWorkspace(_v2)?\s*\(")


def code_lines(path):
    """(line number, text) of the lines with code, // comments removed."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("//", 1)[0].strip()
        if text:
            yield n, text


def problems(root):
    found, bad = 0, []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".cpp", ".cu", ".hpp", ".h", ".cuh"):
            continue
        lines = list(code_lines(path))
        for i, (n, text) in enumerate(lines):
            if not CALL.search(text):
                continue
            found += 1
            nxt = lines[i + 1][1] if i + 1 < len(lines) else ""
            if not WORKSPACE.search(nxt):
                bad.append(f"{path}:{n}: cublasSetStream not followed by cublasSetWorkspace "
                           f"(next statement: {nxt!r})")
    return found, bad


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found, bad = problems(root / "src")
    for b in bad:
        print(b)
    if found == 0:
        print(f"no cublasSetStream call under {root / 'src'}: nothing checked")
        return 1
    print(f"{found} cublasSetStream call(s), {len(bad)} without cublasSetWorkspace after them")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
