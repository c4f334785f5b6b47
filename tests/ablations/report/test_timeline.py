"""timeline.png from crafted records: time from the campaign start, every run visible."""

from __future__ import annotations

from pathlib import Path

from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from ablations.plan.variants import PlannedRun
from ablations.report.inputs import ReportRun
from ablations.report.plots import plot_timeline, timeline_figure
from ablations.run.records import RunRecord, Stop

T0 = 1_700_000_000.0  # registration; the first run starts 30 s later


def _run(variant: str, phase: str, slot: str, start: float, end: float, **kw: object) -> ReportRun:
    planned = PlannedRun(
        run_id=f"{variant}-{phase}",
        variant=variant,
        factor=None,
        level=None,
        seed=0,
        category="essential",
        phase=phase,  # type: ignore[arg-type]
        steps=100,
        params={},
    )
    record = RunRecord(
        run_id=planned.run_id,
        variant=variant,
        seed=0,
        category="essential",
        phase=phase,  # type: ignore[arg-type]
        slot=slot,
        started_at=T0 + start,
        ended_at=T0 + end,
        **kw,  # type: ignore[arg-type]
    )
    return ReportRun(planned=planned, record=record)


def _runs() -> list[ReportRun]:
    stop = Stop(rule="non_finite_loss", message="loss is nan", step=1)
    return [
        _run("control", "pilot", "cpu#0", 30, 50, status="accepted"),
        _run("width=8", "pilot", "cpu#1", 30, 30.2, status="stopped", stop=stop),  # instant
        # a 10-minute wait at the gate, then the main phase
        _run("control", "main", "cpu#0", 660, 690, status="accepted"),
        _run("depth=2", "main", "cpu#1", 660, 700, status="rejected"),
    ]


def test_the_timeline_starts_at_the_campaign_start_and_shows_every_run() -> None:
    figure = timeline_figure(_runs(), campaign_start=T0, gate_closed=T0 + 655)
    assert figure is not None
    ax = figure.axes[0]
    low, high = ax.get_xlim()
    assert low == 0 and high * 60 >= 700  # minutes; nothing before the campaign started
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    run_bars = [b for b in bars if b.get_label() != "gate: waiting for the decision"]
    assert len(run_bars) == 4 and min(b.get_x() for b in run_bars) >= 0
    assert min(b.get_width() for b in run_bars) >= 0.005 * high  # the instant stop is visible
    assert {round(b.get_y() + b.get_height() / 2) for b in run_bars} == {0, 1}  # lane per slot
    markers = [line for line in ax.lines if isinstance(line, Line2D) and line.get_marker() == "v"]
    assert len(markers) == 1 and markers[0].get_xdata()[0] == 0.5  # the stop at 30 s
    gate = [p for p in ax.patches if p.get_label() == "gate: waiting for the decision"]
    assert len(gate) == 1
    extents = gate[0].get_bbox()
    assert abs(extents.x0 - 50 / 60) < 1e-9 and abs(extents.x1 - 655 / 60) < 1e-9


def test_without_recorded_times_the_first_run_starts_the_timeline(tmp_path: Path) -> None:
    figure = timeline_figure(_runs())
    assert figure is not None and figure.axes[0].get_xlim()[0] == 0
    gate = [p for p in figure.axes[0].patches if p.get_label().startswith("gate")]
    assert len(gate) == 1  # until the first main run
    assert plot_timeline(_runs(), tmp_path / "timeline.png") is not None
    assert (tmp_path / "timeline.png").read_bytes()[:4] == b"\x89PNG"
