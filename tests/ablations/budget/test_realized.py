"""`ablations.budget.realized`: what tests/ablations/budget/test_budget.py does not pin.

There: a full comparison (deviations, trimmed and pending runs, unplanned records, parts) and
two explanations through the markdown. Here: each branch of `explain`, the 20% boundary, the
comparison's own `why`, and the wall time when no record has both times.
"""

from __future__ import annotations

from typing import Any

import pytest

from ablations.budget.projection import PARTS, project
from ablations.budget.realized import EXPLAINED_ABOVE, explain, planned_vs_realized
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.run.records import RunRecord, Timings
from ablations.text.units import duration


def _hours(**parts: float) -> dict[str, float]:
    return {p: parts.get(p, 0.0) for p in PARTS}


def test_within_the_band_needs_no_explanation() -> None:
    planned = _hours(load=1.0, train=9.0)
    edge = 1 + EXPLAINED_ABOVE
    assert explain(planned, _hours(load=1.0, train=10 * edge - 1.0)) == ""
    assert explain(planned, _hours(load=1.0, train=10 * (2 - edge) - 1.0)) == ""
    assert explain(planned, _hours(load=1.0, train=10 * edge)) != ""  # beyond the band


def test_the_part_that_moved_most_is_named_with_its_ratio() -> None:
    planned = _hours(load=1.0, train=4.0, evaluate=1.0)
    assert explain(planned, _hours(load=3.0, train=4.5, evaluate=1.0)) == "load 3.0x the estimate"
    shorter = explain(planned, _hours(load=1.0, train=1.0, evaluate=1.0))
    assert shorter == "train 0.25x the estimate"


def test_a_tiny_ratio_is_said_as_both_times() -> None:
    planned = _hours(train=10.0)
    realized = _hours(train=0.004)
    assert explain(planned, realized) == (
        f"train {duration(0.004 * 3600)} against {duration(10.0 * 3600)} estimated"
    )


def test_a_part_without_an_estimate_is_said_so() -> None:
    planned = _hours(train=1.0)
    assert explain(planned, _hours(train=1.0, export=0.5)) == (
        f"export {duration(0.5 * 3600)} not in the estimate"
    )


def test_nothing_planned() -> None:
    assert explain(_hours(), _hours(train=1.0)) == "no estimate to compare with"
    assert explain(_hours(), _hours()) == ""


def _record(run_id: str, **kw: Any) -> RunRecord:
    return RunRecord.model_validate(
        {"run_id": run_id, "variant": "control", "seed": 0, "category": "essential"}
        | {"phase": "main", "status": "accepted"}
        | kw
    )


def test_the_comparisons_why_and_a_wall_time_only_from_both_ends(
    demo_data: dict[str, Any],
) -> None:
    plan = parse_plan(demo_data)
    runs = planned_runs(plan, plan_hash(plan))
    registered = project(plan, runs, plan.budget.estimate, 1)
    first = registered.runs[0]
    doubled = {p: 2 * first.parts[p] for p in PARTS}
    records = [
        _record(first.run_id, timings=Timings(**doubled), started_at=100.0),  # no end
        _record("unplanned", timings=Timings(train=0), ended_at=200.0),  # no start
    ]
    pvr = planned_vs_realized(registered, records)
    assert pvr.realized_wall_hours is None
    assert pvr.realized_busy_hours == pytest.approx(2 * first.hours)
    moved = max(PARTS, key=lambda p: first.parts[p])
    assert pvr.why == f"{moved} 2.0x the estimate" == pvr.runs[0].why
    assert pvr.compared_planned_hours == pytest.approx(first.hours)
    assert pvr.unplanned == ["unplanned"] and pvr.decisions == []
    statuses = {r.status for r in pvr.runs[1:]}
    assert statuses == {"pending"}  # nothing trimmed was named


def test_no_records_compare_nothing() -> None:
    from tests.ablations.analysis.synthetic import PLAN

    plan = parse_plan(PLAN)
    registered = project(plan, planned_runs(plan, plan_hash(plan)), plan.budget.estimate, 2)
    pvr = planned_vs_realized(registered, [])
    assert pvr.realized_busy_hours == 0.0 and pvr.realized_wall_hours is None
    assert pvr.compared_planned_hours == 0.0
    assert pvr.unspent_planned_hours == pytest.approx(registered.busy_hours)
    assert all(p.planned_hours == 0.0 == p.realized_hours for p in pvr.parts)
    assert pvr.why == ""


def test_trimmed_records_count_as_planned_not_run_and_the_gate_wait_is_apart() -> None:
    from ablations.budget.markdown import planned_vs_realized_markdown
    from tests.ablations.analysis.synthetic import PLAN

    plan = parse_plan(PLAN)
    registered = project(plan, planned_runs(plan, plan_hash(plan)), plan.budget.estimate, 2)
    pilot = next(r for r in registered.runs if r.phase == "pilot")
    main = [r for r in registered.runs if r.phase == "main"]
    trimmed, spared = main[:3], main[3:5]
    records = [
        _record(pilot.run_id, phase="pilot", timings=Timings(train=60.0)).model_copy(
            update={"started_at": 0.0, "ended_at": 60.0}
        ),
        # What the gate writes for a dropped run: a record, status trimmed, no time at all.
        *(_record(r.run_id, status="trimmed") for r in trimmed),
        _record(main[5].run_id, timings=Timings(train=60.0), started_at=660.0, ended_at=720.0),
    ]
    pvr = planned_vs_realized(
        registered, records, unneeded=[r.run_id for r in spared], gate_decided_at=660.0
    )
    by_status = pvr.unspent_by_status()
    assert by_status["trimmed"] == (3, pytest.approx(sum(r.hours for r in trimmed)))
    assert by_status["unneeded"] == (2, pytest.approx(sum(r.hours for r in spared)))
    assert pvr.unplanned == []  # a trimmed record is a planned run, not an unplanned one
    assert pvr.gate_wait_hours == pytest.approx(600 / 3600)
    assert pvr.realized_wall_hours == pytest.approx(720 / 3600)
    text = planned_vs_realized_markdown(pvr)
    assert f"{duration(sum(r.hours for r in trimmed) * 3600)} trimmed (3 runs)" in text
    assert "unneeded (2 runs)" in text
    assert (
        f"wall {duration(720)} from the first start to the last end, of which the gate's wait "
        f"(last pilot end to the decision) {duration(600)}: {duration(120)} without it." in text
    )
