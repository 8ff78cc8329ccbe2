#!/usr/bin/env python3
"""Crossovers with intervals, the charts' layout, the HTML tables and the summary, on synthetic
reports (tests/charts/synthetic.py) with and without the interleaved speedups of COMMON
contract 2. The layout checks use matplotlib's own objects after drawing: no empty panel, one
style per series, the legend inside the figure, no text box on a data point, no two texts on
top of each other, no text struck through by the threshold line."""
import contextlib
import io
import itertools
import json
import math
import os
import re
import shutil
import subprocess
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
import fusebench_crossover as fx  # noqa: E402
import fusebench_report as fr  # noqa: E402
import make_html  # noqa: E402
import plot_crossover as pc  # noqa: E402
import summarize_report  # noqa: E402
import synthetic as syn  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

THR = 1.05


def tight(r, hw=0.01):
    return (r, r - hw, r + hw)


def pts(values, tokens=(1, 4, 16, 64, 256, 1024), hw=0.01):
    """[(tokens, value, lo, hi)] with a +-hw interval (hw None: no interval)."""
    return [(t, v, None if hw is None else v - hw, None if hw is None else v + hw) for t, v in zip(tokens, values)]


class CrossoverTest(unittest.TestCase):
    def test_rising_curve_is_an_upward_crossing_not_always_above(self):
        # issue 14 item 1: 0.98, 1.00, 1.07, ... was called "always_above".
        c = fx.crossover(pts([0.98, 1.00, 1.07, 1.10, 1.12, 1.2]), THR)
        self.assertEqual(c["kind"], "cross_up")
        self.assertEqual(len(c["crossings"]), 1)
        x = c["crossings"][0]
        self.assertEqual((x["direction"], x["tokens_low"], x["tokens_high"]), ("up", 4, 16))
        self.assertTrue(4 < x["tokens"] < 16)
        self.assertIn("rises above 1.05x between 4-16 tokens", fx.describe(c))
        self.assertNotIn("always", fx.describe(c))

    def test_falling_curve_interval_spans_the_unresolved_points(self):
        c = fx.crossover([(1, 1.3, 1.25, 1.35), (4, 1.2, 1.1, 1.3), (16, 1.05, 0.95, 1.15), (64, 1.0, 0.9, 1.1),
                          (256, 0.9, 0.85, 0.95)], THR)
        self.assertEqual(c["kind"], "cross_down")
        x = c["crossings"][0]
        # 16 and 64 straddle the threshold: the crossing lies somewhere between 4 and 256.
        self.assertEqual((x["tokens_low"], x["tokens_high"]), (4, 256))
        self.assertEqual([s for _, s in c["states"]], ["above", "above", "unresolved", "unresolved", "below"])
        self.assertIn("falls under", fx.describe(c))

    def test_multiple_crossings_are_all_named(self):
        c = fx.crossover(pts([0.9, 1.2, 1.2, 0.9, 0.9, 1.3]), THR)
        self.assertEqual(c["kind"], "multiple")
        self.assertEqual([x["direction"] for x in c["crossings"]], ["up", "down", "up"])
        self.assertEqual([(x["tokens_low"], x["tokens_high"]) for x in c["crossings"]], [(1, 4), (16, 64), (256, 1024)])
        self.assertIn("3 times", fx.describe(c))

    def test_always_above_and_always_below(self):
        self.assertEqual(fx.crossover(pts([1.2, 1.1, 1.3, 1.2, 1.1, 1.5]), THR)["kind"], "always_above")
        c = fx.crossover(pts([0.9, 0.8, 1.0, 0.7, 0.9, 1.03]), THR)
        self.assertEqual(c["kind"], "always_below")
        self.assertIn("below 1.05x at every token count (1-1024)", fx.describe(c))

    def test_straddling_intervals_are_not_resolved(self):
        # Central values that cross 1.05 (0.9 -> 1.2) but every interval straddles it.
        c = fx.crossover(pts([0.9, 1.0, 1.1, 1.2], tokens=(1, 16, 256, 1024), hw=0.3), THR)
        self.assertEqual(c["kind"], "not_resolved")
        self.assertEqual(c["crossings"], [])
        self.assertIn("not resolved", fx.describe(c))

    def test_one_unresolved_point_denies_always_above(self):
        c = fx.crossover([(1, 1.2, 1.1, 1.3), (16, 1.2, 1.1, 1.3), (256, 1.06, 1.0, 1.1)], THR)
        self.assertEqual(c["kind"], "not_resolved")
        self.assertIn("above 1-16, unresolved 256", fx.describe(c))

    def test_no_intervals_resolve_nothing(self):
        c = fx.crossover(pts([1.3, 1.2, 1.0, 0.9], tokens=(1, 16, 256, 1024), hw=None), THR)
        self.assertEqual(c["kind"], "not_resolved")
        self.assertFalse(c["has_intervals"])
        self.assertIn("no 95% interval", fx.describe(c))

    def test_exact_values_as_for_the_model(self):
        c = pc.crossover([(1, 1.2), (16, 1.1), (256, 1.0), (1024, 0.9)], THR)
        self.assertEqual(c["kind"], "cross_down")
        self.assertAlmostEqual(c["tokens"], 2 ** (4 + 0.5 * 4))  # halfway on the log2 axis
        self.assertEqual(pc.crossover([], THR)["kind"], "no_data")


