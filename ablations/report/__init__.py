"""The campaign report: REPORT.md with effects, errors, budget and plots, and its rebuild.

Each name is imported on first use (module `__getattr__`), as `ablations/__init__.py` does:
importing a small module of this package (the campaign flow's `md_html`, the artifact's
helpers) used to import `build` with it, and so matplotlib and pandas, in every campaign
process that never draws a plot (the results step runs in a slot worker): a CPU-second each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ablations.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker (and an editor) sees; at run time `__getattr__`
    from ablations.errors import ReportError as ReportError
    from ablations.files.names import EFFECTS_PNG as EFFECTS_PNG
    from ablations.files.names import PER_CLASS_PNG as PER_CLASS_PNG
    from ablations.files.names import TIMELINE_PNG as TIMELINE_PNG
    from ablations.report.build import REPORT_FILE as REPORT_FILE
    from ablations.report.build import build_report as build_report
    from ablations.report.decision import decision_reached as decision_reached
    from ablations.report.from_folder import rebuild_report as rebuild_report
    from ablations.report.inputs import ReportInputs as ReportInputs
    from ablations.report.inputs import ReportRun as ReportRun
    from ablations.report.inputs import assemble_inputs as assemble_inputs
    from ablations.report.markdown import render_report as render_report
    from ablations.report.plots import plot_effects as plot_effects
    from ablations.report.plots import plot_per_class as plot_per_class
    from ablations.report.plots import plot_timeline as plot_timeline

_PUBLIC: dict[str, str] = {
    "EFFECTS_PNG": "ablations.files.names",
    "PER_CLASS_PNG": "ablations.files.names",
    "TIMELINE_PNG": "ablations.files.names",
    "ReportError": "ablations.errors",
    "REPORT_FILE": "ablations.report.build",
    "build_report": "ablations.report.build",
    "decision_reached": "ablations.report.decision",
    "rebuild_report": "ablations.report.from_folder",
    "ReportInputs": "ablations.report.inputs",
    "ReportRun": "ablations.report.inputs",
    "assemble_inputs": "ablations.report.inputs",
    "render_report": "ablations.report.markdown",
    "plot_effects": "ablations.report.plots",
    "plot_per_class": "ablations.report.plots",
    "plot_timeline": "ablations.report.plots",
}
"""Public name -> the module that defines it."""

__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC, globals())
