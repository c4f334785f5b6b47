"""Losses reach the host without the hot path waiting for the device.

On a card each window's copy is marked by a CUDA event the loop only queries; on CPU here a
stand-in marker arrives only after a few queries (a device a few steps behind the host), and
counts every time the loop had to wait for one that had not arrived."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from ablations.training import driver
from ablations.training.driver import execute, open_run
from ablations.training.losses import LossReadback
from tests.ablations.training.test_driver import digits_spec, losses_of
from tests.ablations.training.test_stop_rules import DIVERGES


class LaggingDevice:
    """Makes markers that arrive once `lag` more windows were sent after theirs (a device
    `lag` windows behind the host); `waits` counts blocking waits on one that had not arrived
    yet (what a `.item()` in the hot path would be)."""

    def __init__(self, lag: int) -> None:
        self.lag, self.waits, self.sent = lag, 0, 0

    def __call__(self) -> Any:
        device = self
        device.sent += 1

        class Marker:
            at, done = device.sent, False

            def record(self) -> None:
                pass

            def query(self) -> bool:
                self.done = self.done or device.sent >= self.at + device.lag
                return self.done

            def synchronize(self) -> None:
                if not self.query():
                    device.waits += 1
                self.done = True

        return Marker()


def test_the_loop_waits_only_where_it_needs_every_loss() -> None:
    """100 steps, a window every 10, evaluations at 50 and 100: two waits, not ten."""
    spec = digits_spec(
        steps=100, eval_every=50, stop_rules={"non_finite_loss": {"check_every": 10}}
    )
    lagging = LaggingDevice(lag=1)
    loop = open_run(spec)
    loop.losses = LossReadback(marker=lagging)
    assert loop.prepare() is None
    assert loop.advance(50) is None
    assert loop._evaluate(50) is None
    assert loop.advance(100) is None
    assert lagging.waits == 2  # the windows ending at the evaluations' steps
    recorded = np.array(loop.history.losses)
    assert recorded.tobytes() == np.array(losses_of(spec)).tobytes()  # bitwise, all 100


@pytest.mark.parametrize("lag", [0, 1, 4])
def test_a_nan_seen_late_still_names_its_step(lag: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The NaN of step 2 arrives `lag` steps after its window was sent: the stop names step 2,
    and the steps trained meanwhile are recorded, as the run's."""
    monkeypatch.setattr(driver, "LossReadback", lambda: LossReadback(LaggingDevice(lag)))
    record = execute(
        digits_spec(params=DIVERGES, stop_rules={"non_finite_loss": {"check_every": 1}})
    )
    assert record.status == "stopped" and record.stop is not None
    assert (record.stop.rule, record.stop.step) == ("non_finite_loss", 2)
    assert record.stop.value is not None and math.isnan(record.stop.value)
    assert record.steps_done == 2 + lag
    assert f"seen after step {2 + lag}" in record.stop.message


def test_on_a_cpu_windows_arrive_as_they_are_sent() -> None:
    readback = LossReadback()
    for step in range(1, 4):
        readback.add(step, torch.tensor(float(step)))
    readback.send()
    assert not readback.in_flight or readback.arrived() == [(1, [1.0, 2.0, 3.0])]
    readback.add(4, torch.tensor(float("nan")))
    first, values = readback.drain()[0]
    assert first == 4 and math.isnan(values[0]) and not readback.in_flight