class ReportTest(unittest.TestCase):
    def test_names_with_and_without_layer_and_weights(self):
        with_segments = "qkv/fused/model:m/layer:mla/tokens:16/tp:2/dtype:bf16/weights:checkpoint/comm:none/" \
                        "timing:cold/iterations:1/manual_time"
        p = fr.parse_name(with_segments)
        self.assertEqual((p["layer"], p["weights"], p["tokens"], p["extra"]), ("mla", "checkpoint", "16", ["comm:none"]))
        p = fr.parse_name("qkv/fused/model:m/tokens:16/tp:1/dtype:bf16/timing:cold/iterations:1/manual_time")
        self.assertEqual((p.get("layer"), p.get("weights"), p["extra"]), (None, None, []))

    def _load(self, entries):
        with tempfile.TemporaryDirectory() as d:
            return fr.load(syn.write(os.path.join(d, "r.json"), entries))

    def test_paired_speedup_and_fallback(self):
        rep = self._load(syn.group("qkv", 16, 1e-3, {"fused": (1.2, 1.1, 1.3), "grouped": 0.8}, baseline="split",
                                   layer="attention", weights="random"))
        e = {x.variant: x for x in rep.entries}
        self.assertEqual((e["fused"].layer, e["fused"].weights), ("attention", "random"))
        r = fr.speedup_between(e["fused"], e["split"], "split")
        self.assertEqual((r.value, r.ci_low, r.ci_high, r.method, r.pairs), (1.2, 1.1, 1.3, fr.PAIRED, 40))
        r = fr.speedup_between(e["grouped"], e["split"], "split")
        self.assertEqual(r.method, fr.MEDIANS)
        self.assertAlmostEqual(r.value, 0.8)
        self.assertFalse(r.has_interval)  # never an invented interval
        self.assertIn("ratio of medians", r.text())

    def test_speedup_over_another_variant_and_its_inverse(self):
        rep = self._load(syn.group("tp_mlp", 64, 1e-3, {"paired": tight(1.1), "sp": tight(1.3)}, baseline="naive",
                                   over={("sp", "paired"): (1.18, 1.1, 1.25), ("paired", "sp"): (0.85, 0.8, 0.9)},
                                   tp=2, comm="inprocess"))
        e = {x.variant: x for x in rep.entries}
        r = fr.speedup_between(e["sp"], e["paired"], "paired")
        self.assertEqual((r.value, r.ci_low, r.ci_high), (1.18, 1.1, 1.25))
        del e["sp"].fields["speedup_over"]["paired"]
        r = fr.speedup_between(e["sp"], e["paired"], "paired")  # inverted from paired's entry
        self.assertAlmostEqual(r.value, 1 / 0.85)
        self.assertAlmostEqual(r.ci_low, 1 / 0.9)
        self.assertAlmostEqual(r.ci_high, 1 / 0.8)

    def test_half_an_interval_is_no_interval(self):
        ents = syn.group("qkv", 16, 1e-3, {"fused": (1.2, 1.1, 1.3)}, baseline="split")
        del ents[1]["speedup_ci_high"]
        rep = self._load(ents)
        e = {x.variant: x for x in rep.entries}
        r = fr.speedup_between(e["fused"], e["split"], "split")
        self.assertEqual((r.value, r.has_interval), (1.2, False))

    def test_time_interval_in_seconds(self):
        rep = self._load([syn.entry("allreduce", "sum", 16, 2e-5, tp=2, comm="inprocess", time_ci=(0.9, 1.2))])
        lo, hi = rep.entries[0].time_interval_ns()
        self.assertAlmostEqual(lo, 18000)
        self.assertAlmostEqual(hi, 24000)


# ---- charts -----------------------------------------------------------------------------------

def draw(entries, tmp, *extra_args, reports=None):
    paths = reports or [syn.write(os.path.join(tmp, "r.json"), entries)]
    args = pc.parse_args(paths + ["-o", tmp] + list(extra_args))
    figs, summary = pc.plot_all(fr.load_all(paths, args.labels.split(",") if args.labels else None), args)
    for _, fig in figs:
        fig.savefig(os.path.join(tmp, "check.png"))  # the layout as written to disk
    return figs, summary


def panels(fig):
    return {ax.get_gid()[len("panel:"):]: ax for ax in fig.axes if (ax.get_gid() or "").startswith("panel:")}


def data_lines(ax, kind=None):
    return [ln for ln in ax.lines if (ln.get_gid() or "").startswith("data:" + (kind or "")) and len(ln.get_xdata())]


def artists(fig, gid):
    return [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == gid]


def figure_texts(fig):
    r = fig.canvas.get_renderer()
    out = []
    if fig._suptitle is not None:
        out.append(("suptitle", fig._suptitle.get_window_extent(r)))
    for leg in fig.legends:
        out.append(("legend", leg.get_window_extent(r)))
    for ax in fig.axes:
        for t in (ax.title, ax.xaxis.label, ax.yaxis.label):
            if t.get_text() and t.get_visible():
                out.append((f"{ax.get_gid()} {t.get_text()[:20]}", t.get_window_extent(r)))
        for t in ax.texts:
            patch = t.get_bbox_patch()
            out.append((f"{ax.get_gid()} text", (patch or t).get_window_extent(r)))
    return out


