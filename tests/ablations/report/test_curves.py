"""Learning curves from crafted metrics files: NaN losses, a stop at step 0, one seed, a pilot
prefix joined to its main run, and 60 runs in small multiples."""

from __future__ import annotations

import math
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from ablations.plan.experiment import MetricSection
from ablations.plan.variants import CONTROL, PlannedRun
from ablations.report.curves import curves_figure, load_curves, plot_curves
from ablations.report.inputs import ReportRun
from ablations.run.records import RunRecord, Stop
from tests.file_modes import UMASKS, umask

METRIC = MetricSection(name="accuracy", threshold=0.5, useful_effect=0.01)
STEPS, EVAL_EVERY = 100, 25


def loss_at(step: int, seed: int, offset: float) -> float:
    return 2.0 / (1 + step / 10) + 0.01 * seed + offset


def value_at(step: int, seed: int, offset: float) -> float:
    return 0.6 + 0.3 * step / STEPS + 0.002 * seed + offset


def png_that_fails_midway() -> Callable[..., None]:
    """A stand-in for `FigureCanvasAgg.print_png` that draws the figure, as the real one does,
    then fails after a head of the picture got out, into the file its target names or the file
    object it is, as a full disk does."""

    def print_png(canvas: FigureCanvasAgg, target: Any, **kwargs: Any) -> None:
        FigureCanvasAgg.draw(canvas)  # a "tight" savefig's measuring pass stops in here
        head = b"\x89PNG\r\n\x1a\n" + b"\0" * 100
        if isinstance(target, (str, os.PathLike)):
            Path(target).write_bytes(head)
        else:
            target.write(head)
        raise OSError(28, "No space left on device")

    return print_png


def write_run(
    out_dir: Path,
    variant: str,
    seed: int,
    *,
    offset: float = 0.0,
    stop: Stop | None = None,
    phase: str = "main",
    steps: int = STEPS,
    first: int = 1,
    losses: list[float] | None = None,
    start_step: int = 0,
    pilot: str | None = None,
) -> ReportRun:
    """Metrics files for steps `first..end` and the run's record (stopped at `stop.step`)."""
    run_id = f"{variant}-s{seed}-{phase}"
    end = stop.step if stop else steps
    if losses is None:
        losses = [loss_at(s, seed, offset) for s in range(first, end + 1)]
    steps_csv = out_dir / "metrics" / f"{run_id}.steps.csv"
    steps_csv.parent.mkdir(parents=True, exist_ok=True)
    # The driver numbers losses from 1 whatever the first step was: the reader must not trust it.
    steps_csv.write_text(
        "step,loss\n" + "".join(f"{i},{v!r}\n" for i, v in enumerate(losses, start=1))
    )
    evals = [s for s in range(EVAL_EVERY, end + 1, EVAL_EVERY) if s >= first]
    (out_dir / "metrics" / f"{run_id}.evals.csv").write_text(
        "step,accuracy\n" + "".join(f"{s},{value_at(s, seed, offset)!r}\n" for s in evals)
    )
    planned = PlannedRun(
        run_id=run_id,
        variant=variant,
        factor=None if variant == CONTROL else "width",
        level=None if variant == CONTROL else variant,
        seed=seed,
        category="essential",
        phase=phase,  # type: ignore[arg-type]
        steps=steps,
        params={},
        start_step=start_step,
        pilot=pilot,
    )
    record = RunRecord(
        run_id=run_id,
        variant=variant,
        seed=seed,
        category="essential",
        phase=phase,  # type: ignore[arg-type]
        status="stopped" if stop else "accepted",
        stop=stop,
        steps_done=end,
        artifacts={
            "steps": f"metrics/{run_id}.steps.csv",
            "evals": f"metrics/{run_id}.evals.csv",
        },
    )
    return ReportRun(planned=planned, record=record)


