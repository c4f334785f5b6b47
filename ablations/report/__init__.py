"""The campaign report: REPORT.md with effects, errors, budget and plots, and its rebuild."""

from ablations.errors import ReportError
from ablations.files.names import EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG
from ablations.report.build import REPORT_FILE, build_report
from ablations.report.decision import decision_reached
from ablations.report.from_folder import rebuild_report
from ablations.report.inputs import ReportInputs, ReportRun, assemble_inputs
from ablations.report.markdown import render_report
from ablations.report.plots import (
    plot_effects,
    plot_per_class,
    plot_timeline,
)

__all__ = [
    "EFFECTS_PNG",
    "PER_CLASS_PNG",
    "REPORT_FILE",
    "TIMELINE_PNG",
    "ReportError",
    "ReportInputs",
    "ReportRun",
    "assemble_inputs",
    "build_report",
    "decision_reached",
    "plot_effects",
    "plot_per_class",
    "plot_timeline",
    "rebuild_report",
    "render_report",
]