class LayoutChecks:
    def assert_readable(self, fig):
        r = fig.canvas.get_renderer()
        fb = fig.bbox
        ps = panels(fig)
        self.assertTrue(ps)
        for pid, ax in ps.items():
            self.assertTrue(data_lines(ax), f"panel {pid} is empty")
        # Every other axes is an empty cell of a tp column that says why it is empty.
        for ax in fig.axes:
            if not (ax.get_gid() or "").startswith("panel:"):
                self.assertTrue((ax.get_gid() or "").startswith("empty:"), f"an axes that is not a panel: {ax.get_gid()}")
                self.assertFalse(data_lines(ax))
                self.assertTrue(any(t.get_text() for t in ax.texts), f"{ax.get_gid()} does not say why it is empty")
        self.assert_legend_drawn(fig)
        # One style per series in each panel, measured and model lines alike.
        for pid, ax in ps.items():
            for kind in ("measured", "model"):
                styles = [(ln.get_color(), ln.get_marker(), str(ln.get_linestyle())) for ln in data_lines(ax, kind)]
                self.assertEqual(len(styles), len(set(styles)), f"{pid}: two {kind} series share a style")
        # The legend inside the figure.
        self.assertEqual(len(fig.legends), 1)
        lb = fig.legends[0].get_window_extent(r)
        self.assertTrue(lb.x0 >= fb.x0 - 1 and lb.y0 >= fb.y0 - 1 and lb.x1 <= fb.x1 + 1 and lb.y1 <= fb.y1 + 1,
                        f"legend {lb} outside figure {fb}")
        # No text box over a data point (any panel), no texts on top of each other.
        points = []
        for ax in fig.axes:
            for ln in ax.lines:
                if (ln.get_gid() or "").startswith("data:") or ln.get_gid() == "crossing":
                    xy = list(zip(ln.get_xdata(), ln.get_ydata()))
                    points += [tuple(p) for p in ln.get_transform().transform(xy)]
        for name, bb in figure_texts(fig):
            if "text" in name or name == "legend":
                inside = [p for p in points if bb.contains(*p)]
                self.assertEqual(len(inside), 0, f"{name} covers data points {inside[:3]}")
        for (n1, b1), (n2, b2) in itertools.combinations(figure_texts(fig), 2):
            self.assertFalse(b1.overlaps(b2), f"{n1!r} overlaps {n2!r}")
        # No text inside a speedup panel lies on the threshold line.
        for pid, ax in ps.items():
            for ln in ax.lines:
                if ln.get_gid() != "threshold":
                    continue
                y = ln.get_transform().transform((1, ln.get_ydata()[0]))[1]
                ab = ax.get_window_extent(r)
                for t in ax.texts:
                    tb = (t.get_bbox_patch() or t).get_window_extent(r)
                    if tb.overlaps(ab):
                        self.assertFalse(tb.y0 <= y <= tb.y1, f"{pid}: threshold line through a text")


    def assert_legend_drawn(self, fig):
        """The legend names what was drawn and only that: one entry per series drawn (each in its
        own colour), and every other entry the label of an artist drawn in some panel."""
        drawn = {}
        for ax in fig.axes:
            for ln in data_lines(ax, "measured"):
                drawn[ln.get_label()] = ln.get_color()
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        series = [lb for lb in labels if lb in drawn]
        self.assertEqual(sorted(series), sorted(drawn), "legend series != series drawn")
        colors = [matplotlib.colors.to_hex(drawn[lb]) for lb in series]
        self.assertEqual(len(colors), len(set(colors)), f"two series share a colour: {list(zip(series, colors))}")
        artist_labels = {a.get_label() for ax in fig.axes for a in ax.get_children()}
        artist_labels |= {a.get_label() for ax in fig.axes for a in ax.lines}
        for lb in labels:
            if lb.startswith("advice strip"):
                continue  # fusebench_advice.shade's strips: drawn-only by its own bookkeeping
            self.assertIn(lb, artist_labels, f"legend entry {lb!r} for nothing drawn")


