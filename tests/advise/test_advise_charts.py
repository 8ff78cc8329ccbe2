#!/usr/bin/env python3
"""The advice in the charts and on the page (docs/advise.md): on the issue's synthetic report,
scripts/plot_crossover.py --advice shades each token range by its decision (strips at the bottom
of the speedup panel, in the variant's colour, grey for either, hatched for unresolved) and
scripts/make_html.py shows the table beside the chart; a file that is not advice is refused.

  test_advise_charts.py ADVISE_BINARY WORK_DIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, HERE)
import test_advise_formats as taf  # noqa: E402
import fusebench_report as fr  # noqa: E402
import plot_crossover as pc  # noqa: E402
import make_html  # noqa: E402


def main():
    advise, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    report = os.path.join(work, "synthetic.json")
    with open(report, "w", encoding="utf-8") as f:
        json.dump(taf.synthetic(), f)
    advice = os.path.join(work, "advice.json")
    subprocess.run([advise, report, "-o", advice], check=True)

    args = pc.parse_args([report, "-o", work, "--advice", advice])
    args.advice_doc = pc.fa.load(advice)
    figs, _ = pc.plot_all(fr.load_all([report]), args)
    assert len(figs) == 1, figs
    fig = figs[0][1]
    ax = next(a for a in fig.axes if a.get_gid() == "panel:speedup:split")
    spans = {}
    for p in ax.patches:
        if (p.get_gid() or "").startswith("advice-"):
            # axvspan gives a Rectangle (matplotlib >= 3.9) or a Polygon (older).
            xs = [p.get_x(), p.get_x() + p.get_width()] if hasattr(p, "get_width") else [v[0] for v in p.get_xy()]
            spans.setdefault(p.get_gid(), []).append((min(xs), max(xs), tuple(p.get_facecolor())))
    # One strip per range: fused 1-64 and split 1024-16384 in their colours, either 256, two gaps.
    use = sorted(spans.get("advice-use", []))
    assert len(use) == 2, spans
    assert use[0][0] <= 1 and 64 <= use[0][1] < 65 * 1.1, use
    assert 1024 * 0.9 < use[1][0] <= 1024 and use[1][1] >= 16384, use
    assert use[0][2] != use[1][2], "fused and split strips share a colour"
    either = spans.get("advice-either", [])
    assert len(either) == 1 and either[0][0] < 256 < either[0][1] < 300, either
    gaps = sorted(spans.get("advice-unresolved", []))
    assert len(gaps) == 2 and gaps[0][0] < 70 and gaps[1][1] > 1000, gaps
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    for want in ("advice strip: use fused", "advice strip: use split", "advice strip: either",
                 "advice strip: unresolved"):
        assert want in labels, labels
    assert any(t.startswith("advice strips (fusebench-advise), bottom up:") for t in labels), labels
    # Without --advice nothing is shaded.
    args2 = pc.parse_args([report, "-o", work])
    figs2, _ = pc.plot_all(fr.load_all([report]), args2)
    assert not [p for a in figs2[0][1].axes for p in a.patches if (p.get_gid() or "").startswith("advice-")]

    # The page: the advice table beside the chart.
    figs[0][1].savefig(os.path.join(work, "crossover_qwen3-0.6b_qkv.svg"))
    page = os.path.join(work, "index.html")
    assert make_html.main([report, "--charts", work, "-o", page]) == 0
    text = open(page, encoding="utf-8").read()
    assert "<div class='chart-row'><div class='chart'>" in text, "no advice beside the chart"
    assert "<table class='advice'>" in text
    for cell in ("<td>1-64</td><td class='s adv-use'>use: fused</td>", "<td>256</td><td class='s adv-either'>either</td>",
                 "<td>1024-16384</td><td class='s adv-use'>use: split</td>"):
        assert cell in text, cell
    # Not advice: refused by both scripts.
    bogus = os.path.join(work, "bogus.json")
    with open(bogus, "w", encoding="utf-8") as f:
        json.dump({"schema": "other"}, f)
    assert pc.main([report, "-o", work, "--advice", bogus]) == 2
    assert make_html.main([report, "--charts", work, "-o", page, "--advice", bogus]) == 2
    print("advise charts: strips for every range, legend, the page's table beside the chart")


if __name__ == "__main__":
    main()
