"""REPORT.html: REPORT.md as one self-contained page, plus a run table to sort and filter.

Everything is inside the file: figures as base64 PNG `data:` URIs, the CSS, and a small script
that adds sorting and filters to the run table. Without the script the page says the same:
the run table is grouped by variant (one `<tbody>` each, headed by its counts). Wide tables
scroll sideways in their own box instead of being clipped.
"""

from __future__ import annotations

import base64
import html
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ablations.analysis.paired import run_reason
from ablations.report.inputs import ReportInputs, ReportRun
from ablations.report.md_html import markdown_to_html
from ablations.text.units import metric as metric_text

RUNS_BEFORE = "## Stopped, failed, rejected and trimmed runs"
"""The run table goes right before this section (after the findings), or at the end."""

STYLE = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;
max-width:1400px;padding:1rem 1.5rem;color:#1b1b1b}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
.wide{overflow-x:auto;max-width:100%;margin:.5rem 0}
table{border-collapse:collapse;font-size:.88rem}
th,td{border:1px solid #d5d5d5;padding:.25rem .5rem;text-align:left;vertical-align:top}
thead th{background:#f3f3f3;position:sticky;top:0}
tbody.group th{background:#eef3fa;font-weight:600}
figure{margin:.5rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85rem;color:#555}
code{background:#f4f4f4;padding:0 .2rem;border-radius:3px;font-size:.85em}
#runs code{white-space:nowrap}
.status-accepted{color:#1a7f37}.status-stopped,.status-failed{color:#b42318}
.status-rejected{color:#b54708}.status-trimmed,.status-unneeded,.status-pending{color:#667085}
#run-filters{display:flex;gap:1rem;flex-wrap:wrap;margin:.5rem 0}
th.sortable{cursor:pointer}th.sortable:after{content:" \\2195";color:#999}
"""

SCRIPT = """
(function(){
var t=document.getElementById('runs');if(!t)return;
var rows=Array.prototype.slice.call(t.querySelectorAll('tbody tr.run'));
var body=document.createElement('tbody');rows.forEach(function(r){body.appendChild(r)});
Array.prototype.slice.call(t.tBodies).forEach(function(b){b.remove()});t.appendChild(body);
function pick(name,key){var s=document.createElement('select');s.dataset.key=key;
 var vals=[];rows.forEach(function(r){var v=r.dataset[key];if(vals.indexOf(v)<0)vals.push(v)});
 s.innerHTML='<option value="">all</option>'+vals.map(function(v){
  return '<option>'+v.replace(/&/g,'&amp;').replace(/</g,'&lt;')+'</option>'}).join('');
 var l=document.createElement('label');l.textContent=name+' ';l.appendChild(s);return l}
var f=document.getElementById('run-filters');
[['Variant','variant'],['Status','status'],['Seed','seed']].forEach(function(p){
 f.appendChild(pick(p[0],p[1]))});
function apply(){var sel=f.querySelectorAll('select');rows.forEach(function(r){var ok=true;
 sel.forEach(function(s){if(s.value&&r.dataset[s.dataset.key]!==s.value)ok=false});
 r.hidden=!ok})}
f.addEventListener('change',apply);
Array.prototype.slice.call(t.tHead.rows[0].cells).forEach(function(th,i){
 th.className='sortable';var dir=1;th.addEventListener('click',function(){
  rows.sort(function(a,b){var x=a.cells[i].dataset.sort||a.cells[i].textContent,
   y=b.cells[i].dataset.sort||b.cells[i].textContent,nx=parseFloat(x),ny=parseFloat(y);
   var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return c*dir});
  dir=-dir;rows.forEach(function(r){body.appendChild(r)})})});
})();
"""


def png_data_uri(path: Path) -> str | None:
    """`data:image/png;base64,...` of a PNG beside the report, or None when it is missing."""
    if not path.is_file():
        return None
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _row(run: ReportRun, metric_name: str) -> str:
    p, record = run.planned, run.record
    value = record.metrics.get(metric_name) if record else None
    cells = [
        (f"<code>{html.escape(p.run_id)}</code>", p.run_id),
        (html.escape(p.variant), p.variant),
        (str(p.seed), str(p.seed)),
        (p.phase, p.phase),
        (f'<span class="status-{run.status}">{run.status}</span>', run.status),
        ("-" if value is None else metric_text(value), "" if value is None else repr(value)),
        (str(record.steps_done) if record else "-", str(record.steps_done) if record else ""),
        (html.escape(run_reason(record)) if record else "", ""),
    ]
    tds = "".join(
        f'<td data-sort="{html.escape(key, quote=True)}">{shown}</td>' for shown, key in cells
    )
    data = (
        f'data-variant="{html.escape(p.variant, quote=True)}" data-status="{run.status}" '
        f'data-seed="{p.seed}"'
    )
    return f'<tr class="run" {data}>{tds}</tr>'


def runs_table(runs: Sequence[ReportRun], metric_name: str) -> str:
    """Every registered run, grouped by variant (a `<tbody>` each, headed by its counts)."""
    header = ["Run", "Variant", "Seed", "Phase", "Status", metric_name, "Steps done", "Reason"]
    groups: dict[str, list[ReportRun]] = {}
    for run in runs:
        groups.setdefault(run.planned.variant, []).append(run)
    bodies = []
    for variant, members in groups.items():
        counts = Counter(r.status for r in members)
        said = ", ".join(f"{n} {status}" for status, n in counts.most_common())
        members = sorted(members, key=lambda r: (r.planned.phase != "pilot", r.planned.seed))
        rows = "".join(_row(r, metric_name) for r in members)
        head = f'<tr><th colspan="{len(header)}">{html.escape(variant)}: {said}</th></tr>'
        bodies.append(f'<tbody class="group">{head}</tbody><tbody>{rows}</tbody>')
    heads = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    return (
        '<h2 id="runs-table">Runs</h2>\n<p>Every registered run, grouped by variant. With '
        "scripts on, click a column to sort and choose a variant, status or seed to filter."
        '</p><div id="run-filters"></div>'
        f'<div class="wide"><table id="runs"><thead><tr>{heads}</tr></thead>'
        + "".join(bodies)
        + "</table></div>"
    )


def render_html(markdown: str, inputs: ReportInputs, out_dir: Path) -> str:
    """The page: REPORT.md's sections in its order, the run table after the findings."""
    before, marker, after = markdown.partition(RUNS_BEFORE)
    cut = (before, marker + after) if marker else (markdown, "")

    def image(src: str) -> str | None:
        return png_data_uri(Path(out_dir) / src)

    body = "\n".join(
        [
            markdown_to_html(cut[0], image),
            runs_table(inputs.runs, inputs.metric.name),
            markdown_to_html(cut[1], image),
        ]
    )
    title = html.escape(f"Campaign {inputs.campaign_id}")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{STYLE}</style></head>\n<body>\n{body}\n"
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )
