"""The interval policy: fixed steps or seconds, and `auto` from the measured cost."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ablations.checkpoint import CheckpointManager, IntervalPolicy, overhead, young_daly
from ablations.checkpoint.interval import BOOTSTRAP_STEPS
from ablations.plan.infrastructure import CheckpointSection
from ablations.run.records import RunSpec
from tests.ablations.checkpoint.conftest import train


@given(cost=st.floats(1e-3, 600), mtbf=st.floats(60, 1e6), max_loss=st.floats(1, 1e5))
def test_young_daly_is_the_capped_optimum(cost: float, mtbf: float, max_loss: float) -> None:
    tau = young_daly(cost, mtbf, max_loss)
    assert tau <= max_loss
    optimum = math.sqrt(2 * cost * mtbf)
    if optimum <= max_loss:  # uncapped: no nearby interval has a lower expected overhead
        assert tau == pytest.approx(optimum)
        for other in (tau * 0.9, tau * 1.1):
            assert overhead(cost, tau, mtbf) <= overhead(cost, other, mtbf)


def test_fixed_steps_and_seconds() -> None:
    steps = IntervalPolicy(CheckpointSection(interval={"steps": 4}))
    assert [s for s in range(1, 13) if steps.due(s, s * 1.0)] == [4, 8, 12]
    seconds = IntervalPolicy(CheckpointSection(interval={"seconds": 2.5}))
    due = []
    for step in range(1, 11):
        if seconds.due(step, step * 1.0):
            due.append(step)
            seconds.saved(step, step * 1.0)
    assert due == [3, 6, 9]


def test_auto_bootstraps_then_converts_tau_to_steps_and_retunes() -> None:
    section = CheckpointSection(mtbf_hours=4.0, max_loss_minutes=10.0)
    policy = IntervalPolicy(section)
    step_seconds = 0.5
    first = next(s for s in range(1, 100) if policy.due(s, s * step_seconds))
    assert first == BOOTSTRAP_STEPS
    policy.saved(first, first * step_seconds)
    assert not policy.due(first + 50, (first + 50) * step_seconds)  # cost not known yet
    policy.measured(2.0)  # C = 2 s: tau = sqrt(2 * 2 * 14400) = 240 s = 480 steps
    assert policy.tau == pytest.approx(240.0)
    assert policy.interval_steps == 480
    assert policy.expected_overhead == pytest.approx(2 / 240 + 240 / (2 * 14400))
    assert not policy.due(first + 479, 0) and policy.due(first + 480, 0)
    policy.measured(2.2)  # within noise: unchanged
    assert policy.cost == 2.0
    policy.measured(200.0)  # a much slower store: capped by the tolerable loss L
    assert policy.tau == 600.0 and policy.interval_steps == 1200


def test_auto_records_cost_interval_and_overhead(spec_factory: Callable[..., RunSpec]) -> None:
    spec = spec_factory(mtbf_hours=4.0)
    manager = CheckpointManager(spec)
    train(spec, manager, 30)
    summary = manager.close()
    assert summary.saves == 1  # the bootstrap; tau for a 4 h MTBF is far beyond 30 steps
    assert summary.cost_seconds is not None and 0 < summary.cost_seconds < 30
    tau = math.sqrt(2 * summary.cost_seconds * 4 * 3600)
    assert summary.interval_seconds == pytest.approx(tau)
    assert summary.interval_steps == round(tau / 0.01)  # the test loop's clock: 0.01 s a step
    assert summary.expected_overhead == pytest.approx(overhead(summary.cost_seconds, tau, 14400))
