"""Verdicts from crafted records (no training): one record set per verdict, and the rule table."""

from __future__ import annotations

from typing import Any

import pytest

from ablations.analysis.paired import paired_effects
from ablations.analysis.verdicts import VERDICTS, interval_verdict, runs_verdict
from ablations.plan.experiment import MetricSection
from ablations.run.records import Rejection, RunError, RunRecord, Stop

METRIC = MetricSection(name="accuracy", threshold=0.85, useful_effect=0.01)
CONTROL = [0.90, 0.92, 0.91]


def rec(variant: str, seed: int, status: str = "accepted", **kw: Any) -> RunRecord:
    phase = kw.pop("phase", "main")
    fields: dict[str, Any] = {
        "run_id": f"{variant}-s{seed}-{phase}",
        "variant": variant,
        "seed": seed,
        "category": "essential",
        "phase": phase,
        "status": status,
        **kw,
    }
    return RunRecord.model_validate(fields)


def controls() -> list[RunRecord]:
    return [rec("control", s, metrics={"accuracy": v}) for s, v in enumerate(CONTROL)]


def stopped(rule: str, steps: list[int], message: str = "m") -> list[RunRecord]:
    return [
        rec("v", s, "stopped", stop=Stop(rule=rule, message=message, step=step))  # type: ignore[arg-type]
        for s, step in enumerate(steps)
    ]


def shifted(diffs: list[float]) -> list[RunRecord]:
    return [
        rec("v", s, metrics={"accuracy": c + d})
        for s, (c, d) in enumerate(zip(CONTROL, diffs, strict=True))
    ]


REJECTED = [
    rec(
        "v",
        s,
        "rejected",
        metrics={"accuracy": 0.8489},
        rejection=Rejection(metric="accuracy", value=0.8489, threshold=0.85, step=300),
    )
    for s in range(3)
]
FAILED = [
    rec("v", s, "failed", error=RunError(type="RuntimeError", message="out of memory"))
    for s in range(3)
]
TRIMMED = [rec("v", s, "trimmed") for s in range(3)]

CASES: list[tuple[str, list[RunRecord], str, str]] = [
    ("better", shifted([0.03, 0.04, 0.035]), "better", ""),
    ("worse", shifted([-0.05, -0.06, -0.055]), "worse", ""),
    ("equivalent", shifted([0.001, -0.002, 0.0]), "equivalent", ""),
    ("inconclusive", shifted([0.02, -0.01, 0.03]), "inconclusive", "crosses an edge"),
    (
        "diverges",
        stopped("non_finite_loss", [4, 6, 5], "loss is nan"),
        "diverges",
        "3/3 seeds stopped: non-finite loss at steps 4, 6, 5",
    ),
    (
        "truncated",
        stopped("truncation", [0, 0, 0]),
        "input truncated",
        "3/3 seeds stopped: input truncated at steps 0, 0, 0",
    ),
    (
        "quality",
        stopped("quality", [150, 150, 200]),
        "fails threshold",
        "3/3 seeds stopped: quality below the threshold at steps 150, 150, 200",
    ),
    (
        "rejected",
        REJECTED,
        "fails threshold",
        "3/3 seeds rejected: accuracy 0.8489 < threshold 0.85 at step 300",
    ),
    ("failed", FAILED, "failed", "3/3 seeds failed: RuntimeError: out of memory"),
    ("not run", TRIMMED, "not run", "trimmed by a person at the gate: too slow"),
]


@pytest.mark.parametrize(("name", "runs", "verdict", "note"), CASES, ids=[c[0] for c in CASES])
def test_each_verdict_from_a_crafted_record_set(
    name: str, runs: list[RunRecord], verdict: str, note: str
) -> None:
    (effect,) = paired_effects(
        [*controls(), *runs], METRIC, trimmed_source="ui", trimmed_reason="too slow"
    )
    assert effect.verdict == verdict
    assert note in effect.note
    assert effect.verdict in VERDICTS


def test_not_worse_comes_from_the_non_inferiority_rule() -> None:
    rule = METRIC.model_copy(update={"decision_rule": "non_inferiority"})
    (effect,) = paired_effects([*controls(), *shifted([-0.004, 0.0, -0.002])], rule)
    assert effect.verdict == "not worse"
    (same,) = paired_effects([*controls(), *shifted([-0.004, 0.0, -0.002])], METRIC)
    assert same.verdict == "equivalent"


