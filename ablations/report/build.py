"""Write REPORT.md, REPORT.html and the plots into the output folder."""

from __future__ import annotations

from pathlib import Path

from ablations.campaign.folder import CampaignFolder
from ablations.files.names import (
    CURVES_PNG,
    EFFECTS_PNG,
    PER_CLASS_PNG,
    REPORT,
    REPORT_HTML,
    TIMELINE_PNG,
)
from ablations.report.curves import plot_curves
from ablations.report.html_page import render_html
from ablations.report.inputs import ReportInputs
from ablations.report.markdown import render_report
from ablations.report.plots import (
    plot_effects,
    plot_per_class,
    plot_timeline,
    timeline_marks,
)

REPORT_FILE = REPORT


def build_report(out_dir: Path, inputs: ReportInputs) -> str:
    """Draw the plots, write `out_dir/REPORT.md` linking those drawn and `REPORT.html` with
    them inline, and return the markdown.

    A plot with nothing to show (no effect, no predictions, no timings) is removed if an
    earlier build left one, so the folder never shows a stale picture.
    """
    out_dir = Path(out_dir)
    folder = CampaignFolder(out_dir)  # every path through the folder's guard
    drawn: list[str] = []
    for name, draw in (
        (EFFECTS_PNG, lambda p: plot_effects(inputs.effects, inputs.metric, p)),
        (CURVES_PNG, lambda p: plot_curves(out_dir, inputs.runs, inputs.metric, p)),
        (PER_CLASS_PNG, lambda p: plot_per_class(inputs.errors, p)),
        (TIMELINE_PNG, lambda p: plot_timeline(inputs.runs, p, **timeline_marks(out_dir))),
    ):
        path = folder.path(name)
        if draw(path) is not None:
            drawn.append(name)
        else:
            path.unlink(missing_ok=True)
    markdown = render_report(inputs, drawn)
    folder.write_text(REPORT_FILE, markdown)
    folder.write_text(REPORT_HTML, render_html(markdown, inputs, out_dir))
    return markdown
