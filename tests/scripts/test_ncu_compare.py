#!/usr/bin/env python3
"""scripts/ncu_compare.py on a synthetic ncu --csv capture (the layout ncu prints: ==PROF== lines,
then one quoted row per kernel and metric) and a synthetic fusebench report."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import ncu_compare  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(kid, kernel, metric, unit, value):
    return (f'"{kid}","42","fusebench-region","127.0.0.1","{kernel}","1","13","(128, 1, 1)",'
            f'"(96, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"')


CSV = "\n".join([
    "# qkv/split/model:llama3-8b/tokens:1",
    "==PROF== Connected to process 42",
    '==PROF== Profiling "sm90_gemm": 0%....50%....100% - 1 pass',
    HEADER,
    row(0, "sm90_gemm_q", "dram__bytes_read.sum", "Mbyte", "33.55"),
    row(0, "sm90_gemm_q", "dram__bytes_write.sum", "byte", "8,192"),
    row(1, "sm90_gemm_kv", "dram__bytes_read.sum", "Mbyte", "8.39"),
    row(1, "sm90_gemm_kv", "dram__bytes_write.sum", "byte", "2048"),
    row(2, "sm90_gemm_kv", "dram__bytes_read.sum", "Mbyte", "8.39"),
    row(2, "sm90_gemm_kv", "dram__bytes_write.sum", "byte", "2048"),
    "# qkv/fused/model:llama3-8b/tokens:1",
    "==ERROR== Failed to initialize the profiler: LibraryNotLoaded",
])

REPORT = {"benchmarks": [
    {"op": "qkv", "variant": "split", "model": "llama3-8b", "tokens": 1, "tp": 1, "dtype": "bf16",
     "kernels": 3.0, "dram_read_bytes": 50.0e6, "dram_write_bytes": 9000.0},
    {"op": "qkv", "variant": "fused", "model": "llama3-8b", "tokens": 1, "tp": 1, "dtype": "bf16",
     "kernels": 1.0},
]}


class NcuCompare(unittest.TestCase):
    def test_parses_kernels_units_and_thousands_separators(self):
        regions = ncu_compare.parse_ncu(CSV)
        split = regions["qkv/split/model:llama3-8b/tokens:1"]
        self.assertEqual(split["kernels"], 3)
        self.assertEqual(split["kernel_names"], ["sm90_gemm_q", "sm90_gemm_kv"])
        self.assertAlmostEqual(split["dram_read_bytes"], 50.33e6)
        self.assertAlmostEqual(split["dram_write_bytes"], 12288)

    def test_a_failed_ncu_block_says_why(self):
        fused = ncu_compare.parse_ncu(CSV)["qkv/fused/model:llama3-8b/tokens:1"]
        self.assertIn("LibraryNotLoaded", fused["error"])

    def test_verdicts(self):
        rows = {(r[0].split("/")[1], r[1]): r for r in
                ncu_compare.compare(ncu_compare.parse_ncu(CSV), REPORT)}
        self.assertEqual(rows[("split", "kernels")][4], "equal")
        self.assertEqual(rows[("split", "dram_read_bytes")][4], "within 5%")
        self.assertEqual(rows[("split", "dram_write_bytes")][4], "-26.8%")
        self.assertTrue(rows[("split", "l2_bytes")][4].startswith("n/a"))
        self.assertTrue(rows[("fused", "ncu")][4].startswith("ncu failed"))

    def test_kernel_count_mismatch_is_flagged(self):
        report = {"benchmarks": [dict(REPORT["benchmarks"][0], kernels=4.0)]}
        rows = ncu_compare.compare(ncu_compare.parse_ncu(CSV), report)
        self.assertIn(("qkv/split/model:llama3-8b/tokens:1", "kernels", 4.0, 3, "DIFFERENT"), rows)

    def test_a_layer_segment_selects_that_layer(self):
        csv_text = CSV.replace("# qkv/split/model:llama3-8b/tokens:1",
                               "# qkv/split/model:llama3-8b/layer:attention/tokens:1")
        other = dict(REPORT["benchmarks"][0], layer="mla", kernels=9.0)
        mine = dict(REPORT["benchmarks"][0], layer="attention")
        rows = ncu_compare.compare(ncu_compare.parse_ncu(csv_text), {"benchmarks": [other, mine]})
        self.assertIn(("qkv/split/model:llama3-8b/layer:attention/tokens:1", "kernels", 3.0, 3,
                       "equal"), rows)


if __name__ == "__main__":
    unittest.main()
