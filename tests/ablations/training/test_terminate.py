"""A SIGTERM mid-run (`ablations.process.preemption`): the run commits a checkpoint at its current
step and is recorded as interrupted; resumed, it ends bitwise equal to a run never stopped."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ablations.checkpoint import CheckpointManager
from ablations.process.preemption import TERMINATE, listen_for_sigterm
from ablations.run.records import RunRecord, RunSpec
from ablations.training.driver import execute
from ablations.workloads.digits import DigitsWorkload
from tests.ablations.training.test_pilot_prefix import _spec, _weights

SIGNAL_AT = 13  # between two evaluations (every 20) and far from a checkpoint (every 1000)


class SignalledDigits(DigitsWorkload):
    """Digits that sends this process a SIGTERM during step `SIGNAL_AT` (once per test)."""

    def train_step(self, step: int) -> Any:
        if step == SIGNAL_AT and not TERMINATE.requested:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().train_step(step)


@pytest.fixture
def sigterm_sets_the_request() -> Iterator[None]:
    previous = signal.getsignal(signal.SIGTERM)
    listen_for_sigterm()
    yield
    signal.signal(signal.SIGTERM, previous)
    TERMINATE.clear()


def _execute(spec: RunSpec) -> RunRecord:
    return execute(spec, CheckpointManager(spec))


@pytest.mark.slow  # three runs: straight through, stopped, resumed
@pytest.mark.usefixtures("sigterm_sets_the_request")
def test_sigterm_commits_the_current_step_and_the_resumed_run_is_bitwise_equal(
    tmp_path: Path,
) -> None:
    entry = f"{__name__}:SignalledDigits"
    straight = _execute(_spec(f"file://{tmp_path}/straight", tmp_path / "straight"))

    spec = _spec(f"file://{tmp_path}/ckpt", tmp_path / "out", entry=entry)
    stopped = _execute(spec)
    assert stopped.status == "failed" and stopped.lost and stopped.interrupted
    assert stopped.steps_done == SIGNAL_AT
    assert stopped.error is not None and stopped.error.message == (
        f"interrupted by SIGTERM at step {SIGNAL_AT}: its checkpoint at step {SIGNAL_AT} is "
        "committed; a rerun resumes from it"
    )
    assert stopped.checkpoint.uri is not None
    assert stopped.checkpoint.uri.endswith(f"step-{SIGNAL_AT:08d}")
    assert not (tmp_path / "out" / "models").exists()  # not finished: nothing exported

    TERMINATE.clear()
    resumed = _execute(spec)
    assert resumed.status == "accepted" and resumed.checkpoint.resumed_from_step == SIGNAL_AT
    assert resumed.metrics == straight.metrics
    assert resumed.evaluations == straight.evaluations
    expected, got = (
        _weights(tmp_path / "straight", spec.run_id),
        _weights(tmp_path / "out", spec.run_id),
    )
    assert all(torch.equal(expected[k], got[k]) for k in expected)


@pytest.mark.usefixtures("sigterm_sets_the_request")
def test_with_on_terminate_off_the_run_stops_without_saving_its_step(tmp_path: Path) -> None:
    spec = _spec(f"file://{tmp_path}/ckpt", tmp_path / "out", entry=f"{__name__}:SignalledDigits")
    assert spec.checkpoint is not None
    spec = spec.model_copy(
        update={"checkpoint": spec.checkpoint.model_copy(update={"on_terminate": False})}
    )
    stopped = _execute(spec)
    assert stopped.interrupted and stopped.steps_done == SIGNAL_AT
    assert stopped.checkpoint.uri is None  # nothing committed: the rerun starts over
    assert stopped.error is not None
    assert "a rerun resumes from its last committed checkpoint" in stopped.error.message
