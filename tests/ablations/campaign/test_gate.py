"""Each gate branch from crafted pilot records."""

from __future__ import annotations

from typing import Any

from ablations.campaign.gate import apply_answer, auto_decision
from ablations.plan.model import Plan, parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.plan.variants import PlannedRun
from ablations.run.records import PreflightReport, Rejection, RunError, RunRecord, Stop, Timings

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


def test_fix_not_reframe_when_preflight_found_a_defect(demo_data: dict[str, Any]) -> None:
    demo_data["gate"]["reframe_on"] = ["preflight_failed"]  # an old plan's trigger stays valid
    plan, _, main = _setup(demo_data)
    data = PreflightReport(passed=False, data_problems=["disjoint_ids: overlap ids [3]"])
    restart = PreflightReport(
        passed=False,
        restart=Stop(rule="restart", step=2, message="no usable restart: losses differ at 3"),
    )
    for report, defect in (
        (data, "data check: disjoint_ids: overlap ids [3]; fix the data"),
        (restart, "restart check: the run does not resume exactly at step 2: "),
    ):
        decision = auto_decision(plan, [], report, main, slots=1)
        assert decision.decision == "fix" and decision.drop == []
        assert defect in decision.reason, decision.reason
    # the check's own message says what to fix (an adapter's user writes no state_dict)
    assert decision.reason.endswith("losses differ at 3"), decision.reason
    demo_data["gate"].pop("reframe_on")
    plan, _, _ = _setup(demo_data)
    assert auto_decision(plan, [], data, main, slots=1).decision == "fix"


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


def test_fix_not_reframe_when_the_code_reported_no_metric(demo_data: dict[str, Any]) -> None:
    """A control that failed for reporting no value of the metric is a mistake of the code or
    the plan (a command evaluating only every eval_every steps in a shorter pilot), not an
    answer to the question: fix, never reframe."""
    plan, pilot, main = _setup(demo_data)
    control = next(r for r in pilot if r.variant == "control")
    others = [_record(r) for r in pilot if r.variant != "control"]
    message = "the training code reported no 'accuracy' by step 30"
    missing = RunError(type="MissingMetric", message=message)
    record = _record(control, "failed", error=missing)
    decision = auto_decision(plan, [record, *others], PASSED, main, slots=1)
    assert decision.decision == "fix", decision
    assert f"pilot run {control.run_id}: {message}; fix the training code's" in decision.reason
    crashed = _record(control, "failed", error=RunError(type="ValueError", message="bad"))
    assert auto_decision(plan, [crashed, *others], PASSED, main, slots=1).decision == "reframe"


def test_trigger_not_registered_does_not_reframe(demo_data: dict[str, Any]) -> None:
    demo_data["gate"]["reframe_on"] = ["preflight_failed"]
    plan, pilot, main = _setup(demo_data)
    records = [
        _record(r, "rejected", accuracy=0.5) if r.variant == "control" else _record(r)
        for r in pilot
    ]
    assert auto_decision(plan, records, PASSED, main, slots=1).decision == "continue"


STOP = Stop(rule="quality", message="below threshold", step=100, value=0.2)


def _stopped(pilot: list[PlannedRun], variant: str, seeds: set[int]) -> list[RunRecord]:
    return [
        _record(r, "stopped", stop=STOP) if r.variant == variant and r.seed in seeds else _record(r)
        for r in pilot
    ]


def test_trim_runs_the_pilot_stopped(demo_data: dict[str, Any]) -> None:
    demo_data["pilot"]["variants"] = ["width=16", "dropout=0.3"]  # dropout is useful
    plan, pilot, main = _setup(demo_data)
    decision = auto_decision(plan, _stopped(pilot, "dropout=0.3", {0}), PASSED, main, slots=1)
    assert decision.decision == "trim"
    assert set(decision.drop) == {r.run_id for r in main if r.variant == "dropout=0.3"}


def test_an_essential_variant_stopped_on_one_pilot_seed_is_kept(demo_data: dict[str, Any]) -> None:
    demo_data["gate"]["trim_essential"] = True
    for seeds in ([0], [0, 1]):  # one pilot seed; or one stopped of two
        demo_data["pilot"]["seeds"] = seeds
        plan, pilot, main = _setup(demo_data)
        decision = auto_decision(plan, _stopped(pilot, "width=16", {0}), PASSED, main, slots=1)
        assert decision.decision == "continue" and decision.drop == [], seeds
        assert f"kept essential width=16 (stopped on 1/{len(seeds)} pilot seeds" in decision.reason
        assert "drop it in the UI gate" in decision.reason


def test_an_essential_variant_is_trimmed_only_when_every_seed_stopped_and_allowed(
    demo_data: dict[str, Any],
) -> None:
    demo_data["pilot"]["seeds"] = [0, 1]
    plan, pilot, main = _setup(demo_data)
    records = _stopped(pilot, "width=16", {0, 1})
    kept = auto_decision(plan, records, PASSED, main, slots=1)  # trim_essential off: kept
    assert kept.decision == "continue" and "gate.trim_essential is off" in kept.reason

    demo_data["gate"]["trim_essential"] = True
    plan, pilot, main = _setup(demo_data)
    trimmed = auto_decision(plan, records, PASSED, main, slots=1)
    assert trimmed.decision == "trim" and "stopped in the pilot: width=16" in trimmed.reason
    assert set(trimmed.drop) == {r.run_id for r in main if r.variant == "width=16"}