class ChartTest(unittest.TestCase, LayoutChecks):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="charts-")

    def tearDown(self):
        plt.close("all")

    def test_straddling_intervals_say_not_resolved(self):
        # The central values go from 0.95 to 1.15: a ratio of medians would "cross" near 16 tokens.
        ents = syn.curve("qkv", [(1, (0.95, 0.9, 1.06)), (16, (1.04, 0.99, 1.09)), (256, (1.1, 1.02, 1.2)),
                                 (1024, (1.15, 1.04, 1.3))])
        figs, summary = draw(ents, self.tmp)
        (_, fig), = figs
        (s,) = summary
        self.assertEqual(s["measured"]["kind"], "not_resolved")
        self.assertEqual(s["speedup_method"], [fr.PAIRED])
        notes = [a.get_text() for a in artists(fig, "crossover-notes")]
        self.assertTrue(any("measured not resolved" in n for n in notes), notes)
        self.assertFalse(artists(fig, "crossing"), "a crossover drawn from straddling intervals")
        self.assertTrue(artists(fig, "interval-band"), "no interval bands")
        ax = panels(fig)["speedup:split"]
        self.assertIn("95% intervals", ax.get_title())
        # The model (exact) still states its own crossover beside it.
        self.assertIsNotNone(s["model_prediction"])
        self.assert_readable(fig)

    def test_resolved_upward_crossing_is_drawn_with_its_interval(self):
        ents = syn.curve("qkv", [(1, tight(0.9)), (16, tight(0.98)), (64, (1.06, 1.0, 1.12)), (256, tight(1.1)),
                                 (1024, tight(1.2))])
        figs, summary = draw(ents, self.tmp)
        (_, fig), = figs
        m = summary[0]["measured"]
        self.assertEqual(m["kind"], "cross_up")
        self.assertEqual((m["crossings"][0]["tokens_low"], m["crossings"][0]["tokens_high"]), (16, 256))
        (bar,) = [a for a in artists(fig, "crossing") if hasattr(a, "get_xdata") and a.get_marker() not in "|_"]
        self.assertAlmostEqual(bar.get_ydata()[0], THR)
        segs = [c for c in artists(fig, "crossing") if hasattr(c, "get_segments")]
        xs = [x for c in segs for seg in c.get_segments() for x, _ in seg]
        self.assertAlmostEqual(min(xs), 16)
        self.assertAlmostEqual(max(xs), 256)
        self.assertTrue(any("rises above 1.05x between 16-256 tokens" in a.get_text()
                            for a in artists(fig, "crossover-notes")))
        self.assert_readable(fig)

    def test_report_without_intervals_uses_ratio_of_medians_and_resolves_nothing(self):
        ents = syn.curve("qkv", [(1, 1.3), (16, 1.2), (256, 1.0), (1024, 0.9)])
        figs, summary = draw(ents, self.tmp)
        (_, fig), = figs
        self.assertEqual(summary[0]["speedup_method"], [fr.MEDIANS])
        self.assertEqual(summary[0]["measured"]["kind"], "not_resolved")
        self.assertFalse(artists(fig, "interval-band"))
        self.assertFalse(artists(fig, "crossing"))
        self.assertIn("ratio of medians", panels(fig)["speedup:split"].get_title())
        self.assertTrue(any("ratio of medians" in a.get_text() for a in artists(fig, "crossover-notes")))
        self.assert_readable(fig)

    def test_few_pairs_and_contended_entries_draw_no_band_and_no_crossover(self):
        # Issue 19: the same curve as the resolved crossing above, but resting on 1-2 pairs (with
        # an older report's zero-width [min, max]), or measured contended: nothing is judged.
        for mark in ("pairs", "contended"):
            ents = syn.curve("qkv", [(1, tight(0.9)), (16, tight(0.98)), (64, (1.06, 1.0, 1.12)),
                                     (256, tight(1.1)), (1024, tight(1.2))])
            for e in ents:
                if "speedup" not in e:
                    continue
                if mark == "pairs":
                    e["speedup_pairs"] = 2.0
                    e["speedup_ci_low"] = e["speedup_ci_high"] = e["speedup"]
                else:
                    e["timing_stop"] = "contended"
            figs, summary = draw(ents, self.tmp)
            (_, fig), = figs
            m = summary[0]["measured"]
            self.assertEqual(m["kind"], "not_resolved", mark)
            self.assertFalse(m["crossings"], mark)
            self.assertFalse(artists(fig, "interval-band"), mark)
            self.assertFalse(artists(fig, "crossing"), mark)
            why = "n < 6" if mark == "pairs" else "contended"
            self.assertEqual(set(summary[0]["not_judged"].values()), {why})
            self.assertTrue(any(f"not judged at 5 token count(s): {why}" in a.get_text()
                                for a in artists(fig, "crossover-notes")), mark)
            plt.close("all")

    def tp_entries(self):
        ents = []
        for tp, dtype, t in itertools.product((1, 2, 4), ("fp32", "bf16"), (1, 64, 1024, 4096)):
            g = 1 + 0.05 * math.log2(t) * (tp > 1)
            ents += syn.group("tp_mlp", t, 1e-4 * t ** 0.5, {"paired": tight(1.1), "sp": tight(1.1 * g),
                                                            "overlap": tight(0.8 * g * g)},
                              baseline="naive", over={("sp", "paired"): tight(g), ("overlap", "paired"): tight(0.73 * g * g)},
                              tp=tp, dtype=dtype, comm="none" if tp == 1 else "inprocess")
        return ents

    def draw_tp(self, cores):
        """The TP chart of tp_entries on a host with this many cores."""
        ctx = json.loads(json.dumps(syn.CPU_CONTEXT))
        ctx["num_cpus"] = ctx["hardware_threads"] = cores
        path = syn.write(os.path.join(self.tmp, f"tp{cores}.json"), self.tp_entries(), ctx)
        return draw(None, self.tmp, reports=[path])

    def test_tp_chart_is_small_multiples_one_column_per_tp(self):
        # Issue 23: 24 series in 4 colours and a 30-line notes box. Now one column of panels per
        # tp, a colour per series (variant x dtype), the same in every column.
        figs, summary = self.draw_tp(cores=64)
        (_, fig), = figs
        ps = panels(fig)
        for tp in (2, 4):
            self.assertEqual(len(data_lines(ps[f"speedup:naive@tp{tp}"], "measured")), 6)  # 3 variants x 2 dtypes
            self.assertEqual(len(data_lines(ps[f"speedup:paired@tp{tp}"], "measured")), 4)  # sp and overlap
            self.assertEqual(len(data_lines(ps[f"launches@tp{tp}"], "measured")), 8)  # every series
        self.assertNotIn("speedup:split", ps)
        # One axes column per tp: every panel of a column lies in one x range, columns side by side.
        r = fig.canvas.get_renderer()
        xs = {tp: {round(ax.get_window_extent(r).x0) for gid, ax in ps.items() if gid.endswith(f"@tp{tp}")}
              for tp in (1, 2, 4)}
        self.assertTrue(all(len(v) == 1 for v in xs.values()), xs)
        self.assertLess(xs[1].pop(), min(xs[2]))
        over_paired = [s for s in summary if s["over"] == "paired"]
        self.assertEqual({s["variant"] for s in over_paired}, {"sp", "overlap"})
        sp2 = [s for s in over_paired if s["variant"] == "sp" and s["tp"] == 2 and s["dtype"] == "fp32"][0]
        self.assertEqual(sp2["measured"]["kind"], "cross_up")  # g rises through 1.05 between 1 and 64
        self.assertIsNone(sp2["oversubscribed"])  # 4 busy threads on 64 cores
        # Communication is not in the cost model: no model line where the entries communicate.
        self.assertTrue(all(s["model_prediction"] is None for s in summary if s["tp"] > 1))
        colors = {ln.get_label(): ln.get_color() for gid, ax in ps.items() for ln in data_lines(ax, "measured")}
        self.assertEqual(len(colors), 8)
        self.assertEqual(len(set(colors.values())), 8)
        # Short notes: at most one line per series, and the shared rule said once, in the figure.
        for a in artists(fig, "crossover-notes"):
            self.assertLessEqual(len(a.get_text().splitlines()), 12, a.get_text())
        self.assert_readable(fig)
        # The same figure's tp 1 column (one draw: this figure takes a minute to lay out).
        self.check_tp1_variants_are_charted_once(fig, summary)

    def check_tp1_variants_are_charted_once(self, fig, summary):
        # At tp 1 naive, paired, sp and overlap are one computation: one line per dtype, no speedup.
        ps = panels(fig)
        for pid in ("launches@tp1", "time@tp1"):
            self.assertEqual({ln.get_label() for ln in data_lines(ps[pid], "measured")}, {"naive (bf16)", "naive (fp32)"},
                             pid)
        self.assertEqual(len(data_lines(ps["bytes@tp1"], "model")), 2)  # the model's bytes, once per dtype
        self.assertNotIn("speedup:naive@tp1", ps)
        empty = [ax for ax in fig.axes if ax.get_gid() == "empty:speedup:naive@tp1"]
        self.assertEqual(len(empty), 1)
        self.assertIn("one computation", empty[0].texts[0].get_text())
        self.assertFalse([s for s in summary if s["tp"] == 1])
        title = next(ax for gid, ax in ps.items() if gid.endswith("@tp1")).get_title()
        top = [ax for ax in fig.axes if (ax.get_gid() or "").endswith("@tp1")][0].get_title()
        self.assertIn("naive, paired, sp, overlap are one computation", top.replace("\n", " "), title)

    def test_oversubscribed_cpu_ranks_state_no_crossover(self):
        # The same curves on 2 cores: 2 ranks + 2 overlap lanes (4 threads) and 8 threads at tp 4
        # outnumber the cores, so the rising sp curve is contention and no crossover is stated.
        figs, summary = self.draw_tp(cores=2)
        (_, fig), = figs
        for s in summary:
            self.assertEqual(s["measured"]["kind"], "not_resolved", s)
            self.assertEqual(s["measured"]["crossings"], [])
            want = 4 if s["tp"] == 2 else 8
            self.assertEqual((s["oversubscribed"]["threads"], s["oversubscribed"]["cores"]), (want, 2))
            self.assertIn("not resolved: ranks oversubscribe the cores", fx.describe(s["measured"]))
        self.assertFalse(artists(fig, "crossing"))
        for tp, n in ((2, 4), (4, 8)):
            top = [ax for ax in fig.axes if ax.get_gid() == f"panel:speedup:naive@tp{tp}"][0].get_title()
            self.assertIn(f"ranks oversubscribe the cores: {n} busy threads on 2 cores", top.replace("\n", " "))
        notes = " ".join(a.get_text() for a in artists(fig, "crossover-notes")).replace("\n", " ")
        self.assertIn("not resolved: ranks oversubscribe the cores", notes)
        self.assertNotIn("rises above", notes)
        self.assert_readable(fig)

    def test_report_that_says_threads_outnumber_the_cores_is_oversubscribed(self):
        # A report's preemption_unchecked ("outnumber the cores") decides where thread fields lack.
        ents = syn.curve("tp_mlp", [(1, tight(0.9)), (64, tight(1.2))], baseline="naive", variant="sp", tp=2,
                         comm="inprocess")
        for e in ents:
            e["preemption_unchecked"] = "this group's own threads (TP ranks and lanes) outnumber the cores, ..."
        ctx = dict(syn.CPU_CONTEXT, num_cpus=64, hardware_threads=64)
        path = syn.write(os.path.join(self.tmp, "said.json"), ents, ctx)
        _, summary = draw(None, self.tmp, reports=[path])
        (s,) = summary
        self.assertEqual(s["oversubscribed"]["source"], "preemption_unchecked")  # 64 cores: only its word
        self.assertEqual(s["measured"]["kind"], "not_resolved")
        # Without the marker the same curve on 64 cores crosses.
        for e in ents:
            del e["preemption_unchecked"]
        path = syn.write(os.path.join(self.tmp, "quiet.json"), ents, ctx)
        _, summary = draw(None, self.tmp, reports=[path])
        self.assertEqual(summary[0]["measured"]["kind"], "cross_up")

    def test_launch_ticks_are_integers(self):
        # Issue 23: launches 1 (fused) and 3 (split) drew ticks 1.25, 1.5, ...; a constant 5 drew 4.9, 5.1.
        for ents in (syn.curve("qkv", [(1, tight(1.2)), (16, tight(1.1))]),
                     syn.curve("tp_mlp", [(1, tight(1.0)), (16, tight(1.0))], baseline="naive", variant="sp",
                               tp=1, comm="none")):
            figs, _ = draw(ents, self.tmp)
            (_, fig), = figs
            fig.canvas.draw()
            ax = [a for gid, a in panels(fig).items() if gid.startswith("launches")][0]
            lo, hi = ax.get_ylim()
            ticks = [t for t in ax.get_yticks() if lo <= t <= hi]
            self.assertTrue(ticks)
            self.assertTrue(all(float(t).is_integer() for t in ticks), ticks)
            plt.close("all")

    def test_collective_chart_has_bus_bandwidth_and_no_empty_bytes_panel(self):
        ents = []
        for op, variant, kind in (("allreduce", "sum", "all_reduce"), ("allgather", "cols", "all_gather")):
            for tp, t in itertools.product((2, 4), (1, 64, 1024)):
                ents.append(syn.entry(op, variant, t, 1e-5 * t ** 0.3, tp=tp, comm="inprocess", time_ci=(0.95, 1.1),
                                      **{f"{kind}_busbw": 1e8 * t ** 0.5, f"{kind}_bytes": 2048.0 * t}))
        figs, summary = draw(ents, self.tmp)
        self.assertEqual(summary, [])
        self.assertEqual(len(figs), 2)
        for _, fig in figs:
            ps = panels(fig)
            self.assertEqual(set(ps), {f"{p}@tp{tp}" for p in ("time", "busbw", "launches") for tp in (2, 4)})
            self.assertEqual(len(data_lines(ps["busbw@tp2"])), 1)
            self.assertTrue(artists(fig, "interval-band"))
            self.assert_readable(fig)

    def test_two_reports_ridges_do_not_overprint(self):
        ents = syn.curve("qkv", [(t, tight(1.3 - 0.1 * i)) for i, t in enumerate((1, 16, 64, 256, 1024, 4096))])
        a = syn.write(os.path.join(self.tmp, "a.json"), ents)
        ctx = json.loads(json.dumps(syn.CPU_CONTEXT))
        ctx["ceilings"]["peak_flops_by_dtype"]["fp32"] = 6e10
        b = syn.write(os.path.join(self.tmp, "b.json"), ents, ctx)
        figs, summary = draw(None, self.tmp, "--labels=box-a,box-b", reports=[a, b])
        (_, fig), = figs
        self.assertEqual({s["report"] for s in summary}, {"box-a", "box-b"})
        ridges = [h.get_label() for h in fig.legends[0].legend_handles if h.get_label().startswith("roofline ridge")]
        self.assertEqual(len(ridges), 2, ridges)
        self.assertEqual(len({str(ln.get_linestyle()) for ln in artists(fig, "ridge")}), 2)
        self.assert_readable(fig)

    def test_layers_get_their_own_charts(self):
        ents = syn.curve("qkv", [(1, tight(1.2)), (16, tight(1.1))], layer="attention") + \
            syn.curve("qkv", [(1, tight(0.9)), (16, tight(1.0))], layer="mla")
        figs, _ = draw(ents, self.tmp)
        self.assertEqual(sorted(os.path.basename(b) for b, _ in figs),
                         ["crossover_qwen3-0.6b_qkv", "crossover_qwen3-0.6b_qkv_mla"])

    def test_labels_count_must_match(self):
        path = syn.write(os.path.join(self.tmp, "r.json"), syn.curve("qkv", [(1, 1.1)]))
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(pc.main([path, "-o", self.tmp, "--labels=a,b"]), 2)
            self.assertEqual(make_html.main([path, "-o", os.path.join(self.tmp, "i.html"), "--labels=a,b"]), 2)
        self.assertIn("--labels has 2 label(s) for 1 report(s)", err.getvalue())


