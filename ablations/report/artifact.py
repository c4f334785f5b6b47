"""The report as a Prefect markdown artifact: REPORT.md made to show whole in the Prefect UI.

Measured against a real Prefect 3.9 server in headless Chromium: relative image links are
broken there (the UI has no folder to resolve them against), `data:` URIs render; tables
never wrap or scroll, so columns past the artifact pane's width (about 110 characters of
cells at a 1440 px window) are cut off. Hence: figures inline, each wide table as one
bullet per row (nothing is cut), the confusion matrices left to REPORT.html, whose path
heads the artifact.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ablations.files.names import REPORT, REPORT_HTML
from ablations.process.scratch import scratch_folder
from ablations.report.md_html import IMAGE

if TYPE_CHECKING:
    from ablations.campaign.campaign import Campaign

FIGURE_PIXELS = 1000
"""Widest figure in the artifact: the UI's pane is narrower, and its markdown renderer slows
with the size of the text (a 560 KB artifact with full-size figures did not show within 15 s
at a 1024 px window; downscaled to 64 colours the four demo figures are about 80 KB)."""
WIDEST_TABLE = 100
"""Characters of cell text (plus three per column) a table row may reach and stay a table."""


def _cells(line: str) -> list[str]:
    body = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def _width(rows: list[list[str]]) -> int:
    columns = zip(*rows, strict=False)
    return sum(max(len(c) for c in column) + 3 for column in columns)


FIRST = ("Verdict", "Status")
"""Columns said right after a list item's name: what the row concluded."""


def _as_list(header: list[str], rows: list[list[str]]) -> list[str]:
    """One bullet per row: the first cell in bold, its verdict or status, then `Header:
    value` for the rest."""
    out = []
    for row in rows:
        first, *rest = row
        named = list(zip(header[1:], rest, strict=False))
        named.sort(key=lambda hc: hc[0] not in FIRST)  # stable: the rest keep their order
        said = "; ".join(f"{h}: {c}" for h, c in named if c)
        out.append(f"- **{first.strip('*')}**: {said}" if first else f"- {said}")
    return out


def narrow_tables(markdown: str, widest: int = WIDEST_TABLE) -> str:
    """Every pipe table wider than `widest` characters rewritten as a list."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            out.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].startswith("|"):
            j += 1
        header, _, *rows = (_cells(line) for line in lines[i:j])
        if _width([header, *rows]) > widest:
            out += _as_list(header, rows)
        else:
            out += lines[i:j]
        i = j
    return "\n".join(out)


def _without_details(markdown: str, html_path: Path) -> str:
    """`<details>` blocks (the confusion matrices) replaced by a pointer to REPORT.html."""
    return re.sub(
        r"<details>.*?</details>",
        f"(Confusion matrices: in `{html_path}`.)",
        markdown,
        flags=re.DOTALL,
    )


def compact_png_uri(path: Path) -> str | None:
    """A smaller copy of a plot as a `data:` URI (at most FIGURE_PIXELS wide, 64 colours)."""
    if not path.is_file():
        return None
    from PIL import Image

    with Image.open(path) as image:
        image.thumbnail((FIGURE_PIXELS, FIGURE_PIXELS))
        small = image.convert("RGB").quantize(colors=64)
    buffer = io.BytesIO()
    small.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def report_artifact(out_dir: Path) -> str:
    """The markdown of the campaign's report artifact, from the folder's REPORT.md."""
    out_dir = Path(out_dir).resolve()
    html_path = out_dir / REPORT_HTML
    markdown = (out_dir / REPORT).read_text(encoding="utf-8")

    def inline(line: str) -> str:
        found = IMAGE.match(line)
        if found is None:
            return line
        uri = compact_png_uri(out_dir / found["src"])
        return f"![{found['alt']}]({uri})" if uri else f"({found['alt']}: not drawn)"

    markdown = "\n".join(inline(line) for line in markdown.splitlines())
    markdown = narrow_tables(_without_details(markdown, html_path))
    title, _, rest = markdown.partition("\n")
    where = (
        f"The whole report, with a run table to sort and filter, is one self-contained file: "
        f"`{html_path}` (open it in a browser; nothing else is needed)."
    )
    return f"{title}\n\n{where}\n{rest}"


def curves_so_far(campaign: Campaign, title: str) -> str | None:
    """The learning curves of the runs finished so far, as markdown with the figure inline
    (the Prefect UI after the pilot and after each look); None before any run has metrics."""
    from ablations.report.curves import plot_curves
    from ablations.report.inputs import ReportRun

    records = campaign.records()
    runs = [
        ReportRun(planned=p, record=records.get(p.run_id))
        for p in campaign.runs
        if p.run_id in records
    ]
    with scratch_folder("curves-") as scratch:
        scratch_png = scratch / "curves.png"
        drawn = plot_curves(campaign.out_dir, runs, campaign.plan.metric, scratch_png)
        uri = compact_png_uri(drawn) if drawn is not None else None
    if uri is None:
        return None
    return f"### Learning curves: {title}\n\n![learning curves so far]({uri})\n"
