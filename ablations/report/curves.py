"""Learning curves: per variant, training loss and the held-out metric against step.

Read from `metrics/<run>.steps.csv` and `.evals.csv`. A main run that resumed from its pilot
is joined to the pilot's prefix, so every curve starts at step 1. The mean over seeds is a
line and the spread over seeds a min-max band, over the runs that trained to the end
(accepted or rejected); a stopped or failed run is its own thin line, ending where it stopped
with an x and its rule. The control is drawn on every panel. Beneath, the paired difference
(variant - control, same seed) at each evaluation: its mean and min-max band over the seeds,
with the useful-effect band shaded.
"""

from __future__ import annotations

import csv
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from pydantic import BaseModel, ConfigDict

from ablations.plan.experiment import MetricSection
from ablations.plan.variants import CONTROL
from ablations.report.inputs import ReportRun
from ablations.report.plots import save_figure

CONTROL_COLOR = "0.35"
VARIANT_COLOR = "tab:blue"
TRAINED_THROUGH = ("accepted", "rejected")
"""Statuses whose runs reached their last step: these make the mean and the band."""
PANEL_WIDTH, PANEL_HEIGHT = 3.1, 2.2  # inches per small multiple: 5 variants fit 1440 px
MAX_COLUMNS = 5
"""Variants per row of panels; more wrap onto further rows (one row of three plots each)."""
TITLE_CHARS_PER_INCH = 13
"""Characters of the small title per inch of figure (about 15 fit: a margin for wide ones)."""
TITLE_LINE_INCHES = 0.2
KEY_INCHES = 2.4
"""Width of one entry of the key (the longest label at x-small)."""
KEY_ROW_INCHES = 0.2


class RunCurve(BaseModel):
    """One run's losses and metric values by step, the pilot's prefix included."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    variant: str
    seed: int
    status: str
    rule: str | None = None
    """The stop rule that ended it, or `failed`; None for a run that trained through."""
    end_step: int = 0
    steps: list[int] = []
    losses: list[float] = []
    eval_steps: list[int] = []
    values: list[float] = []
    """The plan's metric at each evaluation step."""


def _read(path: Path, column: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one column; a missing file or an empty cell reads as nothing."""
    if not path.is_file():
        return [], []
    steps, values = [], []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            cell = row.get(column)
            if cell in (None, ""):
                continue
            steps.append(int(float(row["step"])))
            values.append(float(cell))
    return steps, values


def _joined(out_dir: Path, run: ReportRun, pilot: ReportRun | None, metric: str) -> RunCurve | None:
    record = run.record
    if record is None or record.status == "trimmed":
        return None
    own_steps, losses = _read(out_dir / record.artifacts.get("steps", "-"), "loss")
    eval_steps, values = _read(out_dir / record.artifacts.get("evals", "-"), metric)
    # A resumed run's history may hold only the steps it trained itself: those end at
    # `steps_done`, and whatever comes before them is its pilot's (joined when it is there).
    first = max(0, record.steps_done - len(losses)) if own_steps else 0
    prefix: list[float] = []
    if first and pilot is not None and pilot.record is not None:
        _, pilot_losses = _read(out_dir / pilot.record.artifacts.get("steps", "-"), "loss")
        prefix = pilot_losses[:first]
        p_steps, p_values = _read(out_dir / pilot.record.artifacts.get("evals", "-"), metric)
        early = [(s, v) for s, v in zip(p_steps, p_values, strict=True) if s <= first]
        seen = set(eval_steps)
        eval_steps = [s for s, _ in early if s not in seen] + eval_steps
        values = [v for s, v in early if s not in seen] + values
    start = first - len(prefix) + 1
    steps = list(range(start, start + len(prefix) + len(losses)))
    rule = record.stop.rule if record.stop else ("failed" if record.status == "failed" else None)
    end = record.stop.step if record.stop else record.steps_done
    return RunCurve(
        run_id=record.run_id,
        variant=record.variant,
        seed=record.seed,
        status=record.status,
        rule=rule,
        end_step=end,
        steps=steps,
        losses=prefix + losses,
        eval_steps=eval_steps,
        values=values,
    )


def load_curves(out_dir: Path, runs: Sequence[ReportRun], metric: str) -> list[RunCurve]:
    """The main phase's curves (the pilot's when no main run finished), prefixes joined."""
    by_id = {r.planned.run_id: r for r in runs}
    for phase in ("main", "pilot"):
        curves = [
            _joined(out_dir, r, by_id.get(r.planned.pilot or ""), metric)
            for r in runs
            if r.planned.phase == phase
        ]
        found = [c for c in curves if c is not None]
        if found:
            return found
    return []


def _grid(curves: Sequence[RunCurve], key: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps and a seeds x steps array (NaN where a seed has no value there)."""
    xs = sorted({s for c in curves for s in (c.steps if key == "loss" else c.eval_steps)})
    index = {s: i for i, s in enumerate(xs)}
    grid = np.full((len(curves), len(xs)), np.nan)
    for row, curve in enumerate(curves):
        steps, ys = (
            (curve.steps, curve.losses) if key == "loss" else (curve.eval_steps, curve.values)
        )
        for s, y in zip(steps, ys, strict=True):
            grid[row, index[s]] = y if math.isfinite(y) else np.nan
    return np.array(xs, dtype=float), grid