def test_a_stopped_run_ends_at_its_stop_with_its_rule_and_the_mean_skips_it(
    tmp_path: Path,
) -> None:
    nan_stop = Stop(rule="non_finite_loss", message="loss is nan", step=40)
    nan_losses = [loss_at(s, 2, 0.0) for s in range(1, 40)] + [math.nan]
    runs = [write_run(tmp_path, CONTROL, seed) for seed in range(3)]
    runs += [write_run(tmp_path, "width=16", seed, offset=0.05) for seed in range(2)]
    runs.append(write_run(tmp_path, "width=16", 2, stop=nan_stop, losses=nan_losses))
    truncated = Stop(rule="truncation", message="held-out inputs truncated", step=0)
    runs.append(write_run(tmp_path, "keep=32", 0, stop=truncated))

    curves = {c.run_id: c for c in load_curves(tmp_path, runs, "accuracy")}
    nan_run = curves["width=16-s2-main"]
    assert nan_run.rule == "non_finite_loss" and nan_run.end_step == 40
    assert nan_run.steps[-1] == 40 and math.isnan(nan_run.losses[-1])
    at_zero = curves["keep=32-s0-main"]
    assert at_zero.end_step == 0 and at_zero.steps == [] and at_zero.eval_steps == []

    figure = curves_figure(list(curves.values()), METRIC)
    assert figure is not None
    titles = [ax.get_title() for ax in figure.axes if ax.get_visible()]
    assert titles.count("width=16") == 1 and titles.count("keep=32") == 1
    loss_panel = next(ax for ax in figure.axes if ax.get_title() == "width=16")
    mean = next(line for line in loss_panel.lines if line.get_label() == "width=16 (n=2)")
    # The mean over the two seeds that trained through; the NaN run is drawn on its own.
    expected = [np.mean([loss_at(s, seed, 0.05) for seed in (0, 1)]) for s in range(1, 101)]
    assert np.allclose(mean.get_ydata(), expected)
    stop_marks = [t.get_text() for t in loss_panel.texts]
    assert stop_marks == ["s2: non_finite_loss @ 40"]
    zero_panel = next(ax for ax in figure.axes if ax.get_title() == "keep=32")
    assert [t.get_text() for t in zero_panel.texts] == ["s0: truncation @ 0"]


def test_a_main_run_resumed_from_its_pilot_is_joined_to_the_pilot_prefix(
    tmp_path: Path,
) -> None:
    pilot = write_run(tmp_path, CONTROL, 0, phase="pilot", steps=50)
    main = write_run(tmp_path, CONTROL, 0, first=51, start_step=50, pilot=pilot.planned.run_id)
    (curve,) = load_curves(tmp_path, [pilot, main], "accuracy")
    assert curve.steps == list(range(1, 101))
    assert np.allclose(curve.losses, [loss_at(s, 0, 0.0) for s in range(1, 101)])
    assert curve.eval_steps == [25, 50, 75, 100]


def test_one_seed_draws_and_the_png_decodes(tmp_path: Path) -> None:
    runs = [write_run(tmp_path, CONTROL, 0), write_run(tmp_path, "width=16", 0, offset=-0.02)]
    path = plot_curves(tmp_path, runs, METRIC, tmp_path / "curves.png")
    assert path is not None
    with Image.open(path) as image:
        image.verify()