class HtmlTest(unittest.TestCase):
    def test_tables_intervals_labels_and_verification(self):
        with tempfile.TemporaryDirectory() as d:
            ents = syn.curve("qkv", [(1, (0.95, 0.9, 1.0)), (16, (1.1, 1.06, 1.14))]) + \
                syn.curve("gate_up", [(1, 0.9), (16, 1.2)])
            path = syn.write(os.path.join(d, "r.json"), ents)
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(pc.main([path, "-o", d, "--labels=my-box"]), 0)
                self.assertEqual(make_html.main([path, "--charts", d, "-o", os.path.join(d, "index.html"),
                                                 "--labels=my-box"]), 0)
            with open(os.path.join(d, "index.html"), encoding="utf-8") as f:
                page = f.read()
        self.assertIn("Entries: my-box", page)
        self.assertIn("Verification: my-box", page)
        # Speedups with their intervals in the entry table; the fallback says what it is.
        self.assertIn(">1.1 [1.06, 1.14] over split<", page)
        self.assertIn("(ratio of medians) over split", page)
        # The crossover table states resolution.
        self.assertIn("rises above 1.05x between 1-16 tokens", page)
        self.assertIn("not resolved (no 95% interval at any token count", page)
        # The verification block is a table, not JSON.
        vt = re.search(r"<table class='sortable verify'>(.*?)</table>", page, re.S).group(1)
        heads = re.findall(r"<th class='s'>([^<]*)</th>", vt)
        self.assertEqual(heads[:8], ["op", "variant", "model", "tokens", "tp", "dtype", "ok", "against"])
        self.assertIn("max abs error", heads)
        self.assertIn('<td class="s err" data-v="False">no</td>', vt)
        self.assertIn('data-v="5">5<', vt)  # 3 + 2 mismatches
        self.assertNotIn('"comparisons"', page)
        self.assertNotIn('"max_abs_error"', page)
        # Context as tables: nested keys are table rows.
        self.assertIn("<th class='s'>ceilings</th><td><table class='ctx'>", page)