def _band(ax: Axes, xs: np.ndarray, grid: np.ndarray, color: str, label: str | None) -> None:
    """Mean line and min-max band over the rows, at the steps where some row has a value."""
    has = ~np.all(np.isnan(grid), axis=0)
    if not has.any():
        return
    xs, grid = xs[has], grid[:, has]
    ax.fill_between(xs, np.nanmin(grid, axis=0), np.nanmax(grid, axis=0), color=color, alpha=0.2)
    ax.plot(xs, np.nanmean(grid, axis=0), color=color, linewidth=1.4, label=label)


def _panel(ax: Axes, groups: dict[str, list[RunCurve]], variant: str, key: str) -> None:
    for name, color in ((CONTROL, CONTROL_COLOR), (variant, VARIANT_COLOR)):
        curves = groups.get(name, [])
        through = [c for c in curves if c.status in TRAINED_THROUGH]
        if through:
            xs, grid = _grid(through, key)
            label = f"{name} (n={len(through)})" if key == "loss" else None
            _band(ax, xs, grid, color, label)
        ended: dict[tuple[str, int], list[tuple[int, float]]] = {}
        for c in curves:
            if c.status in TRAINED_THROUGH:
                continue
            steps, ys = (c.steps, c.losses) if key == "loss" else (c.eval_steps, c.values)
            pairs = [(s, y) for s, y in zip(steps, ys, strict=True) if math.isfinite(y)]
            if pairs:
                ax.plot(*zip(*pairs, strict=True), color=color, linewidth=0.7, linestyle="--")
            y_end = pairs[-1][1] if pairs else math.nan
            ended.setdefault((c.rule or c.status, c.end_step), []).append((c.seed, y_end))
        for (rule, step), seeds in ended.items():  # one mark per rule and step, seeds named
            ys = [y for _, y in seeds if math.isfinite(y)]
            y = ys[-1] if ys else None
            ax.plot([step] * len(ys), ys, marker="x", color="tab:red", linestyle="none")
            if key != "loss":
                continue
            named = ", ".join(f"s{seed}" for seed, _ in seeds)
            ax.annotate(
                f"{named}: {rule} @ {step}",
                (step, y if y is not None else 0.03),
                xycoords="data" if y is not None else ("data", "axes fraction"),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize="x-small",
                color="tab:red",
            )
            if y is None:  # nothing was trained: the x sits on the axis where it stopped
                ax.plot(
                    step,
                    0.0,
                    marker="x",
                    color="tab:red",
                    clip_on=False,
                    transform=ax.get_xaxis_transform(),
                )


def _differences(ax: Axes, groups: dict[str, list[RunCurve]], variant: str, u: float) -> None:
    """Variant - control at each evaluation, paired by seed, over the seeds both trained."""
    ax.axhspan(-u, u, color="0.9", zorder=0)
    ax.axhline(0, color="0.5", linewidth=0.8)
    control = {c.seed: c for c in groups.get(CONTROL, []) if c.status in TRAINED_THROUGH}
    mine = [c for c in groups.get(variant, []) if c.status in TRAINED_THROUGH]
    pairs = [(c, control[c.seed]) for c in mine if c.seed in control]
    if not pairs:
        ax.text(0.5, 0.5, "no paired seeds", transform=ax.transAxes, ha="center", fontsize="small")
        return
    xs = sorted({s for c, k in pairs for s in c.eval_steps if s in k.eval_steps})
    grid = np.full((len(pairs), len(xs)), np.nan)
    for row, (c, k) in enumerate(pairs):
        own, base = (
            dict(zip(c.eval_steps, c.values, strict=True)),
            dict(zip(k.eval_steps, k.values, strict=True)),
        )
        for i, s in enumerate(xs):
            # a pair evaluated at a step another pair did not (a pilot's extra evaluation at
            # its last step, off the eval_every grid): a gap in this row, not a KeyError
            if s in own and s in base:
                grid[row, i] = own[s] - base[s]
    _band(ax, np.array(xs, dtype=float), grid, VARIANT_COLOR, None)
    ax.plot(xs, np.nanmean(grid, axis=0), marker=".", color=VARIANT_COLOR, linestyle="none")


def _seeds(groups: dict[str, list[RunCurve]], name: str) -> str:
    """How many seeds trained through in a column: the variant's and the control's."""
    mine = sum(c.status in TRAINED_THROUGH for c in groups.get(name, []))
    control = sum(c.status in TRAINED_THROUGH for c in groups.get(CONTROL, []))
    return f"n={mine}" if name == CONTROL else f"n={mine}, {CONTROL} n={control}"


