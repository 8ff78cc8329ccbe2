#!/usr/bin/env python3
"""Cross-checks fusebench's CUPTI counters against Nsight Compute on the same regions.

Input: the ncu.csv that scripts/device-check.sh writes (blocks of `ncu --csv --metrics ...` output
over `fusebench-region`, each block headed by a line `# <op>/<variant>/model:<m>[/layer:<l>]/tokens:<t>`) and
a fusebench report.json. Per region: kernels (ncu profiles kernels only, so it is compared with
our `kernels`, not `launches`), DRAM bytes read and written, L2 bytes.

Expected differences, printed with the verdict: ncu replays each kernel with caches flushed before
it (--cache-control all), so a split variant whose GEMMs share X re-reads X per kernel in ncu but
may find it in L2 within our one range; writes still in L2 when our range closes are not in ours.

  scripts/ncu_compare.py ncu.csv report.json        (exit 0; prints a table)
"""
import csv
import io
import json
import re
import sys

_SCALE = {
    "byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kibyte": 1024, "mibyte": 1024**2, "gibyte": 1024**3,
    "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1,
}
_METRICS = {
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_op_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "dram__bytes_op_write.sum": "dram_write_bytes",
    "lts__t_bytes.sum": "l2_bytes",
    "gpu__time_duration.sum": "gpu_seconds",
}


def _number(value, unit):
    text = value.replace(",", "").strip()
    try:
        v = float(text)
    except ValueError:
        return None
    return v * _SCALE.get(unit.strip().lower(), 1)


def parse_ncu(text):
    """Returns {region: {"kernels": n, "kernel_names": [...], <counter>: sum, "error": str?}}."""
    regions = {}
    for block in re.split(r"^# ", text, flags=re.M)[1:]:
        label, _, body = block.partition("\n")
        label = label.strip()
        lines = [line for line in body.splitlines() if line.startswith('"')]
        entry = {"kernels": 0, "kernel_names": []}
        if not lines:
            errors = [line for line in body.splitlines() if "ERR" in line or "rror" in line]
            entry["error"] = errors[0].strip() if errors else "no ncu rows (no kernel profiled)"
            regions[label] = entry
            continue
        ids = set()
        for row in csv.DictReader(io.StringIO("\n".join(lines))):
            kid = row.get("ID")
            if kid not in ids:
                ids.add(kid)
                name = row.get("Kernel Name", "?")
                if name not in entry["kernel_names"]:
                    entry["kernel_names"].append(name)
            key = _METRICS.get(row.get("Metric Name", ""))
            if key:
                v = _number(row.get("Metric Value", ""), row.get("Metric Unit", ""))
                if v is not None:
                    entry[key] = entry.get(key, 0.0) + v
        entry["kernels"] = len(ids)
        regions[label] = entry
    return regions


def _ours(report, label):
    """The report entry of the region `label` (op/variant/model:m[/layer:l]/tokens:t), any timing
    regime; without a layer segment, any layer."""
    op, variant, *segments = label.split("/")
    fields = dict(s.split(":", 1) for s in segments if ":" in s)
    model, tokens, layer = fields["model"], int(fields["tokens"]), fields.get("layer")
    for b in report.get("benchmarks", []):
        if (b.get("op"), b.get("variant"), b.get("model"), b.get("tokens")) == (op, variant, model, tokens) \
                and (layer is None or b.get("layer") == layer) \
                and not b.get("error_occurred") and b.get("tp", 1) == 1 and b.get("dtype", "bf16") == "bf16":
            return b
    return None


def compare(ncu, report, byte_tolerance=0.05):
    """Rows of (region, field, ours, ncu, verdict)."""
    rows = []
    for label, theirs in ncu.items():
        ours = _ours(report, label)
        if "error" in theirs:
            rows.append((label, "ncu", None, None, "ncu failed: " + theirs["error"]))
            continue
        if ours is None:
            rows.append((label, "report", None, None, "no such entry in the report"))
            continue
        k_ours = ours.get("kernels")
        rows.append((label, "kernels", k_ours, theirs["kernels"],
                     "n/a (ours unavailable)" if k_ours is None else
                     "equal" if round(k_ours) == theirs["kernels"] else "DIFFERENT"))
        for key in ("dram_read_bytes", "dram_write_bytes", "l2_bytes"):
            a, b = ours.get(key), theirs.get(key)
            if a is None or b is None:
                verdict = "n/a (" + ("ours" if a is None else "ncu") + " unavailable)"
            elif b == 0:
                verdict = "equal" if a == 0 else "ncu 0"
            else:
                rel = a / b - 1
                verdict = (f"within {byte_tolerance:.0%}" if abs(rel) <= byte_tolerance
                           else f"{rel:+.1%}")
            rows.append((label, key, a, b, verdict))
    return rows


def print_table(rows, out=sys.stdout):
    def f(v):
        return "n/a" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
    print(f"{'region':<40} {'counter':<17} {'fusebench':>12} {'ncu':>12}  verdict", file=out)
    for label, key, a, b, verdict in rows:
        print(f"{label:<40} {key:<17} {f(a):>12} {f(b):>12}  {verdict}", file=out)
    print("(ncu flushes caches before every kernel and counts kernels only; in one fusebench range "
          "split GEMMs may share X through L2, and writes still in L2 at the end are not counted)",
          file=out)


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    try:
        text = open(argv[1]).read()
        report = json.load(open(argv[2]))
    except (OSError, ValueError) as e:
        print(f"ncu_compare: {e}")
        return 2
    print_table(compare(parse_ncu(text), report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
