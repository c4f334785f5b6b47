"""The report's three PNGs, drawn on the Agg canvas (no pyplot, no global backend, no display).

Each function returns the path it wrote, or None when there is nothing to draw, so the
report links only the plots that exist.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from ablations.analysis.flips import ErrorAnalysis, per_class_frame
from ablations.analysis.paired import Effect
from ablations.campaign.folder import CampaignFolder
from ablations.files.atomic import atomic_write_bytes
from ablations.plan.experiment import MetricSection
from ablations.report.inputs import ReportRun

STATUS_COLORS = {
    "accepted": "tab:green",
    "rejected": "tab:orange",
    "stopped": "tab:red",
    "failed": "black",
    "trimmed": "tab:gray",
}
MAX_LABELLED_PER_SLOT = 6
"""Bars are labelled with their variant and seed only while the labels still fit."""
DPI = 120  # readable in a markdown viewer without making the PNGs heavy


def save_figure(figure: Figure, path: Path, *, tight: bool = True) -> Path:
    """`figure` as a PNG at `path`, whole or not at all: drawn into memory first, then
    written through the output folder's one atomic writer (its mode, its fsyncs), so a
    drawing that fails leaves the previous file, or none, never a truncated picture.
    `tight=False` keeps the figure's own margins (no second, "tight" drawing pass)."""
    FigureCanvasAgg(figure)
    png = io.BytesIO()
    figure.savefig(png, format="png", dpi=DPI, bbox_inches="tight" if tight else None)
    atomic_write_bytes(path, png.getvalue())
    return path


VERDICT_STYLE: dict[str, tuple[str, str]] = {
    "better": ("o", "tab:green"),
    "not worse": ("o", "tab:cyan"),
    "equivalent": ("o", "tab:blue"),
    "worse": ("o", "tab:red"),
    "inconclusive": ("o", "tab:gray"),
    "unstable": ("x", "tab:purple"),
    "fails threshold": ("v", "tab:orange"),
    "diverges": ("X", "tab:red"),
    "input truncated": ("s", "tab:brown"),
    "failed": ("P", "black"),
    "not run": ("D", "0.6"),
}
"""Verdict -> (marker, colour) in effects.png; one legend entry per verdict shown."""


def plot_effects(effects: Sequence[Effect], metric: MetricSection, path: Path) -> Path | None:
    """Every variant's verdict: the mean paired difference with its adjusted interval over the
    useful-effect band, or, without a difference, the verdict's marker at 0 and its name."""
    if not effects:
        return None
    return save_figure(effects_figure(effects, metric), path)


