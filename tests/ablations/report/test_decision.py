"""The decision sentence from crafted records: each rule answered, a failed control first,
a preflight defect named, hypotheses and next decisions listed per factor."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.plan.variants import PlannedRun
from ablations.report import ReportInputs, ReportRun, assemble_inputs, render_report
from ablations.report.decision import decision_reached
from ablations.run.records import Rejection, RunRecord, Stop
from tests.ablations.analysis.synthetic import PLAN

CONTROL = {0: 0.90, 1: 0.92, 2: 0.91}
# width=16 a little worse (not usefully), width=128 usefully better, depth=1 usefully worse;
# every spread alike and small, so three seeds decide even corrected across five variants.
DIFFS = {
    "width=16": [-0.003, -0.001, -0.002],
    "width=128": [0.034, 0.036, 0.035],
    "depth=1": [-0.054, -0.056, -0.055],
    "dropout=0.3": [0.001, -0.001, 0.0],
    "optimizer=sgd": [0.001, -0.001, 0.0],
}
STEP_SECONDS = {"width=16": 0.001, "width=128": 0.004, "control": 0.002}

Outcome = Callable[[PlannedRun], dict[str, Any] | None]


def accepted(run: PlannedRun) -> dict[str, Any]:
    value = CONTROL[run.seed] + (0.0 if run.variant == "control" else DIFFS[run.variant][run.seed])
    return {
        "status": "accepted",
        "metrics": {"accuracy": value},
        "step_seconds": STEP_SECONDS.get(run.variant, 0.003),
    }


def inputs(tmp_path: Path, outcome: Outcome = accepted, **plan_changes: Any) -> ReportInputs:
    gate = plan_changes.pop("_gate", ("continue", "the pilot was healthy"))
    data = copy.deepcopy(PLAN)
    for dotted, value in plan_changes.items():
        *parents, last = dotted.split("__")
        target = data
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    plan = parse_plan(data)
    runs = []
    for planned in planned_runs(plan, plan_hash(plan)):
        fields = outcome(planned) if planned.phase == "main" else accepted(planned)
        record = None
        if fields is not None:
            record = RunRecord(
                run_id=planned.run_id,
                variant=planned.variant,
                seed=planned.seed,
                category=planned.category,
                phase=planned.phase,
                steps_done=planned.steps,
                **fields,
            )
        runs.append(ReportRun(planned=planned, record=record))
    return assemble_inputs(
        tmp_path, plan, runs, gate_decision=gate[0], gate_reason=gate[1], gate_source="auto"
    )


def test_superiority_and_non_inferiority_answer_differently(tmp_path: Path) -> None:
    superiority = decision_reached(inputs(tmp_path))
    built = inputs(tmp_path, metric__decision_rule="non_inferiority")
    assert superiority.startswith("Adopt width=128: accuracy +0.0350 over 3 seeds")
    assert "at least the useful effect 0.01 better" in superiority

    non_inferiority = decision_reached(built)
    assert non_inferiority != superiority
    assert non_inferiority.startswith(
        "Adopt width=16, the cheapest not usefully worse than the control"
    )
    assert "its lower end above -0.01" in non_inferiority
    assert "cost 0.00100 against 0.00200 (s/step, measured)" in non_inferiority
    assert "Worse: depth=1." in non_inferiority
    # plain and short: the runs behind it are the report's table, not the sentence's
    for sentence in (superiority, non_inferiority):
        assert len(sentence) <= 300 and "`" not in sentence and "**" not in sentence
    named = [
        r.planned.run_id
        for r in built.runs
        if r.planned.variant in ("width=16", "control") and r.planned.phase == "main"
    ]
    assert not any(run_id in non_inferiority for run_id in named)
    markdown = render_report(built)
    evidence = markdown.split("Runs behind it, paired by seed:")[1].split("##")[0]
    assert all(run_id in evidence for run_id in named)


def test_declared_costs_override_measured_step_time(tmp_path: Path) -> None:
    levels = [{"value": 16, "cost": 5.0}, {"value": 128, "cost": 1.0}]
    sentence = decision_reached(
        inputs(
            tmp_path,
            metric__decision_rule="non_inferiority",
            factors__width={"category": "essential", "levels": levels},
            factors__dropout={"category": "useful", "levels": [{"value": 0.3, "cost": 6.0}]},
            factors__optimizer={"category": "useful", "levels": [{"value": "sgd", "cost": 7.0}]},
            control__cost=4.0,
        )
    )
    # width=128 is better (a candidate too) and declared cheapest; without a declared cost
    # for every candidate the measured step time would choose width=16.
    assert sentence.startswith("Adopt width=128, the cheapest not usefully worse")
    assert "cost 1.00 against 4.00 (declared cost)" in sentence


def test_equivalence_names_the_interchangeable_variants(tmp_path: Path) -> None:
    sentence = decision_reached(inputs(tmp_path, metric__decision_rule="equivalence"))
    assert sentence.startswith(
        "Interchangeable with the control within ±0.01: width=16, dropout=0.3, optimizer=sgd"
    )


def test_a_control_stopped_in_the_main_phase_is_the_headline(tmp_path: Path) -> None:
    def control_stopped(run: PlannedRun) -> dict[str, Any] | None:
        if run.variant == "control" and run.seed == 1:
            stop = Stop(rule="quality", message="accuracy 0.41 below the threshold 0.5", step=60)
            return {"status": "stopped", "stop": stop}
        return accepted(run)

    built = inputs(tmp_path, control_stopped)
    sentence = decision_reached(built)
    control_run = next(
        r.planned.run_id
        for r in built.runs
        if (r.planned.variant, r.planned.seed, r.planned.phase) == ("control", 1, "main")
    )
    assert sentence.startswith(
        "The control failed on 1/3 seeds: seed 1, stopped: quality at step 60: "
        "accuracy 0.41 below the threshold 0.5"
    )
    assert control_run not in sentence and len(sentence) <= 300  # its id: the report's table
    assert "Fix the control or the threshold" in sentence
    assert "Adopt" not in sentence


def test_a_preflight_defect_is_to_be_fixed_not_reframed(tmp_path: Path) -> None:
    reason = "preflight failed: the restart check diverged at step 2 (optimizer state not saved)"
    sentence = decision_reached(inputs(tmp_path, _gate=("fix", reason)))
    assert sentence.startswith("Fix the workload or its data before spending more")
    assert "optimizer state not saved" in sentence
    assert "Reframe" not in sentence


def test_a_rejected_run_shows_its_metric_and_threshold(tmp_path: Path) -> None:
    def one_rejected(run: PlannedRun) -> dict[str, Any] | None:
        if run.variant == "depth=1" and run.seed == 0:
            why = Rejection(metric="accuracy", value=0.4489, threshold=0.5, step=100)
            return {"status": "rejected", "metrics": {"accuracy": 0.4489}, "rejection": why}
        return accepted(run)

    markdown = render_report(inputs(tmp_path, one_rejected))
    assert "accuracy 0.4489 < threshold 0.5 at step 100" in markdown
    assert "1/3 seeds rejected: accuracy 0.4489 < threshold 0.5 at step 100" in markdown
    assert "acceptance check" not in markdown


def why(verdict: str) -> str:
    """A claim's note on the synthetic campaign's 3 seeds: what they rule out (issue 53)."""
    return (
        f"{verdict} at look 1 (3 seeds), none diverged: a failure mode in 63% or more of runs "
        "is excluded (95%)"
    )


@pytest.mark.parametrize("rule", ["superiority", "non_inferiority"])
def test_findings_list_hypothesis_levels_verdict_and_next_decision(
    tmp_path: Path, rule: str
) -> None:
    width = {
        "category": "essential",
        "levels": [16, 128],
        "hypothesis": "A narrower net is as accurate.",
        "next_decisions": {"better": "use width 128", "not worse": "use width 16"},
    }
    built = inputs(
        tmp_path,
        metric__decision_rule=rule,
        factors__width=width,
        campaign__hypothesis="Only depth matters.",
        campaign__next_decisions={"worse": "keep the control's value", "equivalent": "drop it"},
    )
    markdown = render_report(built)
    assert "**Hypothesis.** Only depth matters." in markdown
    assert "Hypothesis: A narrower net is as accurate." in markdown
    assert f"| 128 | width=128 | **better** | {why('better')} | use width 128 |" in markdown
    assert f"| 1 | depth=1 | **worse** | {why('worse')} | keep the control's value |" in markdown
    expected = "use width 16" if rule == "non_inferiority" else "drop it"  # campaign-wide
    verdict = "not worse" if rule == "non_inferiority" else "equivalent"
    assert f"| 16 | width=16 | **{verdict}** | {why(verdict)} | {expected} |" in markdown


def test_next_decisions_apply_to_the_level_the_verdict_is_about(tmp_path: Path) -> None:
    """Issue 34: a factor's `not worse: use width 16` was shown for width=128 too. A factor's
    next decisions are per level (`{value}` is the level's), and a level may override."""
    width = {
        "category": "essential",
        "levels": [16, {"value": 128, "next_decisions": {"better": "adopt 128 if it fits"}}],
        "next_decisions": {"not worse": "use width {value}", "better": "use width {value}"},
    }
    built = inputs(tmp_path, metric__decision_rule="non_inferiority", factors__width=width)
    markdown = render_report(built)
    assert f"| 16 | width=16 | **not worse** | {why('not worse')} | use width 16 |" in markdown
    assert f"| 128 | width=128 | **better** | {why('better')} | adopt 128 if it fits |" in markdown
    assert "use width 16 |" not in markdown.split("| 128 | width=128 |")[1].split("\n")[0]


def test_a_minimize_metric_is_described_by_its_own_end_of_the_interval(tmp_path: Path) -> None:
    """Issue 34: for a loss, "not usefully worse" is the upper end below +u, not the lower
    end above -u (the verdicts were right; the words were not)."""
    loss = {"name": "accuracy", "direction": "minimize", "threshold": 2.0, "useful_effect": 0.01}
    adopt = decision_reached(inputs(tmp_path, metric={**loss, "decision_rule": "non_inferiority"}))
    assert adopt.startswith("Adopt width=16,") and "its upper end below +0.01" in adopt

    def all_worse(run: PlannedRun) -> dict[str, Any]:
        fields = accepted(run)
        if run.variant != "control":  # a loss 0.05 higher: usefully worse everywhere
            fields["metrics"] = {"accuracy": CONTROL[run.seed] + 0.05 + 0.001 * run.seed}
        return fields

    keep = decision_reached(
        inputs(tmp_path, all_worse, metric={**loss, "decision_rule": "non_inferiority"})
    )
    assert keep.startswith("Keep the control")
    assert "no adjusted interval's upper end lies below +0.01" in keep
    assert "lower end" not in keep
