from __future__ import annotations

from typing import Any

from ablations.campaign.scheduling import longest_first
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.run.records import RunRecord, Timings


def test_longest_measured_variants_go_first_and_ties_keep_plan_order(
    demo_data: dict[str, Any],
) -> None:
    plan = parse_plan(demo_data)
    main = [r for r in planned_runs(plan, plan_hash(plan)) if r.phase == "main"]
    pilot = [
        RunRecord(
            run_id=f"p-{v}",
            variant=v,
            seed=0,
            category="essential",
            phase="pilot",
            status="accepted",
            steps_done=100,
            timings=Timings(train=seconds),
        )
        for v, seconds in (("control", 1.0), ("width=16", 0.5), ("width=128", 4.0))
    ]
    ordered = longest_first(main, pilot)
    assert [r.variant for r in ordered[:3]] == ["width=128"] * 3
    assert [r.variant for r in ordered[-3:]] == ["width=16"] * 3
    # Unmeasured variants weigh the median (the control's 0.01 s/step) times the steps they
    # train: a run resumed from its pilot has fewer left, so it goes after; else plan order.
    middle = [r.run_id for r in ordered[3:-3]]
    rest = [r for r in main if r.variant not in ("width=128", "width=16")]
    assert {r.start_step for r in rest} == {0, plan.pilot_steps}  # both kinds are there
    assert middle == [r.run_id for r in rest if not r.start_step] + [
        r.run_id for r in rest if r.start_step
    ]
    assert longest_first(main, []) == sorted(main, key=lambda r: -r.trained_steps)
