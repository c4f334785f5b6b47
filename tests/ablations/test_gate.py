"""Each gate branch from crafted pilot records."""

from __future__ import annotations

from typing import Any

from ablations.gate import apply_answer, auto_decision
from ablations.plan import Plan, parse_plan, plan_hash
from ablations.records import PreflightReport, RunRecord, Stop, Timings
from ablations.variants import PlannedRun, planned_runs

PASSED = PreflightReport(passed=True)


def _setup(data: dict[str, Any]) -> tuple[Plan, list[PlannedRun], list[PlannedRun]]:
    plan = parse_plan(data)
    runs = planned_runs(plan, plan_hash(plan))
    return plan, [r for r in runs if r.phase == "pilot"], [r for r in runs if r.phase == "main"]


def _record(
    run: PlannedRun,
    status: str = "accepted",
    accuracy: float = 0.95,
    step_seconds: float = 0.01,
    **extra: Any,
) -> RunRecord:
    return RunRecord(
        run_id=run.run_id,
        variant=run.variant,
        seed=run.seed,
        category=run.category,
        phase=run.phase,
        status=status,
        metrics={"accuracy": accuracy},  # type: ignore[arg-type]
        steps_done=run.steps,
        evaluations=[{"step": run.steps, "accuracy": accuracy}],
        timings=Timings(load=1.0, train=step_seconds * run.steps, evaluate=0.1),
        **extra,
    )


def test_continue_when_healthy_and_fitting(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    decision = auto_decision(plan, [_record(r) for r in pilot], PASSED, main, slots=1)
    assert decision.decision == "continue" and decision.drop == []
    assert decision.numbers["projected_hours"] < decision.numbers["available_hours"]


def test_reframe_when_preflight_failed(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    failed = PreflightReport(passed=False, data_problems=["disjoint_ids: overlap ids [3]"])
    decision = auto_decision(plan, [_record(r) for r in pilot], failed, main, slots=1)
    assert decision.decision == "reframe" and "disjoint_ids" in decision.reason


def test_reframe_when_control_stopped_failed_or_below(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    control = next(r for r in pilot if r.variant == "control")
    others = [_record(r) for r in pilot if r.variant != "control"]
    stop = Stop(rule="non_finite_loss", message="loss is nan", step=12)
    cases = {
        "stopped": _record(control, "stopped", stop=stop),
        "failed": _record(control, "failed"),
        "threshold": _record(control, "rejected", accuracy=0.5),
    }
    for fragment, record in cases.items():
        decision = auto_decision(plan, [record, *others], PASSED, main, slots=1)
        assert decision.decision == "reframe", fragment
        assert fragment in decision.reason


def test_trigger_not_registered_does_not_reframe(demo_data: dict[str, Any]) -> None:
    demo_data["gate"]["reframe_on"] = ["preflight_failed"]
    plan, pilot, main = _setup(demo_data)
    records = [
        _record(r, "rejected", accuracy=0.5) if r.variant == "control" else _record(r)
        for r in pilot
    ]
    assert auto_decision(plan, records, PASSED, main, slots=1).decision == "continue"


def test_trim_runs_the_pilot_stopped(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    stop = Stop(rule="quality", message="below threshold", step=100, value=0.2)
    records = [
        _record(r, "stopped", stop=stop) if r.variant == "width=16" else _record(r) for r in pilot
    ]
    decision = auto_decision(plan, records, PASSED, main, slots=1)
    assert decision.decision == "trim"
    assert set(decision.drop) == {r.run_id for r in main if r.variant == "width=16"}


def test_trim_lowest_categories_when_the_window_is_short(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    # Available: 72 h x (1 - 0.15) - 2 h prep = 59.2 h. At 40 s/step a 300-step main run takes
    # ~3.3 h: 18 runs (60 h) overrun, 15 without the exploratory ones (50 h) fit.
    records = [_record(r, step_seconds=40.0) for r in pilot]
    decision = auto_decision(plan, records, PASSED, main, slots=1)
    assert {r.category for r in main if r.run_id in decision.drop} == {"exploratory"}
    # At 50 s/step (~4.2 h a run) the useful ones must go too: 9 essential runs take 37.5 h.
    records = [_record(r, step_seconds=50.0) for r in pilot]
    decision = auto_decision(plan, records, PASSED, main, slots=1)
    assert decision.decision == "trim"
    dropped = {r.category for r in main if r.run_id in decision.drop}
    kept = {r.category for r in main if r.run_id not in decision.drop}
    assert dropped == {"exploratory", "useful"} and kept == {"essential"}
    assert decision.numbers["projected_hours_after_trim"] <= decision.numbers["available_hours"]


def test_reframe_when_even_essentials_do_not_fit(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    records = [_record(r, step_seconds=400.0) for r in pilot]
    decision = auto_decision(plan, records, PASSED, main, slots=1)
    assert decision.decision == "reframe" and "even after trimming" in decision.reason


def test_a_person_can_only_drop_registered_runs(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    recommendation = auto_decision(plan, [_record(r) for r in pilot], PASSED, main, slots=1)
    answer = apply_answer(
        recommendation, "trim", ["depth=1", main[0].run_id, "new-run"], "enough", main
    )
    expected = {r.run_id for r in main if r.variant == "depth=1"} | {main[0].run_id}
    assert set(answer.drop) == expected and answer.source == "ui"
    assert "new-run" in answer.reason
    assert apply_answer(recommendation, "continue", ["depth=1"], "", main).drop == []
