"""The live view: counts that add up after a trim and after looks, money pro rata of the
window, a projected finish that learns from the finished runs."""

from __future__ import annotations

import copy

import pytest

from ablations.budget import project
from ablations.budget.catalog import Package
from ablations.campaign.live import LiveCampaign
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.run.records import RunRecord, Timings
from tests.flows.conftest import TINY_PLAN

HOUR = 3600.0


def _live(price: float | None = 300.0, looks: bool = False) -> tuple[LiveCampaign, list]:
    data = copy.deepcopy(TINY_PLAN)
    data["budget"] = {"package": {"gpu": "RTX 4090", "lots": 1, "days": 3, "price_usd": price}}
    if looks:
        data["seeds"] = {"start": 2, "max": 4, "looks": [2, 4]}
    plan = parse_plan(data)
    runs = planned_runs(plan, plan_hash(plan))
    projection = project(plan, runs, plan.budget.estimate, slots=2)
    return LiveCampaign.for_plan(plan, runs, projection, registered_at=0.0), runs


def _done(run_id: str, seconds: float) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        variant="v",
        seed=0,
        category="essential",
        phase="main",
        status="accepted",
        timings=Timings(train=seconds),
    )


def test_counts_add_up_after_a_trim_and_running_is_at_most_the_slots() -> None:
    live, runs = _live()
    assert live.view(now=0).counter() == f"[0/{len(runs)}]"
    live.start([r.run_id for r in runs[:2]])
    view = live.view(now=0)
    assert (view.done, view.running, view.left) == (0, 2, len(runs) - 2)
    live.finish(_done(runs[0].run_id, 1.0))
    main = [r.run_id for r in runs if r.phase == "main"]
    assert live.drop(main[:2]) == 2
    assert live.drop(main[:2]) == 0  # dropped once
    view = live.view(now=0)
    assert view.counter() == f"[1/{len(runs) - 2}]"  # the denominator shrinks, done never jumps
    assert view.dropped == 2
    live.start(main[2:])
    assert live.view(now=0).running == 2  # two slots: the rest waits, counted as left


def test_money_is_the_package_price_pro_rata_of_the_window_elapsed() -> None:
    live, _ = _live(price=300.0)
    view = live.view(now=7.2 * HOUR)  # 7.2 h of a 72 h window
    assert view.spent_usd == pytest.approx(30.0) and view.package_usd == 300.0
    assert "$30.00 of $300.00 spent" in view.line()
    assert live.view(now=100 * HOUR).spent_usd == pytest.approx(300.0)  # never past the price
    plan, runs, estimate = _plan_runs()
    unpriced = Package(
        gpu="X", days=3, lots=1, cards_per_lot=1, price_per_lot_usd=None, price_source=None
    )
    blind = LiveCampaign(runs, project(plan, runs, estimate, 2), unpriced, 0.0, open_ended=False)
    assert "price unknown" in blind.view(now=HOUR).markdown()


def test_the_projected_finish_scales_with_the_measured_runs() -> None:
    live, runs = _live()
    first = live.view(now=0).finish_in_hours
    assert first is not None and first > 0
    projected = {p.run_id: p.hours for p in project(*_plan_runs(), slots=2).runs}
    run = runs[0]
    live.start([run.run_id])
    live.finish(_done(run.run_id, 2 * projected[run.run_id] * HOUR))  # twice as slow
    later = live.view(now=0).finish_in_hours
    assert later is not None and later > first
    for r in runs:
        live.finish(_done(r.run_id, 1.0))
    assert live.view(now=0).finish_in_hours is None
    assert live.view(now=0).percent == 100.0


def _plan_runs() -> tuple:
    data = copy.deepcopy(TINY_PLAN)
    data["budget"] = {"package": {"gpu": "RTX 4090", "lots": 1, "days": 3, "price_usd": 300.0}}
    plan = parse_plan(data)
    runs = planned_runs(plan, plan_hash(plan))
    return plan, runs, plan.budget.estimate


def test_with_looks_the_runs_left_are_an_upper_bound_until_none_are_left() -> None:
    live, runs = _live(looks=True)
    view = live.view(now=0)
    assert view.open_ended and view.counter() == f"[0/≤{len(runs)}]"
    assert "up to" in view.line() and "at most" in view.markdown()
    live.drop([r.run_id for r in runs])
    assert not live.view(now=0).open_ended


@pytest.mark.parametrize("fraction", [0.0, 0.53, 1.0])
def test_the_description_draws_a_bar_of_the_runs_finished(fraction: float) -> None:
    """Prefect 3.9 shows a progress artifact's value as text only: the description carries a
    drawn bar (a PNG `data:` URI, which the UI renders), filled to the share finished."""
    import base64
    import io
    import re

    from PIL import Image

    from ablations.campaign.live import BAR_DONE, BAR_LEFT, BAR_WIDTH, bar_png_uri

    live, runs = _live()
    done = round(fraction * len(runs))
    for run in runs[:done]:
        live.start([run.run_id])
        live.finish(_done(run.run_id, 1.0))
    markdown = live.view(now=0).markdown()
    found = re.search(
        r"!\[(\d+)% of the runs finished\]\(data:image/png;base64,([^)]+)\)", markdown
    )
    assert found is not None and f"**{done} of {len(runs)} runs finished" in markdown
    assert markdown.index(found.group(0)) < markdown.index("| quantity |")  # the bar first
    with Image.open(io.BytesIO(base64.b64decode(found.group(2)))) as image:
        row = [image.getpixel((x, 8)) for x in range(1, BAR_WIDTH - 1)]
    filled = sum(pixel == BAR_DONE for pixel in row)
    assert filled == round(done / len(runs) * (BAR_WIDTH - 2))
    assert filled + sum(pixel == BAR_LEFT for pixel in row) == BAR_WIDTH - 2
    assert bar_png_uri(0.5) != bar_png_uri(0.6)