def _key(metric: MetricSection) -> list[tuple[Artist, str]]:
    """What the marks mean, once for the whole grid (above it, outside every panel)."""
    return [
        (Line2D([], [], color=CONTROL_COLOR, linewidth=1.4), f"{CONTROL}: mean over seeds"),
        (Line2D([], [], color=VARIANT_COLOR, linewidth=1.4), "variant: mean over seeds"),
        (Patch(color=VARIANT_COLOR, alpha=0.2), "min-max over seeds"),
        (
            Line2D([], [], color="0.4", linestyle="--", marker="x", markeredgecolor="tab:red"),
            "stopped or failed run, x at its rule",
        ),
        (Patch(color="0.9"), f"useful effect ±{metric.useful_effect:g} (bottom row)"),
    ]


def curves_figure(curves: Sequence[RunCurve], metric: MetricSection) -> Figure | None:
    """Small multiples, one column per variant (the control alone when it is the only one):
    loss, metric and paired difference rows with shared axes per row."""
    if not any(c.losses or c.values for c in curves):
        return None  # no metrics files (or nothing in them): no picture of nothing
    groups: dict[str, list[RunCurve]] = {}
    for c in curves:
        groups.setdefault(c.variant, []).append(c)
    names = [v for v in groups if v != CONTROL] or [CONTROL]
    columns = min(MAX_COLUMNS, len(names))
    blocks = math.ceil(len(names) / columns)
    key_rows = math.ceil(5 / max(1, int((PANEL_WIDTH * columns + 0.8) / KEY_INCHES)))
    extra = TITLE_LINE_INCHES * 2 + KEY_ROW_INCHES * key_rows  # the title and the key above
    figure = Figure(figsize=(PANEL_WIDTH * columns + 0.8, PANEL_HEIGHT * 3 * blocks + 0.5 + extra))
    # Shared axes per row: the panels compare at a glance (same steps, same scale).
    axes = figure.subplots(3 * blocks, columns, sharex=True, sharey="row", squeeze=False)
    finite = [y for c in curves for y in c.losses if math.isfinite(y)]
    positive = bool(finite) and min(finite) > 0  # a log scale shows a loss's whole descent
    for i, name in enumerate(names):
        block, col = divmod(i, columns)
        loss, value, diff = (axes[3 * block + r][col] for r in range(3))
        _panel(loss, groups, name, "loss")
        _panel(value, groups, name, "metric")
        _differences(diff, groups, name, metric.useful_effect)
        loss.set_title(name, fontsize="medium")
        if positive:
            loss.set_yscale("log")
        # The seed counts under the column, the key above the grid: no legend over a curve.
        diff.set_xlabel(f"step ({_seeds(groups, name)})", fontsize="small")
    for i in range(len(names), blocks * columns):  # the last row's empty places
        for r in range(3):
            axes[3 * (i // columns) + r][i % columns].set_visible(False)
    for row in range(3 * blocks):
        axes[row][0].set_ylabel(
            ("training loss", metric.name, f"{metric.name} diff")[row % 3], fontsize="small"
        )
    height, width = figure.get_figheight(), figure.get_figwidth()
    # The title wrapped to the figure's width (one long line was cut off on both sides at
    # three variants), then the key in as many rows as the width holds.
    title = textwrap.wrap(
        f"Learning curves: training loss, {metric.name}, and variant - {CONTROL} paired by "
        "seed at each evaluation",
        width=max(30, int(width * TITLE_CHARS_PER_INCH)),
    )
    figure.suptitle("\n".join(title), fontsize="small", y=1 - 0.08 / height, va="top")
    key = _key(metric)
    per_row = max(1, min(len(key), int(width / KEY_INCHES)))
    key_rows = math.ceil(len(key) / per_row)
    title_inches = 0.08 + TITLE_LINE_INCHES * len(title)
    figure.legend(
        [handle for handle, _ in key],
        [label for _, label in key],
        loc="upper center",
        bbox_to_anchor=(0.5, 1 - title_inches / height),
        ncol=per_row,
        fontsize="x-small",
        frameon=False,
    )
    # Fixed margins, not tight_layout: the layout pass draws the whole grid once more (about
    # a second at 5 variants), and these panels never carry long tick labels.
    top = 1 - (title_inches + KEY_ROW_INCHES * key_rows + 0.3) / height
    bottom = 0.45 / figure.get_figheight()
    left = 0.85 / figure.get_figwidth()  # room for a log axis' tick labels and the row's name
    figure.subplots_adjust(left=left, right=0.99, top=top, bottom=bottom, wspace=0.08, hspace=0.14)
    return figure


def plot_curves(
    out_dir: Path, runs: Sequence[ReportRun], metric: MetricSection, path: Path
) -> Path | None:
    """curves.png from the folder's metrics files; None when no run has any."""
    figure = curves_figure(load_curves(out_dir, runs, metric.name), metric)
    if figure is None:
        return None
    return save_figure(figure, path, tight=False)  # the margins are set: no "tight" pass