def test_trim_lowest_categories_when_the_window_is_short(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    # Available: 72 h x (1 - 0.15) - 2 h prep = 59.2 h. The main runs train 5100 steps (18 x
    # 300, less the 3 x 100 their pilots trained): at 43 s/step 60.9 h overrun, and 4200
    # without the exploratory ones (50.2 h) fit.
    records = [_record(r, step_seconds=43.0) for r in pilot]
    decision = auto_decision(plan, records, PASSED, main, slots=1)
    assert {r.category for r in main if r.run_id in decision.drop} == {"exploratory"}
    # At 55 s/step the useful ones must go too (64.2 h); the essential 2400 steps take 36.7 h.
    records = [_record(r, step_seconds=55.0) for r in pilot]
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
    one = next(r for r in main if r.variant == "width=16")
    answer = apply_answer(recommendation, "trim", ["depth=1", one.run_id, "new-run"], "", main)
    expected = {r.run_id for r in main if r.variant == "depth=1"} | {one.run_id}
    assert set(answer.drop) == expected and answer.source == "ui"
    assert "new-run" in answer.reason
    assert apply_answer(recommendation, "continue", ["depth=1"], "", main).drop == []


def test_the_control_is_never_dropped(demo_data: dict[str, Any]) -> None:
    """The UI's form refuses it first (tests/flows/test_ui.py); the answer keeps it too."""
    plan, pilot, main = _setup(demo_data)
    recommendation = auto_decision(plan, [_record(r) for r in pilot], PASSED, main, slots=1)
    control_run = next(r for r in main if r.variant == "control")
    answer = apply_answer(recommendation, "trim", ["control", control_run.run_id], "", main)
    assert answer.drop == []
    assert "kept the control" in answer.reason


def _rejected(pilot: list[PlannedRun], variant: str, seeds: set[int]) -> list[RunRecord]:
    """Pilot records where `variant` completed its pilot steps below the threshold."""
    out = []
    for r in pilot:
        if r.variant == variant and r.seed in seeds:
            below = Rejection(metric="accuracy", value=0.62, threshold=0.85, step=r.steps)
            out.append(_record(r, "rejected", accuracy=0.62, rejection=below))
        else:
            out.append(_record(r))
    return out


def test_a_variant_whose_pilot_was_rejected_is_trimmed(demo_data: dict[str, Any]) -> None:
    demo_data["pilot"]["variants"] = ["width=16", "dropout=0.3"]  # dropout is useful
    plan, pilot, main = _setup(demo_data)
    decision = auto_decision(plan, _rejected(pilot, "dropout=0.3", {0}), PASSED, main, slots=1)
    assert decision.decision == "trim"
    assert set(decision.drop) == {r.run_id for r in main if r.variant == "dropout=0.3"}
    assert "fails threshold in the pilot: dropout=0.3 (accuracy 0.62" in decision.reason
    # the registered policy may keep it instead
    demo_data["gate"]["trim_rejected"] = False
    plan, pilot, main = _setup(demo_data)
    kept = auto_decision(plan, _rejected(pilot, "dropout=0.3", {0}), PASSED, main, slots=1)
    assert kept.decision == "continue" and kept.drop == []


def test_an_essential_variant_rejected_on_one_pilot_seed_is_kept(demo_data: dict[str, Any]) -> None:
    plan, pilot, main = _setup(demo_data)
    decision = auto_decision(plan, _rejected(pilot, "width=16", {0}), PASSED, main, slots=1)
    assert decision.decision == "continue" and decision.drop == []
    assert "kept essential width=16 (rejected on 1/1 pilot seeds" in decision.reason


def test_the_gate_states_the_power_its_max_buys(demo_data: dict[str, Any]) -> None:
    demo_data["seeds"] = {"start": 3, "max": 12, "looks": [3, 5, 8, 12], "expected_sd": 0.01}
    plan, pilot, main = _setup(demo_data)
    decision = auto_decision(plan, [_record(r) for r in pilot], PASSED, main, slots=1)
    assert decision.decision == "continue" and decision.sizing is not None
    power = decision.sizing.power
    assert power is not None and 0.5 < power < 0.8  # 12 seeds at a spread of one useful effect
    suggested = decision.sizing.suggested_max
    assert suggested is not None and suggested > 12
    assert f"power at 2x the useful effect {power:.0%} with max 12" in decision.reason
    assert f"(80% needs max {suggested})" in decision.reason


def test_a_pilot_judged_before_its_last_step_is_named_in_the_reason(
    demo_data: dict[str, Any],
) -> None:
    """A program that ignores ABLATE_UNTIL evaluates every eval_every steps only: its pilot
    trains to its last step but its value is an older evaluation's. Whatever the decision,
    its reason says which run was judged where; a run evaluated at its end is not named."""
    plan, pilot, main = _setup(demo_data)
    control = next(r for r in pilot if r.variant == "control")
    others = [_record(r) for r in pilot if r.variant != "control"]
    early = _record(control).model_copy(
        update={"evaluations": [{"step": 10, "accuracy": 0.9}, {"step": 20, "accuracy": 0.95}]}
    )
    assert early.steps_done > 20
    named = f"pilot of control seed {control.seed} judged at step 20 of {control.steps}"
    decision = auto_decision(plan, [early, *others], PASSED, main, slots=1)
    assert decision.decision == "continue"
    assert f"{named} (its last evaluation)" in decision.reason, decision.reason
    assert "ABLATE_UNTIL" in decision.reason
    below = early.model_copy(update={"status": "rejected", "metrics": {"accuracy": 0.5}})
    reframed = auto_decision(plan, [below, *others], PASSED, main, slots=1)
    assert reframed.decision == "reframe" and named in reframed.reason, reframed.reason
    on_time = auto_decision(plan, [_record(r) for r in pilot], PASSED, main, slots=1)
    assert "judged at step" not in on_time.reason
    stopped = early.model_copy(
        update={"status": "stopped", "stop": Stop(rule="quality", step=20, message="below")}
    )
    assert "judged at step" not in auto_decision(plan, [stopped], PASSED, main, slots=1).reason
