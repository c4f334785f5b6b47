"""Each stop rule fires on a run designed for it, with the right rule, step and message."""

from __future__ import annotations

import math

import pytest

from ablations.errors import WorkloadError
from ablations.plan.rules import NonFiniteLossRule, QualityRule, TruncationRule
from ablations.run.records import Stop
from ablations.run.workload import InputGroup, InputReport
from ablations.training.driver import execute
from ablations.training.stop_rules import non_finite_stop, quality_stop, truncation_stop
from tests.ablations.training.test_driver import digits_spec

DIVERGES = {"optimizer": "sgd", "lr": 1e20}
"""SGD at lr=1e20: the first update sends the weights to ~1e20, so step 2's loss is NaN."""


@pytest.mark.parametrize(("check_every", "steps_done"), [(1, 2), (10, 10), (7, 7)])
def test_a_diverging_run_stops_at_the_first_non_finite_loss(
    check_every: int, steps_done: int
) -> None:
    spec = digits_spec(
        params=DIVERGES, stop_rules={"non_finite_loss": {"check_every": check_every}}
    )
    record = execute(spec)

    assert record.status == "stopped"
    assert record.stop is not None
    assert (record.stop.rule, record.stop.step) == ("non_finite_loss", 2)
    assert record.stop.value is not None and math.isnan(record.stop.value)
    assert record.stop.message.startswith("training loss is nan at step 2")
    # Seen at the first check at or after step 2: the steps in between are the price of not
    # syncing the device every step.
    assert record.steps_done == steps_done


def test_with_the_rule_off_a_diverging_run_completes_and_is_rejected() -> None:
    spec = digits_spec(
        params=DIVERGES, steps=40, eval_every=20, stop_rules={"non_finite_loss": {"enabled": False}}
    )
    record = execute(spec)

    assert record.stop is None
    assert record.steps_done == 40
    assert record.status == "rejected"


def test_a_threshold_above_reachable_accuracy_stops_after_the_warm_up() -> None:
    spec = digits_spec(
        steps=100, eval_every=20, threshold=0.999, stop_rules={"quality": {"warmup_steps": 40}}
    )
    record = execute(spec)

    assert record.status == "stopped"
    assert record.stop is not None
    assert (record.stop.rule, record.stop.step) == ("quality", 40)
    assert record.stop.value == record.evaluations[-1]["accuracy"] < 0.999
    assert "is below the threshold 0.999 at step 40 (warm-up 40 steps)" in record.stop.message
    assert [e["step"] for e in record.evaluations] == [20, 40]  # step 20 was in the warm-up
    assert record.steps_done == 40


def test_the_quality_rule_understands_minimize() -> None:
    spec = digits_spec(
        steps=60,
        eval_every=30,
        metric="loss",
        direction="minimize",
        threshold=1e-6,
        stop_rules={"quality": {"warmup_steps": 0}},
    )
    record = execute(spec)

    assert record.stop is not None and record.stop.rule == "quality"
    assert record.stop.step == 30
    assert "is above the threshold 1e-06 at step 30" in record.stop.message


def test_truncated_essential_inputs_stop_the_run_before_the_first_step() -> None:
    record = execute(digits_spec(params={"keep_pixels": 32}))

    assert record.status == "stopped"
    assert record.stop is not None
    assert (record.stop.rule, record.stop.step, record.stop.value) == ("truncation", 0, 1.0)
    assert record.stop.message == (
        "essential input group 'heldout' is truncated: 364 of 364 inputs (100.0%, tolerated 0.0%)"
    )
    assert record.steps_done == 0 and record.timings.train == 0


def test_truncation_of_a_non_essential_group_does_not_stop() -> None:
    spec = digits_spec(
        params={"keep_pixels": 32},
        steps=20,
        eval_every=20,
        stop_rules={"truncation": {"essential": ["train"], "max_truncated_fraction": 1.0}},
    )
    record = execute(spec)

    assert record.stop is None
    assert record.steps_done == 20


def test_an_essential_group_the_workload_does_not_report_fails_the_run() -> None:
    record = execute(digits_spec(stop_rules={"truncation": {"essential": ["captions"]}}))

    assert record.status == "failed"
    assert record.error is not None and record.error.type == "WorkloadError"
    assert "['captions']" in record.error.message and "['heldout', 'train']" in record.error.message


def test_non_finite_stop_names_the_first_bad_step() -> None:
    rule = NonFiniteLossRule(check_every=4)
    assert non_finite_stop(rule, [1.0, 0.5, 0.25, 0.1], first_step=5, checked_at=8) is None
    stop = non_finite_stop(rule, [1.0, math.inf, math.nan, 0.1], first_step=5, checked_at=8)
    assert stop is not None and (stop.step, stop.value) == (6, math.inf)
    assert non_finite_stop(NonFiniteLossRule(enabled=False), [math.nan], 1, 1) is None


def test_quality_stop_respects_the_warm_up_and_the_threshold() -> None:
    rule = QualityRule(warmup_steps=100)

    def check(value: float, step: int) -> Stop | None:
        metrics = {"accuracy": value}
        return quality_stop(
            rule, metrics, metric="accuracy", direction="maximize", threshold=0.9, step=step
        )

    assert check(0.1, step=99) is None  # in the warm-up
    assert check(0.9, step=100) is None  # meets the threshold exactly
    stop = check(math.nan, step=100)
    assert stop is not None and (stop.rule, stop.step) == ("quality", 100)


def test_truncation_stop_tolerates_the_registered_fraction() -> None:
    report = InputReport({"heldout": InputGroup(seen=100, truncated=5)})
    assert truncation_stop(TruncationRule(max_truncated_fraction=0.05), report, 0) is None
    stop = truncation_stop(TruncationRule(max_truncated_fraction=0.04), report, 0)
    assert stop is not None and stop.value == 0.05
    with pytest.raises(WorkloadError, match="names \\['text'\\]"):
        truncation_stop(TruncationRule(essential=["text"]), report, 0)
