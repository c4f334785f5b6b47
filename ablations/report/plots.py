"""The report's three PNGs, drawn on the Agg canvas (no pyplot, no global backend, no display).

Each function returns the path it wrote, or None when there is nothing to draw, so the
report links only the plots that exist.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ablations.analysis import Effect, ErrorAnalysis, per_class_frame
from ablations.plan_sections import MetricSection
from ablations.report.inputs import ReportRun

EFFECTS_PNG = "effects.png"
PER_CLASS_PNG = "per_class_change.png"
TIMELINE_PNG = "timeline.png"
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


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=DPI, bbox_inches="tight")
    return path


VERDICT_STYLE: dict[str, tuple[str, str]] = {
    "better": ("o", "tab:green"),
    "not worse": ("o", "tab:cyan"),
    "equivalent": ("o", "tab:blue"),
    "worse": ("o", "tab:red"),
    "inconclusive": ("o", "tab:gray"),
    "fails threshold": ("v", "tab:orange"),
    "diverges": ("X", "tab:red"),
    "input truncated": ("s", "tab:brown"),
    "failed": ("P", "black"),
    "not run": ("D", "0.6"),
}
"""Verdict -> (marker, colour) in effects.png; one legend entry per verdict shown."""


def plot_effects(effects: Sequence[Effect], metric: MetricSection, path: Path) -> Path | None:
    """Every variant's verdict: the mean paired difference with its 95% interval over the
    useful-effect band, or, without a difference, the verdict's marker at 0 and its name."""
    if not effects:
        return None
    figure = Figure(figsize=(7, 1.4 + 0.45 * len(effects)))
    ax = figure.add_subplot()
    u = metric.useful_effect
    ax.axvspan(-u, u, color="0.9", label=f"within the useful effect (±{u:g})")
    ax.axvline(0, color="0.5", linewidth=0.8)
    seen: set[str] = set()
    for y, effect in enumerate(effects):
        marker, color = VERDICT_STYLE[effect.verdict]
        label = None if effect.verdict in seen else effect.verdict
        seen.add(effect.verdict)
        if effect.mean_diff is None:  # no pair: the verdict itself is the result shown
            ax.plot(0, y, marker=marker, color=color, markersize=9, linestyle="none", label=label)
            counted = re.match(r"^(pilot: )?(\d+/\d+ seeds)", effect.note)
            ax.annotate(
                effect.label + (f", {counted.group(2)}" if counted else ""),
                (0, y),
                xytext=(8, 0),
                textcoords="offset points",
                va="center",
                fontsize="small",
                color=color,
            )
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
    ax.set_xlabel(f"{metric.name}: variant - control (95% interval; better to the {better})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    return _save(figure, path)


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
    return _save(figure, path)


def plot_timeline(runs: Sequence[ReportRun], path: Path) -> Path | None:
    """One row per slot, one bar per run from its start to its end, coloured by status."""
    timed = [
        r
        for r in runs
        if r.record is not None
        and r.record.started_at is not None
        and r.record.ended_at is not None
    ]
    if not timed:
        return None
    origin = min(r.record.started_at for r in timed if r.record and r.record.started_at)
    slot_of = [(r.record.slot if r.record else None) or "?" for r in timed]
    slots = sorted(set(slot_of))
    labelled = max(Counter(slot_of).values()) <= MAX_LABELLED_PER_SLOT
    figure = Figure(figsize=(9, 1.2 + 0.5 * len(slots)))
    ax = figure.add_subplot()
    for run in timed:
        record = run.record
        assert record is not None and record.started_at is not None
        assert record.ended_at is not None
        y = slots.index(record.slot or "?")
        start = (record.started_at - origin) / 60
        width = max((record.ended_at - record.started_at) / 60, 1e-3)
        ax.barh(
            y,
            width,
            left=start,
            color=STATUS_COLORS.get(record.status, "tab:blue"),
            edgecolor="white",
            hatch="//" if run.planned.phase == "pilot" else None,
        )
        if labelled:
            ax.text(
                start + width / 2,
                y,
                f"{run.planned.variant} s{run.planned.seed}",
                ha="center",
                va="center",
                fontsize="x-small",
                clip_on=True,
            )
    ax.set_yticks(range(len(slots)))
    ax.set_yticklabels(slots)
    ax.set_xlabel("minutes since the first run started (hatched: pilot)")
    handles = [
        ax.bar(0, 0, color=color, label=status)
        for status, color in STATUS_COLORS.items()
        if any(r.record and r.record.status == status for r in timed)
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return _save(figure, path)
