#!/usr/bin/env python3
"""The charts, the HTML page and the summary on the entries of issues 29 and 30 (synthetic
reports, tests/charts/synthetic.py): quantized entries show their accuracy beside their speed (a
fused variant that is faster but less accurate says so), moe entries are drawn and tabled against
their per_expert baseline."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)
try:
    import matplotlib  # noqa: F401
except ImportError:
    print("SKIP: matplotlib is not installed (scripts/install-deps.sh installs scripts/requirements.txt)")
    sys.exit(77)
import fusebench_report as fr  # noqa: E402
import make_html  # noqa: E402
import plot_crossover as pc  # noqa: E402
import summarize_report  # noqa: E402
import synthetic as syn  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

QUANT = {"spec": "fp8:tensor", "execution": "emulated: the fp8_e4m3fn codes decoded to fp32"}


def quant_entries(fused_q):
    """qkv fp8:tensor at 1 and 16 tokens: fused 1.3x faster than split, its q shard's error as given."""
    out = []
    for t in (1, 16):
        g = syn.group("qkv", t, 1e-3, {"fused": (1.3, 1.25, 1.35), "fused_channelwise": (1.2, 1.15, 1.25)},
                      baseline="split", dtype="fp8:tensor")
        for e in g:
            e["quant"], e["label"] = QUANT, "emulated"
            e["quant_error"] = {"q": 0.0361, "k": 0.0355, "v": 0.0358}
            if e["variant"] != "split":
                e["quant_error_vs_split"] = {"q": 0.0, "k": 0.0, "v": 0.0}
        g[1]["quant_error"]["q"] = fused_q
        if fused_q != 0.0361:
            g[1]["quant_error_vs_split"]["q"] = 0.0123
        out += g
    return out


def moe_entries():
    out = []
    for t, grouped in ((1, (0.8, 0.78, 0.82)), (64, (1.3, 1.27, 1.33)), (256, (1.5, 1.47, 1.53))):
        g = syn.group("moe", t, 1e-4, {"grouped": grouped, "padded": (0.5, 0.48, 0.52)},
                      baseline="per_expert", model="tiny-deepseek-v3", layer="expert")
        for e in g:
            e["moe"] = {"routing": {"routing": "router", "seed": 1, "experts": 16, "top_k": 4}}
        out += g
    return out


def legend_labels(fig):
    return [t.get_text() for leg in fig.legends for t in leg.get_texts()]


class Args:
    threshold = 1.05
    decode_max = 64
    prefill_min = 512
    peak_flops = bandwidth = launch_overhead_us = advice = None


class AccuracyHelpers(unittest.TestCase):
    def test_less_accurate_only_where_a_shard_grew(self):
        with tempfile.TemporaryDirectory() as d:
            r = fr.load(syn.write(os.path.join(d, "q.json"), quant_entries(0.0412)))
        by = {}
        for e in r.entries:
            by.setdefault(e.variant, {})[e.tokens] = e
        fused = fr.accuracy(by["fused"], by["split"])
        self.assertTrue(fused.less_accurate)
        self.assertEqual((fused.growth_shard, fused.vs_split, fused.emulated), ("q", 0.0123, True))
        self.assertEqual(fused.text("split"), "quant err 0.0412, +14.1% over split (shard q): less accurate, emulated")
        channelwise = fr.accuracy(by["fused_channelwise"], by["split"])
        self.assertFalse(channelwise.less_accurate)
        self.assertEqual(channelwise.text("split"), "quant err 0.0361, emulated")
        self.assertIsNone(fr.accuracy({}, None))

    def test_malformed_values_are_never_shown_as_numbers(self):
        e = fr.Entry(name="x", op="qkv", variant="fused", model="m", tokens=1, tp=1, dtype="fp8:tensor",
                     timing="", extra="", time_ns=1.0, fields={"quant_error": {"q": "big", "k": -1, "v": 0.02}})
        self.assertEqual(fr.quant_errors(e), {"v": 0.02})


class Charts(unittest.TestCase):
    def figure(self, entries):
        with tempfile.TemporaryDirectory() as d:
            reports = [fr.load(syn.write(os.path.join(d, "r.json"), entries))]
        figs = pc.group_entries(reports)
        self.assertEqual(len(figs), 1)
        (model, op, layer), groups = next(iter(figs.items()))
        summary = []
        fig = pc.build_figure(model, op, layer, groups, reports, Args(), summary)
        self.addCleanup(plt.close, fig)
        return fig, summary

    def test_quant_chart_labels_say_accuracy_beside_speed(self):
        fig, _ = self.figure(quant_entries(0.0412))
        labels = legend_labels(fig)
        self.assertIn("fused; quant err 0.0412, +14.1% over split (shard q): less accurate, emulated", labels)
        self.assertIn("split; quant err 0.0361, emulated", labels)
        self.assertIn("fused_channelwise; quant err 0.0361, emulated", labels)

    def test_moe_chart_draws_grouped_and_padded_over_per_expert(self):
        fig, summary = self.figure(moe_entries())
        labels = legend_labels(fig)
        for v in ("per_expert", "grouped", "padded"):
            self.assertIn(v, labels)
        self.assertTrue(any("grouped over per_expert" in str(s) for s in summary) or
                        any("Speedup over per_expert" in ax.get_title() for ax in fig.axes),
                        [ax.get_title() for ax in fig.axes])


class SummaryAndHtml(unittest.TestCase):
    def summary(self, entries):
        with tempfile.TemporaryDirectory() as d:
            path = syn.write(os.path.join(d, "r.json"), entries)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(summarize_report.main([path]), 0)
        return out.getvalue()

    def test_summary_has_the_accuracy_column(self):
        out = self.summary(quant_entries(0.0412))
        self.assertIn("quant err o/t (worst shard)", out)
        fused = [ln for ln in out.splitlines() if " fused " in ln and " 16 " in ln]
        self.assertEqual(len(fused), 1, out)
        self.assertIn("0.0361/0.0412 LESS ACCURATE (emulated)", fused[0])
        channelwise = [ln for ln in out.splitlines() if "fused_channelwise" in ln and " 16 " in ln]
        self.assertIn("0.0361/0.0361 (emulated)", channelwise[0])
        self.assertNotIn("LESS ACCURATE", channelwise[0])
        # Reports without quantized entries keep their columns.
        self.assertNotIn("quant err", self.summary(moe_entries()))

    def test_summary_tables_moe_over_per_expert(self):
        out = self.summary(moe_entries())
        grouped = [ln for ln in out.splitlines() if " grouped " in ln and " 256 " in ln]
        self.assertEqual(len(grouped), 1, out)
        self.assertIn("per_expert", grouped[0])
        self.assertIn("1.500 [1.470, 1.530]", grouped[0])

    def test_html_entry_table_has_the_accuracy_column(self):
        with tempfile.TemporaryDirectory() as d:
            r = fr.load(syn.write(os.path.join(d, "r.json"), quant_entries(0.0412)))
        page = make_html.entry_table(r)
        self.assertIn("data-col='accuracy'", page)
        self.assertIn("+14.1% over split (shard q): less accurate", page)
        with tempfile.TemporaryDirectory() as d:
            r = fr.load(syn.write(os.path.join(d, "r.json"), moe_entries()))
        self.assertNotIn("data-col='accuracy'", make_html.entry_table(r))


if __name__ == "__main__":
    unittest.main()