FIXTURE_TP = os.path.join(HERE, "..", "..", "reports", "2026-12-02-cpu-advice", "tp-1.json")


def html_page(d, path, *extra):
    with contextlib.redirect_stdout(io.StringIO()):
        assert pc.main([path, "-o", d, "--formats=svg"] + list(extra)) == 0
        assert make_html.main([path, "--charts", d, "-o", os.path.join(d, "index.html")] + list(extra)) == 0
    with open(os.path.join(d, "index.html"), encoding="utf-8") as f:
        return f.read()


def table_rows(page, cls):
    t = re.search(rf"<table class='sortable {cls}'>(.*?)</table>", page, re.S).group(1)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", t)
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", t, re.S)[1:]]
    return heads, rows


class HtmlLayoutTest(unittest.TestCase):
    def test_entry_table_puts_axes_and_first_read_figures_first_and_the_name_last(self):
        # Issue 23: a very wide name column first, then the axes again: time and speedup off-screen.
        with tempfile.TemporaryDirectory() as d:
            page = html_page(d, syn.write(os.path.join(d, "r.json"),
                                          syn.curve("qkv", [(1, (0.95, 0.9, 1.0)), (16, (1.1, 1.06, 1.14))])))
        heads, rows = table_rows(page, "entries")
        self.assertEqual(heads[:9], ["op", "variant", "tokens", "tp", "dtype", "model", "timing", "time_us",
                                     "speedup_vs_baseline"])
        self.assertEqual(heads[9], "status")
        self.assertEqual(heads[-1], "name")
        self.assertIn("1.1 [1.06, 1.14] over split", [r[8] for r in rows])

    def test_crossover_interval_column_is_filled_on_the_fixture_report(self):
        # Issue 23: "measured interval (tokens)" was empty in every row: it held only resolved
        # crossings. Now the interval, or why there is none, in every row.
        with tempfile.TemporaryDirectory() as d:
            page = html_page(d, FIXTURE_TP)
            ents = syn.curve("qkv", [(1, tight(0.9)), (16, tight(0.98)), (64, (1.06, 1.0, 1.12)), (256, tight(1.1))])
            ents += syn.curve("gate_up", [(1, (1.0, 0.9, 1.1)), (16, (1.2, 1.1, 1.3)), (64, (1.0, 0.95, 1.1))])
            ents += syn.curve("gate_up", [(1, 1.3), (16, 1.2)], dtype="bf16")
            page2 = html_page(d, syn.write(os.path.join(d, "r.json"), ents))
        heads, rows = table_rows(page, "crossovers")
        col = heads.index("measured interval (tokens)")
        self.assertEqual(len(rows), 5)
        for r in rows:
            self.assertEqual(r[col], "none: ranks oversubscribe the cores", r)
            self.assertIn("not resolved: ranks oversubscribe the cores: 4 busy threads on 2 cores",
                          r[heads.index("measured crossover")])
        heads, rows = table_rows(page2, "crossovers")
        cells = sorted(r[heads.index("measured interval (tokens)")] for r in rows)
        self.assertEqual(cells, ["none resolved: intervals straddle 1.05x at 1, 64", "none: no 95% interval",
                                 "up 16-256"])

    def test_entry_status_says_oversubscribed_on_the_fixture_report(self):
        with tempfile.TemporaryDirectory() as d:
            page = html_page(d, FIXTURE_TP)
        heads, rows = table_rows(page, "entries")
        status = {r[heads.index("status")] for r in rows}
        self.assertTrue(status and all("oversubscribed (4 threads, 2 cores)" in x for x in status), status)

    def test_context_tables_keep_words_whole(self):
        # Issue 23: the models table broke words into fragments ("hid den"): word-break:break-word
        # lets a table column shrink below its longest word.
        self.assertNotIn("word-break:break-word", make_html.CSS)
        self.assertNotIn("break-all", make_html.CSS)
        self.assertIn("overflow-wrap:break-word", make_html.CSS)
        self.assertIn("<td class='nw'>qwen3-0.6b</td>", make_html.render_value({"model": "qwen3-0.6b"}))
        # In long text a browser may break after "/" or "-": such words are kept whole.
        long = make_html.render_value({"nvtx": "domain fusebench: <fixture>, <group>/timed, "
                                               "<fixture>/graph/launch-count, <fixture>/dram"})
        self.assertIn("<span class='nw'>&lt;fixture&gt;/graph/launch-count,</span>", long)
        self.assertIn("domain fusebench:", long)
        self.assertIn(".ctx span.nw", make_html.CSS)

    def test_page_in_chromium_has_first_read_columns_on_screen_and_no_broken_word(self):
        browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
        if not browser:
            self.skipTest("no chromium on PATH")
        with tempfile.TemporaryDirectory() as d:
            ctx = json.loads(json.dumps(syn.CPU_CONTEXT))
            with open(FIXTURE_TP, encoding="utf-8") as f:
                ctx["models"] = json.load(f)["context"]["models"]  # the table that broke "hid den"
            ents = syn.curve("tp_mlp", [(1, tight(0.9)), (64, tight(1.2))], baseline="naive", variant="sp", tp=2,
                             comm="inprocess", layer="dense", weights="random")
            html_page(d, syn.write(os.path.join(d, "r.json"), ents, ctx))
            out = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                  "--window-size=1280,900", f"--user-data-dir={d}/profile", "--virtual-time-budget=5000",
                                  "--dump-dom", f"file://{d}/index.html#selftest"],
                                 capture_output=True, text=True, timeout=120).stdout
        m = re.search(r"SELFTEST [A-Z]*: [^<]*", out)
        self.assertTrue(m, out[-500:])
        self.assertIn("off screen none", m.group(0))
        self.assertIn("broken words 0", m.group(0))
        self.assertTrue(m.group(0).startswith("SELFTEST PASS"), m.group(0))