def effects_figure(effects: Sequence[Effect], metric: MetricSection) -> Figure:
    """effects.png's figure: constrained layout keeps the tick labels and the legend inside
    it, and a verdict's note stays inside the plot's frame (`_notes_inside`)."""
    figure = Figure(figsize=(7, 1.4 + 0.45 * len(effects)), layout="constrained")
    ax = figure.add_subplot()
    u = metric.useful_effect
    ax.axvspan(-u, u, color="0.9", label=f"within the useful effect (±{u:g})")
    ax.axvline(0, color="0.5", linewidth=0.8)
    seen: set[str] = set()
    notes = []
    for y, effect in enumerate(effects):
        marker, color = VERDICT_STYLE[effect.verdict]
        label = None if effect.verdict in seen else effect.verdict
        seen.add(effect.verdict)
        if effect.mean_diff is None:  # no pair: the verdict itself is the result shown
            ax.plot(0, y, marker=marker, color=color, markersize=9, linestyle="none", label=label)
            counted = re.match(r"^(pilot: )?(\d+/\d+ seeds)", effect.note)
            note = ax.annotate(
                effect.label + (f", {counted.group(2)}" if counted else ""),
                (0, y),
                xytext=(8, 0),
                textcoords="offset points",
                va="center",
                fontsize="small",
                color=color,
            )
            notes.append(note)
        elif effect.ci_low is not None and effect.ci_high is not None:
            ax.errorbar(
                effect.mean_diff,
                y,
                xerr=[[effect.mean_diff - effect.ci_low], [effect.ci_high - effect.mean_diff]],
                fmt=marker,
                color=color,
                capsize=4,
                label=label,
            )
        else:  # a single seed: the difference alone, hollow, no interval drawn
            ax.plot(
                effect.mean_diff,
                y,
                marker=marker,
                markerfacecolor="none",
                color=color,
                linestyle="none",
                label=label,
            )
    ax.set_yticks(range(len(effects)))
    ax.set_yticklabels([f"{e.variant} (n={e.n_pairs})" for e in effects])
    ax.invert_yaxis()
    better = "right" if metric.direction == "maximize" else "left"
    ax.set_xlabel(f"{metric.name}: variant - control (adjusted interval; better to the {better})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    _notes_inside(figure, ax, notes)
    return figure


def _notes_inside(figure: Figure, ax: Axes, notes: Sequence[Annotation]) -> None:
    """Keep each note (a verdict's name beside its marker at 0) inside the plot's frame: one
    that would run past the right edge goes to the marker's left, and where it fits on
    neither side the x-axis widens to the right until it does."""
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw_without_rendering()  # the constrained layout: the frame's final size
    for note in notes:
        frame = ax.get_window_extent(renderer)
        if note.get_window_extent(renderer).x1 <= frame.x1:
            continue
        note.set_horizontalalignment("right")
        note.xyann = (-8, 0)
        if note.get_window_extent(renderer).x0 >= frame.x0:
            continue
        note.set_horizontalalignment("left")
        note.xyann = (8, 0)
        for _ in range(3):  # the layout moves the frame a little as the ticks change
            box, frame = note.get_window_extent(renderer), ax.get_window_extent(renderer)
            if box.x1 <= frame.x1:
                break
            low, _ = ax.get_xlim()  # the markers sit at 0, which the band keeps in view
            width = frame.x1 - frame.x0
            need = box.x1 - ax.transData.transform((0, 0))[0] + 6  # a margin of 6 pixels
            if need >= width:
                break  # wider than the whole plot: nothing to widen to
            ax.set_xlim(low, low - low * width / (width - need))
            figure.draw_without_rendering()


def plot_per_class(analysis: ErrorAnalysis | None, path: Path) -> Path | None:
    """Heatmap of per-class accuracy change versus the control (variants x classes)."""
    if analysis is None or not analysis.per_class_change:
        return None
    frame = per_class_frame(analysis)
    values = frame.to_numpy(dtype=float)
    finite = np.abs(values[np.isfinite(values)])
    limit = float(finite.max()) if finite.size and finite.max() > 0 else 1.0  # symmetric at 0
    figure = Figure(figsize=(1.5 + 0.5 * len(frame.columns), 1.2 + 0.45 * len(frame)))
    ax = figure.add_subplot()
    image = ax.imshow(values, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(len(frame.columns)))
    ax.set_xticklabels(list(frame.columns))
    ax.set_yticks(range(len(frame)))
    ax.set_yticklabels(list(frame.index))
    ax.set_xlabel("class")
    figure.colorbar(image, ax=ax, label="accuracy change vs control (mean over paired seeds)")
    return save_figure(figure, path)


MIN_BAR_FRACTION = 0.006
"""The shortest bar drawn, as a fraction of the timeline: a run that took a second in a
campaign of hours still shows (and gets a marker, since its bar is wider than its time)."""


LABEL_FRACTION = 0.06
"""Bars narrower than this fraction of the timeline are left unlabelled (the legend and the
report's tables name them)."""


def timeline_marks(out_dir: Path) -> dict[str, float | None]:
    """The campaign's start (registration) and the gate's close (its decision) from the
    folder, for `plot_timeline`; None where the folder does not record them."""
    folder = CampaignFolder(out_dir)
    registration, gate = folder.registration(), folder.gate()
    return {
        "campaign_start": registration.registered_at if registration else None,
        "gate_closed": gate.decided_at if gate else None,
    }


def _time_unit(span_seconds: float) -> tuple[str, float]:
    if span_seconds < 120:
        return "seconds", 1.0
    if span_seconds < 3 * 3600:
        return "minutes", 60.0
    return "hours", 3600.0


def plot_timeline(
    runs: Sequence[ReportRun],
    path: Path,
    *,
    campaign_start: float | None = None,
    gate_closed: float | None = None,
) -> Path | None:
    """The timeline figure (see `timeline_figure`) as a PNG."""
    figure = timeline_figure(runs, campaign_start=campaign_start, gate_closed=gate_closed)
    return None if figure is None else save_figure(figure, path)


def timeline_figure(
    runs: Sequence[ReportRun],
    *,
    campaign_start: float | None = None,
    gate_closed: float | None = None,
) -> Figure | None:
    """One lane per slot, one bar per run from its start to its end, coloured by status.

    Time runs from the campaign's start (never negative); the gate's wait, from the last
    pilot run's end to the decision, is shaded; runs too short to see get a minimum width and
    a marker."""
    timed = [
        (r, r.record)
        for r in runs
        if r.record is not None
        and r.record.started_at is not None
        and r.record.ended_at is not None
    ]
    if not timed:
        return None
    spans = {
        record.run_id: (float(record.started_at or 0), float(record.ended_at or 0))
        for _, record in timed
    }
    starts = [start for start, _ in spans.values()]
    origin = min([*starts, *([campaign_start] if campaign_start is not None else [])])
    pilot_ends = [spans[rec.run_id][1] for run, rec in timed if run.planned.phase == "pilot"]
    main_starts = [spans[rec.run_id][0] for run, rec in timed if run.planned.phase == "main"]
    gate_open = max(pilot_ends) if pilot_ends else None
    gate_close = gate_closed if gate_closed is not None else min(main_starts, default=None)
    end = max([e for _, e in spans.values()] + ([gate_close] if gate_close else []))
    unit, scale = _time_unit(end - origin)
    total = max((end - origin) / scale, 1e-9)
    min_width = MIN_BAR_FRACTION * total

    slot_of = [record.slot or "?" for _, record in timed]
    slots = sorted(set(slot_of))
    labelled = max(Counter(slot_of).values()) <= MAX_LABELLED_PER_SLOT
    figure = Figure(figsize=(9, 1.2 + 0.5 * len(slots)))
    ax = figure.add_subplot()
    gate_span = []
    if gate_open is not None and gate_close is not None and gate_close > gate_open:
        gate_span = [
            ax.axvspan(
                (gate_open - origin) / scale,
                (gate_close - origin) / scale,
                color="0.88",
                zorder=0,
                label="gate: waiting for the decision",
            )
        ]
    for run, record in timed:
        y = slots.index(record.slot or "?")
        started, ended = spans[record.run_id]
        start = (started - origin) / scale
        width = (ended - started) / scale
        color = STATUS_COLORS.get(record.status, "tab:blue")
        ax.barh(
            y,
            max(width, min_width),
            left=start,
            color=color,
            edgecolor="white",
            hatch="//" if run.planned.phase == "pilot" else None,
        )
        if width < min_width:  # an instant stop or a recognized run: mark where it happened
            ax.plot(start, y, marker="v", color=color, markeredgecolor="black", markersize=7)
        if labelled and width >= LABEL_FRACTION * total:  # a label wider than its bar hides others
            ax.text(
                start + max(width, min_width) / 2,
                y,
                f"{run.planned.variant} s{run.planned.seed}",
                ha="center",
                va="center",
                fontsize="x-small",
                clip_on=True,
            )
    ax.set_xlim(0, total * 1.02)
    ax.set_yticks(range(len(slots)))
    ax.set_yticklabels(slots)
    ax.set_ylim(-0.6, len(slots) - 0.4)
    ax.set_xlabel(
        f"{unit} since the campaign started (hatched: pilot; triangle: a run too short to see)"
    )
    handles = [
        ax.bar(0, 0, color=color, label=status)
        for status, color in STATUS_COLORS.items()
        if any(record.status == status for _, record in timed)
    ]
    ax.legend(
        handles=[*handles, *gate_span],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize="small",
    )
    return figure
