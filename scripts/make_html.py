#!/usr/bin/env python3
"""Writes an offline HTML page for fusebench reports: context, crossover charts, sortable tables
of every entry (docs/charts.md). No network: the CSS and JavaScript are inline, charts are files
beside the page (relative links), so the folder can be copied or uploaded as one artifact.

  scripts/make_html.py reports/latest/report.json [more.json ...] --charts reports/latest \
      -o reports/latest/index.html
"""
from __future__ import annotations

import argparse
import html
import json
import math
import re
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusebench_advice as fa  # noqa: E402
import fusebench_crossover as fx  # noqa: E402
import fusebench_report as fr  # noqa: E402

# The entry table's columns: first the axes of a measurement (short), then what people read
# first (time, speedup with its interval, status), then the counters; the long name, which
# repeats the axes, last.
AXES = ["op", "variant", "tokens", "tp", "dtype", "model", "layer", "weights", "timing"]
FIRST_READ = ["time_us", "speedup_vs_baseline", "status"]
LEAD_COUNTERS = ["launches", "model_launches", "kernels", "dram_read_bytes", "dram_write_bytes", "model_bytes",
                 "model_flops", "model_intensity", "flops_per_second", "bytes_per_second"]
HIDDEN = {"tokens", "tp"}  # axes already

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;white-space:nowrap}
td.s,th.s{text-align:left} th{background:#f1f3f5;cursor:pointer;position:sticky;top:0;user-select:none}
th.asc::after{content:" \\25B2"} th.desc::after{content:" \\25BC"}
tr:nth-child(even) td{background:#fafafa} td.err{color:#b00}
.chart img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
.ctx td,.ctx th{text-align:left;white-space:normal;max-width:70em;vertical-align:top;
  word-break:normal;overflow-wrap:break-word;hyphens:none}
.ctx th{cursor:auto;position:static;background:#f7f7f9;white-space:nowrap} .ctx .ctx{margin:0;font-size:11px}
.ctx-wrap{overflow-x:auto} .ctx td.nw,.ctx span.nw{white-space:nowrap}
.wrap{overflow-x:auto;max-height:80vh}
.note{color:#555;font-size:.9em}
.chart-row{display:flex;gap:1em;align-items:flex-start} .chart-row .chart{flex:0 1 70%}
.advice-side{flex:1 1 30%;overflow-x:auto} table.advice td{white-space:normal;vertical-align:top}
td.adv-use{font-weight:bold} td.adv-unresolved{color:#777} td.adv-ev{font-size:11px;min-width:14em}
"""

# Sorting: click a header to sort ascending, again for descending; numbers compare as numbers,
# empty cells (counter unavailable) always sort last. A self-test (URL ending #selftest) sorts
# one column and checks order and images, for the headless-browser test.
JS = r"""
(function(){
  function key(td){var v=td.getAttribute('data-v');if(v===null||v==='')return null;
    var n=Number(v);return isNaN(n)?v.toLowerCase():n;}
  function sortTable(th){
    var table=th.closest('table'),tbody=table.tBodies[0],idx=Array.prototype.indexOf.call(th.parentNode.children,th);
    var desc=th.classList.contains('asc');
    Array.prototype.forEach.call(th.parentNode.children,function(h){h.classList.remove('asc','desc');});
    th.classList.add(desc?'desc':'asc');
    var rows=Array.prototype.slice.call(tbody.rows);
    rows.sort(function(a,b){var x=key(a.cells[idx]),y=key(b.cells[idx]);
      if(x===null&&y===null)return 0;if(x===null)return 1;if(y===null)return -1;
      if(typeof x!==typeof y){x=String(x);y=String(y);}
      var c=x<y?-1:x>y?1:0;return desc?-c:c;});
    rows.forEach(function(r){tbody.appendChild(r);});
  }
  window.fusebenchSort=sortTable;
  document.querySelectorAll('table.sortable th').forEach(function(th){
    th.addEventListener('click',function(){sortTable(th);});});
  function selftest(){
    var out=[],ok=true;
    var imgs=document.querySelectorAll('.chart img');
    var loaded=Array.prototype.filter.call(imgs,function(i){return i.complete&&i.naturalWidth>0;}).length;
    out.push('images '+loaded+'/'+imgs.length);if(imgs.length===0||loaded!==imgs.length)ok=false;
    var table=document.querySelector('table.entries');
    if(!table){ok=false;out.push('no entry table');}
    else{
      var ths=table.tHead.rows[0].cells,col=-1;
      for(var i=0;i<ths.length;i++)if(ths[i].getAttribute('data-col')==='time_us')col=i;
      sortTable(ths[col]);
      var vals=Array.prototype.map.call(table.tBodies[0].rows,function(r){return key(r.cells[col]);})
        .filter(function(v){return v!==null;});
      var asc=vals.every(function(v,i){return i===0||vals[i-1]<=v;});
      sortTable(ths[col]);
      var vals2=Array.prototype.map.call(table.tBodies[0].rows,function(r){return key(r.cells[col]);})
        .filter(function(v){return v!==null;});
      var desc=vals2.every(function(v,i){return i===0||vals2[i-1]>=v;});
      out.push('rows '+vals.length+' sorted asc '+asc+' desc '+desc);
      if(vals.length<2||!asc||!desc)ok=false;
    }
    var ctx=document.querySelectorAll('table.ctx').length;
    out.push('context tables '+ctx);if(ctx===0)ok=false;
    // What people read first is on screen before any scrolling.
    if(table){
      var off=[];
      ['time_us','speedup_vs_baseline','status'].forEach(function(c){
        var th=table.querySelector("th[data-col='"+c+"']");
        if(!th||th.getBoundingClientRect().right>window.innerWidth)off.push(c);});
      out.push('off screen '+(off.length?off.join(','):'none')+' at width '+window.innerWidth);
      if(off.length)ok=false;
    }
    // No word of a context table broken over two lines ("hid den").
    var broken=[];
    document.querySelectorAll('table.ctx th, table.ctx td').forEach(function(c){
      Array.prototype.forEach.call(c.childNodes,function(n){
        if(n.nodeType!==3)return;var re=/\S+/g,m;
        while((m=re.exec(n.nodeValue))!==null){if(m[0].length>40)continue;  // longer than a line: may break
          var r=document.createRange();
          r.setStart(n,m.index);r.setEnd(n,m.index+m[0].length);
          var tops={};Array.prototype.forEach.call(r.getClientRects(),function(q){if(q.width>0)tops[Math.round(q.top)]=1;});
          if(Object.keys(tops).length>1)broken.push(m[0]);}
      });});
    out.push('broken words '+broken.length+(broken.length?': '+broken.slice(0,5).join(' '):''));
    if(broken.length)ok=false;
    out.push('errors '+window.__fbErrors.length+(window.__fbErrors.length?': '+window.__fbErrors.join(' | '):''));
    if(window.__fbErrors.length)ok=false;
    var pre=document.createElement('pre');pre.id='selftest';
    pre.textContent='SELFTEST '+(ok?'PASS':'FAIL')+': '+out.join('; ');
    document.body.insertBefore(pre,document.body.firstChild);
  }
  if(location.hash==='#selftest'){
    if(document.readyState==='complete')selftest();else window.addEventListener('load',selftest);
  }
})();
"""

ERROR_HOOK = """window.__fbErrors=[];
window.addEventListener('error',function(e){window.__fbErrors.push(String(e.message||e.target&&e.target.src));},true);
(function(){var ce=console.error;console.error=function(){window.__fbErrors.push(Array.prototype.join.call(arguments,' '));ce.apply(console,arguments);};})();"""


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return ""
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def cell(v, cls="", shown=None):
    """A table cell: `v` sorts (data-v), `shown` (default: v formatted) is displayed."""
    text = html.escape(fmt(v) if shown is None else shown)
    data = "" if v is None else html.escape(repr(v) if isinstance(v, float) else str(v), quote=True)
    c = f' class="{cls}"' if cls else ""
    return f'<td{c} data-v="{data}">{text}</td>'


def interval_text(value, lo, hi):
    return f"{fmt(value)} [{fmt(lo)}, {fmt(hi)}]"


def ratio_text(r):
    if r is None:
        return ""
    if r.not_judged:
        return f"{fmt(r.value)} (not judged: {r.not_judged})"
    if r.has_interval:
        return interval_text(r.value, r.ci_low, r.ci_high)
    return f"{fmt(r.value)} (ratio of medians)"


# ---- context as tables ----------------------------------------------------------------------

def _scalar(v):
    return v is None or isinstance(v, (str, int, float, bool))


def _inline(v):
    """A short one-line rendering for a value nested too deep for its own table."""
    if _scalar(v):
        return fmt(v)
    if isinstance(v, list) and all(_scalar(x) for x in v):
        return ", ".join(fmt(x) for x in v)
    if isinstance(v, dict) and all(_scalar(x) for x in v.values()):
        return "; ".join(f"{k}: {fmt(x)}" for k, x in v.items())
    return json.dumps(v, sort_keys=True)


def _nowrap(v):
    """A short scalar stays on one line (a hyphen is no place to break "qwen3-0.6b")."""
    return " class='nw'" if _scalar(v) and len(fmt(v)) <= 40 else ""


_BREAKABLE = re.compile(r"[/-]")


def _keep_words(text):
    """Escaped text whose words stay whole: a browser may break a word after "/" or "-"
    ("<fixture>/graph/launch-count"), so a word of up to 40 characters holding one is kept on
    one line; longer ones may still wrap."""
    if len(text) <= 40:
        return html.escape(text)  # its cell keeps it on one line (_nowrap)
    out = []
    for part in re.split(r"(\s+)", text):
        esc = html.escape(part)
        out.append(f"<span class='nw'>{esc}</span>"
                   if part and not part.isspace() and len(part) <= 40 and _BREAKABLE.search(part)
                   else esc)
    return "".join(out)


def render_value(v, depth=0):
    """Dicts become key/value tables, lists of dicts tables with one row each, lists of scalars
    comma-separated text; deeper than three levels, one line of text."""
    if _scalar(v):
        return _keep_words(fmt(v))
    if isinstance(v, list) and all(_scalar(x) for x in v):
        return _keep_words(", ".join(fmt(x) for x in v))
    if depth >= 3:
        return _keep_words(_inline(v))
    if isinstance(v, dict):
        rows = "".join(f"<tr><th class='s'>{html.escape(str(k))}</th><td{_nowrap(x)}>{render_value(x, depth + 1)}"
                       f"</td></tr>" for k, x in sorted(v.items()))
        return f"<table class='ctx'>{rows}</table>"
    if all(isinstance(x, dict) for x in v):
        cols = []
        for x in v:
            cols += [k for k in x if k not in cols]
        head = "".join(f"<th class='s'>{html.escape(str(c))}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td{_nowrap(x.get(c))}>{render_value(x.get(c), depth + 1)}</td>"
                                        for c in cols) + "</tr>" for x in v)
        return f"<table class='ctx list'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return "<ul>" + "".join(f"<li>{render_value(x, depth + 1)}</li>" for x in v) + "</ul>"


def context_table(ctx):
    rest = {k: v for k, v in ctx.items() if k != "verification"}
    return render_value(rest)


VERIFY_LEAD = ["op", "variant", "model", "layer", "tokens", "tp", "dtype", "weights", "ok"]


def verification_table(results):
    """One row per verified (op, variant, model, tokens, tp, dtype): pass/fail, what it was compared
    against, the comparisons' count, worst errors and mismatches; any other field follows."""
    if not isinstance(results, list) or not results:
        return ""
    others = []
    for r in results:
        if isinstance(r, dict):
            others += [k for k, v in r.items() if k not in VERIFY_LEAD + ["comparisons"] and _scalar(v)
                       and k not in others]
    lead = [c for c in VERIFY_LEAD if any(isinstance(r, dict) and c in r for r in results)]
    head = lead + ["against", "comparisons", "mismatches", "max abs error", "max rel error"] + others
    out = ["<table class='sortable verify'><thead><tr>" +
           "".join(f"<th class='s'>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for r in results:
        if not isinstance(r, dict):
            continue
        comps = [c for c in r.get("comparisons") or [] if isinstance(c, dict)]
        nums = lambda key: [c[key] for c in comps if isinstance(c.get(key), (int, float))]  # noqa: E731
        against = ", ".join(sorted({str(c.get("against")) for c in comps if c.get("against") is not None}))
        cells = []
        for c in lead:
            v = r.get(c)
            cls = "s" + (" err" if c == "ok" and v is False else "")
            cells.append(cell(v, cls))
        cells += [cell(against or None, "s"), cell(len(comps)),
                  cell(sum(nums("mismatches")) if nums("mismatches") else None),
                  cell(max(nums("max_abs_error")) if nums("max_abs_error") else None),
                  cell(max(nums("max_rel_error")) if nums("max_rel_error") else None)]
        cells += [cell(r.get(k), "s") for k in others]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


# ---- entries ----------------------------------------------------------------------------------

SPEEDUP_KEYS = {"speedup", "speedup_ci_low", "speedup_ci_high", "speedup_pairs", "time_median_ci_low",
                "time_median_ci_high"}


def group_oversubscription(report):
    """{(op, config, tokens): fusebench_report.Oversubscription} of every oversubscribed group."""
    groups = {}
    for e in report.entries:
        groups.setdefault((e.op, e.config(), e.tokens), []).append(e)
    out = {}
    for k, es in groups.items():
        o = fr.oversubscription(es, report.context)
        if o is not None:
            out[k] = o
    return out


def status_text(e, oversub):
    """How the entry's timing ended (timing_stop), and whether its ranks oversubscribed the cores."""
    stop = e.fields.get("timing_stop") if isinstance(e.fields.get("timing_stop"), str) else None
    over = None
    if oversub:
        over = "oversubscribed" + (f" ({oversub.threads} threads, {oversub.cores} cores)" if oversub.threads else "")
    return "; ".join(p for p in (stop, over) if p) or None


def entry_table(report):
    groups = {}
    by_op = {}
    for e in report.entries:
        groups.setdefault((e.op, e.config(), e.tokens), {})[e.variant] = e
        by_op.setdefault(e.op, []).append(e)
    oversub = group_oversubscription(report)
    baselines = {op: fr.baseline_variant(op, es) for op, es in by_op.items()}
    extra_cols = sorted({k for e in report.entries for k in e.counters}
                        - set(LEAD_COUNTERS) - HIDDEN - SPEEDUP_KEYS)
    axes = [c for c in AXES if c in ("op", "variant", "tokens", "tp", "dtype", "model") or
            any(getattr(e, c) for e in report.entries)]
    quantized = any(fr.quant_errors(e) for e in report.entries)
    acc_cols = ["accuracy"] if quantized else []
    head = (axes + FIRST_READ + acc_cols + LEAD_COUNTERS + ["speedup_pairs", "other speedups"] + extra_cols
            + ["error", "name"])
    text_heads = {"name", "error", "status", "other speedups", "accuracy"} | (set(axes) - {"tokens", "tp"})
    titles = {"speedup_vs_baseline": "baseline time / this time, median of paired ratios [95% interval]; "
                                     "or the ratio of medians where the report has no interval",
              "time_us": "median time per run [95% interval of the median]",
              "status": "timing_stop (how the measurement ended), and whether the group's ranks' threads "
                        "outnumbered the cores (then its times show contention, docs/tp.md)",
              "name": "the entry's Google Benchmark name (the axes on the left, in one string)",
              "accuracy": "quantized entries: the worst shard's quant_error (rms error relative to the float64 "
                          "reference), and whether it grew over the baseline variant's (less accurate)"}
    out = ["<div class='wrap'><table class='sortable entries'><thead><tr>"]
    for h in head:
        cls = "s" if h in text_heads else ""
        out.append(f"<th class='{cls}' data-col='{html.escape(h)}' title='{html.escape(titles.get(h, ''))}'>"
                   f"{html.escape(h)}</th>")
    out.append("</tr></thead><tbody>")
    for e in report.entries:
        vm = groups.get((e.op, e.config(), e.tokens), {})
        baseline = baselines.get(e.op)
        r = fr.speedup_between(e, vm.get(baseline), baseline) if baseline and e.variant != baseline else None
        others = []
        for v, over in fr.comparisons(e.op, list(vm), baseline):
            if v == e.variant and over != baseline:
                o = fr.speedup_between(e, vm.get(over), over)
                if o:
                    others.append(f"over {over}: {ratio_text(o)}")
        iv = e.time_interval_ns()
        time_us = e.time_ns / 1e3 if e.time_ns else None
        cells = []
        for c in axes:
            cells.append(cell(getattr(e, c) if c in ("tokens", "tp") else (getattr(e, c) or None),
                              "" if c in ("tokens", "tp") else "s"))
        cells.append(cell(time_us, shown=interval_text(time_us, iv[0] / 1e3, iv[1] / 1e3)
                          if iv and time_us else None))
        shown = ratio_text(r) + (f" over {baseline}" if r else "")
        cells.append(cell(r.value if r else None, shown=shown if r else None))
        cells.append(cell(status_text(e, oversub.get((e.op, e.config(), e.tokens))), "s"))
        if quantized:
            acc = fr.accuracy({e.tokens: e}, {e.tokens: vm[baseline]} if baseline in vm else None)
            cells.append(cell(acc.text(baseline) if acc else None, "s"))
        for c in LEAD_COUNTERS:
            cells.append(cell(e.counter(c)))
        cells.append(cell(e.counter("speedup_pairs")))
        cells.append(cell("; ".join(others) or None, "s"))
        for c in extra_cols:
            cells.append(cell(e.counter(c)))
        cells.append(cell(e.error, "s err"))
        cells.append(cell(e.name, "s name"))
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def crossover_table(summary):
    if not summary or not summary.get("crossovers"):
        return ""
    thr = summary.get("threshold", 1.05)
    heads = ["report", "model", "op", "layer", "variant", "over", "dtype", "tp", "timing",
             "measured crossover", "measured interval (tokens)", "model crossover", "speedups [95% interval]",
             "ceilings"]
    rows = ["<table class='sortable crossovers'><thead><tr>" +
            "".join(f"<th class='s'>{h}</th>" for h in heads) + "</tr></thead><tbody>"]
    for c in summary["crossovers"]:
        m = c.get("measured") or {}
        ceil = c.get("ceilings")
        cs = (f"{ceil['peak_flops'] / 1e12:.3g} TFLOP/s, {ceil['bandwidth'] / 1e9:.4g} GB/s ({ceil['source']}), "
              f"{c['launch_overhead_us']:g} us/launch") if ceil else "none: no model prediction"
        spans = fx.crossing_interval(m, thr) if m else None
        pts = []
        for p in c.get("speedup_measured", []):
            t, v, lo, hi = p[0], p[1], p[2], p[3]
            pts.append(f"{t}: " + (interval_text(v, lo, hi) if lo is not None and hi is not None else f"{fmt(v)} (medians)"))
        model = fx.describe(c["model_prediction"], thr) if c.get("model_prediction") else (c.get("model_note") or "")
        rows.append("<tr>" + "".join(cell(v, "s") for v in [
            c["report"], c["model"], c["op"], c.get("layer") or None, c["variant"], c.get("over"), c["dtype"],
            c["tp"], c["timing"] or None, fx.describe(m, thr) if m else None, spans or None, model or None,
            ", ".join(pts) or None, cs]) + "</tr>")
    rows.append("</tbody></table>")
    return (f"<p class='note'>Crossover of {thr:g}x: each token count is above (95% interval wholly above "
            f"{thr:g}), below (wholly below) or unresolved (the interval straddles it, or the report has no "
            f"interval). A crossover is placed only between two resolved token counts on opposite sides; "
            f"its interval is the token range between them. Model: max(FLOPs/peak, bytes/bandwidth) + "
            f"launches x overhead on each entry's cost-model totals (exact, so its crossover is interpolated "
            f"between the token counts around it). Measured interval: the token range a resolved crossover "
            f"lies in, or why none is resolved. A row whose ranks' threads outnumbered the cores (in-process "
            f"TP ranks on a small machine) states no crossover: its times show the ranks' contention, not "
            f"the computation (docs/tp.md). TP ops at tp 1 have no rows: their variants are one computation "
            f"there.</p>" + "".join(rows))


def advice_beside(chart_html, doc, chart_file):
    """The chart with the advice of its comparisons beside it (fusebench-advise's advice.json)."""
    rows = [c for c in (doc or {}).get("comparisons", []) if fa.chart_name(c) + ".svg" == chart_file]
    if not rows:
        return chart_html
    return (f"<div class='chart-row'>{chart_html}<div class='advice-side'><p class='note'>When to fuse "
            f"(fusebench-advise, margin {doc.get('margin', 0):g}: decided only where the 95% intervals say so; "
            f"the chart's strips show the same ranges)</p>{fa.html_table(rows)}</div></div>")


def advice_section(doc, charts):
    """The advice of comparisons that have no chart on the page."""
    rest = [c for c in (doc or {}).get("comparisons", []) if fa.chart_name(c) + ".svg" not in charts]
    if not rest:
        return ""
    return "<h2>When to fuse (fusebench-advise)</h2>" + fa.html_table(rest)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+")
    p.add_argument("--charts", help="folder with crossover_*.png/svg and crossover.json (default: beside -o)")
    p.add_argument("-o", "--output", default="reports/latest/index.html")
    p.add_argument("--title", default="fusebench report")
    p.add_argument("--advice", help="fusebench-advise's JSON (default: advice.json beside the charts, when present)")
    p.add_argument("--labels", help="comma-separated labels, one per report (default: device name), "
                                    "as for scripts/plot_crossover.py")
    args = p.parse_args(argv)
    labels = args.labels.split(",") if args.labels else None
    if labels and len(labels) != len(args.reports):
        print(f"make_html: --labels has {len(labels)} label(s) for {len(args.reports)} report(s): "
              f"give one per report", file=sys.stderr)
        return 2
    try:
        reports = fr.load_all(args.reports, labels)
    except (OSError, ValueError) as exc:
        print(f"make_html: {exc}", file=sys.stderr)
        return 2
    out_dir = os.path.dirname(os.path.abspath(args.output))
    charts_dir = os.path.abspath(args.charts) if args.charts else out_dir
    summary = None
    try:
        with open(os.path.join(charts_dir, "crossover.json"), encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError):
        pass
    advice_path = args.advice or os.path.join(charts_dir, "advice.json")
    advice = None
    if args.advice or os.path.exists(advice_path):
        try:
            advice = fa.load(advice_path)
        except (OSError, ValueError) as exc:
            print(f"make_html: --advice: {exc}", file=sys.stderr)
            return 2
    # The crossover charts, then tp_moe's TP-or-EP charts (plot_tp_moe.py).
    charts = sorted((not n.startswith("crossover_"), n) for n in os.listdir(charts_dir)
                    if n.startswith(("crossover_", "tp_moe_")) and n.endswith(".svg")) \
        if os.path.isdir(charts_dir) else []
    charts = [n for _, n in charts]

    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(args.title)}</title>",
             f"<style>{CSS}</style><script>{ERROR_HOOK}</script></head><body>",
             f"<h1>{html.escape(args.title)}</h1>",
             "<p class='note'>" + ", ".join(html.escape(f"{r.label}: {r.path}") for r in reports) +
             ". Click a column header to sort; empty cells are counters the run could not measure.</p>"]
    parts.append("<h2>Crossover charts</h2>")
    if not charts:
        parts.append("<p>No charts (scripts/plot_crossover.py was not run or failed).</p>")
    for name in charts:
        rel = os.path.relpath(os.path.join(charts_dir, name), out_dir)
        png = rel[:-4] + ".png"
        parts.append(advice_beside(f"<div class='chart'><a href='{html.escape(png)}'><img src='{html.escape(rel)}' "
                                   f"alt='{html.escape(name)}'></a></div>", advice, name))
    parts.append(advice_section(advice, charts))
    parts.append(crossover_table(summary))
    for r in reports:
        parts.append(f"<h2>Entries: {html.escape(r.label)}</h2>")
        parts.append(entry_table(r))
        verify = verification_table(r.context.get("verification"))
        if verify:
            parts.append(f"<h2>Verification: {html.escape(r.label)}</h2>")
            parts.append("<p class='note'>Per verified variant: ok, what it was compared against (float64 "
                         "reference, the baseline variant), the number of comparisons (one per output and "
                         "reference), mismatches beyond tolerance and the worst errors.</p>")
            parts.append(verify)
        parts.append(f"<h2>Context: {html.escape(r.label)}</h2>")
        parts.append(f"<div class='ctx-wrap'>{context_table(r.context)}</div>")
    parts.append(f"<script>{JS}</script></body></html>")
    tmp = args.output + ".tmp"
    os.makedirs(out_dir, exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    os.replace(tmp, args.output)
    print(f"make_html: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
