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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fusebench_report as fr  # noqa: E402

# First columns of the entry table, in this order; every other numeric counter follows.
LEAD_NUMERIC = ["tokens", "tp", "time_us", "speedup_vs_split", "launches", "model_launches", "kernels",
                "dram_read_bytes", "dram_write_bytes", "model_bytes", "model_flops", "model_intensity",
                "flops_per_second", "bytes_per_second"]
HIDDEN = {"tokens", "tp"}  # shown in LEAD_NUMERIC already

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:2px 6px;text-align:right;white-space:nowrap}
td.s,th.s{text-align:left} th{background:#f1f3f5;cursor:pointer;position:sticky;top:0;user-select:none}
th.asc::after{content:" \\25B2"} th.desc::after{content:" \\25BC"}
tr:nth-child(even) td{background:#fafafa} td.err{color:#b00}
.chart img{max-width:100%;border:1px solid #ddd;margin:.5em 0}
.ctx td{text-align:left;white-space:normal;max-width:70em;word-break:break-word}
.wrap{overflow-x:auto;max-height:80vh}
.note{color:#555;font-size:.9em}
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
    if isinstance(v, float):
        if not math.isfinite(v):
            return ""
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


def cell(v, cls=""):
    shown = html.escape(fmt(v))
    data = "" if v is None else html.escape(repr(v) if isinstance(v, float) else str(v), quote=True)
    c = f' class="{cls}"' if cls else ""
    return f'<td{c} data-v="{data}">{shown}</td>'


def context_table(ctx):
    rows = []
    for k in sorted(ctx):
        v = ctx[k]
        text = v if isinstance(v, str) else json.dumps(v, indent=None, sort_keys=True)
        rows.append(f"<tr><th class='s'>{html.escape(k)}</th><td>{html.escape(str(text))}</td></tr>")
    return "<table class='ctx'>" + "".join(rows) + "</table>"


def entry_table(report):
    split_time = {}
    for e in report.entries:
        if e.variant == "split" and e.time_ns:
            split_time[(e.op, e.model, e.tokens, e.tp, e.dtype, e.timing, e.extra)] = e.time_ns
    extra_cols = sorted({k for e in report.entries for k in e.counters} - set(LEAD_NUMERIC) - HIDDEN)
    text_cols = ["op", "variant", "model", "dtype", "timing"]
    head = ["name"] + text_cols + LEAD_NUMERIC + extra_cols + ["error"]
    out = ["<div class='wrap'><table class='sortable entries'><thead><tr>"]
    for h in head:
        cls = "s" if h in ["name", "error"] + text_cols else ""
        out.append(f"<th class='{cls}' data-col='{html.escape(h)}'>{html.escape(h)}</th>")
    out.append("</tr></thead><tbody>")
    for e in report.entries:
        base = split_time.get((e.op, e.model, e.tokens, e.tp, e.dtype, e.timing, e.extra))
        row = {
            "tokens": e.tokens, "tp": e.tp,
            "time_us": e.time_ns / 1e3 if e.time_ns else None,
            "speedup_vs_split": base / e.time_ns if base and e.time_ns else None,
        }
        cells = [cell(e.name, "s")] + [cell(getattr(e, c) or None, "s") for c in text_cols]
        for c in LEAD_NUMERIC + extra_cols:
            cells.append(cell(row[c] if c in row else e.counter(c)))
        cells.append(cell(e.error, "s err"))
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def crossover_table(summary):
    if not summary or not summary.get("crossovers"):
        return ""
    rows = ["<table class='sortable'><thead><tr>" + "".join(
        f"<th class='s'>{h}</th>" for h in ["report", "model", "op", "variant", "dtype", "tp", "timing",
                                              "measured crossover (tokens)", "model crossover (tokens)",
                                              "ceilings"]) + "</tr></thead><tbody>"]
    for c in summary["crossovers"]:
        def show(x):
            if not x:
                return None
            return round(x["tokens"]) if x["kind"] == "cross" else x["kind"].replace("_", " ")
        ceil = c.get("ceilings")
        cs = (f"{ceil['peak_flops'] / 1e12:.3g} TFLOP/s, {ceil['bandwidth'] / 1e9:.4g} GB/s ({ceil['source']}), "
              f"{c['launch_overhead_us']:g} us/launch") if ceil else "none: no model prediction"
        rows.append("<tr>" + "".join(cell(v, "s") for v in [
            c["report"], c["model"], c["op"], c["variant"], c["dtype"], c["tp"], c["timing"] or None,
            show(c["measured"]), show(c["model_prediction"]), cs]) + "</tr>")
    rows.append("</tbody></table>")
    return (f"<p class='note'>Crossover: the first token count at which the speedup over split falls under "
            f"{summary['threshold']:g}x (interpolated on the log2 axis). Model: max(FLOPs/peak, bytes/bandwidth)"
            f" + launches x overhead, on each entry's cost-model totals.</p>" + "".join(rows))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+")
    p.add_argument("--charts", help="folder with crossover_*.png/svg and crossover.json (default: beside -o)")
    p.add_argument("-o", "--output", default="reports/latest/index.html")
    p.add_argument("--title", default="fusebench report")
    args = p.parse_args(argv)
    try:
        reports = fr.load_all(args.reports)
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
    charts = sorted(n for n in os.listdir(charts_dir) if n.startswith("crossover_") and n.endswith(".svg")) \
        if os.path.isdir(charts_dir) else []

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
        parts.append(f"<div class='chart'><a href='{html.escape(png)}'><img src='{html.escape(rel)}' "
                     f"alt='{html.escape(name)}'></a></div>")
    parts.append(crossover_table(summary))
    for r in reports:
        parts.append(f"<h2>Entries: {html.escape(r.label)}</h2>")
        parts.append(entry_table(r))
        parts.append(f"<h2>Context: {html.escape(r.label)}</h2>")
        parts.append(context_table(r.context))
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