def test_a_trimmed_variant_whose_pilot_was_stopped_gets_the_pilot_verdict() -> None:
    pilot = rec(
        "v", 0, "stopped", phase="pilot", stop=Stop(rule="non_finite_loss", message="m", step=7)
    )
    (effect,) = paired_effects(
        [*controls(), *TRIMMED, pilot], METRIC, trimmed_source="auto", trimmed_reason="stopped"
    )
    assert (effect.verdict, effect.from_pilot, effect.label) == (
        "diverges",
        True,
        "diverges in the pilot",
    )
    assert effect.note.startswith("pilot: 1/1 seeds stopped: non-finite loss at step 7")
    assert "trimmed by the gate's policy: stopped" in effect.note
    assert effect.runs == ["v-s0-pilot"]


def test_the_most_frequent_failure_wins_and_every_kind_is_counted() -> None:
    runs = [
        *stopped("non_finite_loss", [4]),
        rec("v", 1, "failed", error=RunError(type="OSError", message="disk")),
        rec("v", 2, "failed", error=RunError(type="OSError", message="disk")),
    ]
    verdict, note = runs_verdict(runs) or ("", "")
    assert verdict == "failed"
    assert note == "1/3 seeds stopped: non-finite loss at step 4; 2/3 seeds failed: OSError: disk"
    assert runs_verdict(shifted([0.0, 0.0, 0.0])) is None


@pytest.mark.parametrize(
    ("low", "high", "superiority", "non_inferiority", "equivalence"),
    [
        (0.01, 0.05, "better", "better", "better"),
        (-0.05, -0.01, "worse", "worse", "worse"),
        (-0.005, 0.009, "equivalent", "not worse", "equivalent"),
        (0.005, 0.03, "inconclusive", "not worse", "inconclusive"),
        (-0.02, 0.005, "inconclusive", "inconclusive", "inconclusive"),
    ],
)
def test_interval_verdicts_under_each_rule(
    low: float, high: float, superiority: str, non_inferiority: str, equivalence: str
) -> None:
    for rule, expected in (
        ("superiority", superiority),
        ("non_inferiority", non_inferiority),
        ("equivalence", equivalence),
    ):
        metric = METRIC.model_copy(update={"decision_rule": rule})
        assert interval_verdict(low, high, metric) == expected, rule
        flipped = metric.model_copy(update={"direction": "minimize"})
        assert interval_verdict(-high, -low, flipped) == expected, rule


def test_the_demo_keep_pixels_32_is_input_truncated_on_every_seed() -> None:
    # The demo's keep_pixels=32 runs for real (the truncation rule stops them before the
    # first step, so no training is needed); the control's records are crafted.
    from ablations.plan.io import load_plan
    from ablations.plan.model import plan_hash
    from ablations.plan.runs import planned_runs
    from ablations.run.records import RunSpec
    from ablations.training.driver import execute
    from tests.conftest import DEMO_PLAN

    plan = load_plan(DEMO_PLAN)
    # the first look's seeds: what the demo runs of a variant stopped there
    runs = [r for r in planned_runs(plan, plan_hash(plan)) if r.phase == "main" and r.look == 0]
    truncated = [
        execute(
            RunSpec.of(
                plan,
                "0" * 64,
                run_id=r.run_id,
                variant=r.variant,
                category=r.category,
                phase=r.phase,
                seed=r.seed,
                params=r.params,
                steps=r.steps,
                checkpoint=None,
            )
        )
        for r in runs
        if r.variant == "keep_pixels=32"
    ]
    control = [
        rec("control", r.seed, metrics={"accuracy": 0.98}) for r in runs if r.variant == "control"
    ]
    (effect,) = paired_effects([*control, *truncated], plan.metric)
    assert effect.variant == "keep_pixels=32"
    assert effect.verdict == "input truncated"
    assert effect.note.startswith("3/3 seeds stopped: input truncated at steps 0, 0, 0")
    assert sorted(effect.runs) == sorted(r.run_id for r in truncated)


def test_a_quality_stop_within_the_pilots_steps_says_so() -> None:
    """Issue 34: a main run stopped by the quality rule where its pilot was judged read like
    a final result. Within the pilot's steps it says it was stopped early."""
    from ablations.run.records import CheckpointSummary

    def stopped(step: int) -> RunRecord:
        return RunRecord(
            run_id=f"r{step}",
            variant="lr=1e-06",
            seed=0,
            category="essential",
            phase="main",
            status="stopped",
            stop=Stop(rule="quality", step=step, message="accuracy 0.1 below 0.5"),
            checkpoint=CheckpointSummary(pilot_step=50),
        )

    verdict, note = runs_verdict([stopped(50)]) or ("", "")
    assert verdict == "fails threshold"
    assert note == (
        "1/1 seeds stopped early (within the pilot's 50 steps, not a final result): "
        "quality below the threshold at step 50"
    )
    assert runs_verdict([stopped(250)]) == (
        "fails threshold",
        "1/1 seeds stopped: quality below the threshold at step 250",
    )