@pytest.mark.parametrize("mask", UMASKS, ids=oct)
def test_the_png_gets_the_folders_mode_and_a_failed_drawing_keeps_the_old_one(
    tmp_path: Path, mask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [write_run(tmp_path, CONTROL, 0), write_run(tmp_path, "width=16", 0, offset=-0.02)]
    png = tmp_path / "curves.png"
    with umask(mask) as expected:
        plot_curves(tmp_path, runs, METRIC, png)
    assert stat.S_IMODE(png.stat().st_mode) == expected
    drawn = png.read_bytes()

    monkeypatch.setattr(FigureCanvasAgg, "print_png", png_that_fails_midway())
    with pytest.raises(OSError, match="No space left"):
        plot_curves(tmp_path, runs[:1], METRIC, png)
    assert png.read_bytes() == drawn
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_no_metrics_draws_nothing(tmp_path: Path) -> None:
    assert plot_curves(tmp_path, [], METRIC, tmp_path / "curves.png") is None
    assert not (tmp_path / "curves.png").exists()


def test_five_variants_by_twelve_seeds_share_axes_in_small_multiples(tmp_path: Path) -> None:
    names = [CONTROL, "width=16", "width=128", "depth=1", "dropout=0.3"]
    runs = [
        write_run(tmp_path, name, seed, offset=0.01 * i)
        for i, name in enumerate(names)
        for seed in range(12)
    ]
    started = time.perf_counter()
    path = plot_curves(tmp_path, runs, METRIC, tmp_path / "curves.png")
    seconds = time.perf_counter() - started
    assert path is not None and seconds < 20
    with Image.open(path) as image:
        width, height = image.size
    assert 1200 < width < 2200 and height < 1400  # four columns, three rows: fits a screen
    figure = curves_figure(load_curves(tmp_path, runs, "accuracy"), METRIC)
    assert figure is not None
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 12
    loss_rows = [ax for ax in visible if ax.get_title()]
    assert len({ax.get_ylim() for ax in loss_rows}) == 1  # one scale across the variants


def test_a_campaign_that_ended_at_the_gate_shows_its_pilot_curves(tmp_path: Path) -> None:
    pilot = write_run(tmp_path, CONTROL, 0, phase="pilot", steps=50)
    planned_main = write_run(tmp_path, CONTROL, 0, first=51, start_step=50).planned
    runs = [pilot, ReportRun(planned=planned_main)]  # the main run never ran: no record
    (curve,) = load_curves(tmp_path, runs, "accuracy")
    assert curve.run_id == pilot.planned.run_id and curve.steps == list(range(1, 51))


def test_a_pair_evaluated_off_the_grid_leaves_the_other_pairs_a_gap(tmp_path: Path) -> None:
    """Seed 0's pilots stopped at step 30 (not a multiple of eval_every) and evaluated there;
    seed 1 never did: its difference row has a gap at 30 (it raised a KeyError, failing the
    whole results step)."""
    runs = [write_run(tmp_path, v, seed) for v in (CONTROL, "width=16") for seed in (0, 1)]
    for variant in (CONTROL, "width=16"):
        evals = tmp_path / "metrics" / f"{variant}-s0-main.evals.csv"
        header, first, *rest = evals.read_text().splitlines()
        evals.write_text("\n".join([header, first, f"30,{value_at(30, 0, 0.0)!r}", *rest]) + "\n")
    curves = load_curves(tmp_path, runs, "accuracy")
    assert 30 in next(c for c in curves if c.run_id == "control-s0-main").eval_steps
    assert curves_figure(curves, METRIC) is not None


@pytest.mark.parametrize("variants", [1, 3, 5])
def test_the_title_fits_the_figure_and_the_key_sits_outside_every_panel(
    tmp_path: Path, variants: int
) -> None:
    """The title wraps to the figure's width (one line was cut off on both sides at three
    variants) and the key is above the grid, never a legend over a curve."""
    names = [CONTROL, "width=16", "width=128", "depth=1", "dropout=0.3", "lr=0.1"]
    runs = [
        write_run(tmp_path, name, seed, offset=0.01 * i)
        for i, name in enumerate(names[: variants + 1])
        for seed in range(2)
    ]
    figure = curves_figure(load_curves(tmp_path, runs, "accuracy"), METRIC)
    assert figure is not None
    renderer = FigureCanvasAgg(figure).get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    suptitle = next(t for t in figure.texts if t.get_text() == figure.get_suptitle())
    title = suptitle.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= width and title.y1 <= height
    assert all(ax.get_legend() is None for ax in figure.axes)  # no legend inside the data
    (key,) = figure.legends
    box = key.get_window_extent(renderer)
    panels = [ax.get_window_extent(renderer) for ax in figure.axes if ax.get_visible()]
    assert box.y0 >= max(p.y1 for p in panels) and box.y1 <= title.y0 + 1  # between them
    assert box.x0 >= 0 and box.x1 <= width
    assert all("n=2" in ax.get_xlabel() for ax in figure.axes if ax.get_xlabel())