class SummaryTest(unittest.TestCase):
    def run_summary(self, entries, context=None):
        with tempfile.TemporaryDirectory() as d:
            path = syn.write(os.path.join(d, "r.json"), entries, context)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(summarize_report.main([path]), 0)
        return out.getvalue()

    def test_cpu_device_every_dtype_and_intervals(self):
        ents = []
        for dtype in ("fp32", "bf16"):
            ents += syn.curve("qkv", [(1, (0.95, 0.9, 1.0)), (16, 1.2)], dtype=dtype)
        out = self.run_summary(ents)
        self.assertIn("device: cpu: AMD EPYC", out)
        self.assertNotIn("gpu:", out)
        rows = [ln for ln in out.splitlines() if ln.startswith("qwen3-0.6b ") and " fused " in ln]
        self.assertEqual(len(rows), 4, out)  # fp32 and bf16 at both token counts
        self.assertEqual(sum(" fp32 " in r for r in rows), 2)
        self.assertTrue(any("0.950 [0.900, 1.000]" in r for r in rows), out)
        self.assertTrue(any("1.200 (ratio of medians)" in r for r in rows), out)
        self.assertIn("fused over split: not resolved", out)

    def test_entries_without_evidence_state_no_crossover(self):
        ents = syn.curve("gate_up", [(256, (1.6, 1.6, 1.6)), (4096, (0.9, 0.9, 0.9))])
        for e in ents:
            if "speedup" in e:
                e["speedup_pairs"] = 1.0
        out = self.run_summary(ents)
        self.assertIn("(not judged: n < 6)", out)
        self.assertNotIn("falls under", out)
        self.assertIn("fused over split: not resolved", out)

    def test_oversubscribed_cpu_tp_states_no_crossover_on_the_fixture_report(self):
        # Issue 23: 2 in-process ranks with overlap's lanes (4 threads) on 2 cores stated
        # "sp over naive: rises above 1.05x between 1-64 tokens".
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(summarize_report.main([FIXTURE_TP]), 0)
        out = out.getvalue()
        self.assertIn("oversubscribed (rows so marked): ranks oversubscribe the cores: 4 busy threads on 2 cores", out)
        self.assertIn("sp over naive: not resolved: ranks oversubscribe the cores", out)
        self.assertNotIn("rises above", out)
        rows = [ln for ln in out.splitlines() if ln.startswith("qwen3-0.6b ") and " tp_mlp " in ln]
        self.assertTrue(rows and all(ln.endswith("oversubscribed") for ln in rows))

    def test_tp1_variants_are_not_compared(self):
        ents = syn.curve("tp_mlp", [(1, tight(1.0)), (16, tight(1.0))], baseline="naive", variant="sp", tp=1,
                         comm="none")
        out = self.run_summary(ents)
        self.assertIn("tp_mlp tp 1: its variants are one computation", out)
        self.assertNotIn("sp over naive", out)

    def test_gpu_device_and_tp_comparisons(self):
        ctx = dict(syn.CPU_CONTEXT, backend="cuda", gpu_name="NVIDIA H200")
        ents = syn.group("tp_mlp", 64, 1e-3, {"paired": tight(1.1), "sp": tight(1.3)}, baseline="naive",
                         over={("sp", "paired"): (1.18, 1.1, 1.25)}, tp=2, comm="nccl")
        out = self.run_summary(ents, ctx)
        self.assertIn("device: NVIDIA H200", out)
        self.assertRegex(out, r"sp\s+paired .* 1\.180 \[1\.100, 1\.250\]")
        self.assertRegex(out, r"sp\s+naive .* 1\.300 \[1\.290, 1\.310\]")


if __name__ == "__main__":
    unittest.main(verbosity=2)
