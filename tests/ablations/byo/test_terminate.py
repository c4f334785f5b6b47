"""Preemption reaches code that runs its own loop: a terminate request (what a SIGTERM sets,
`ablations.process.preemption.TERMINATE`) makes the adapter commit the current step and stop; the
run is recorded interrupted (an infrastructure cause), and its rerun resumes from that step."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from ablations.byo.lightning import LightningWorkload
from ablations.byo.run import execute
from ablations.byo.session import Reply, Session
from ablations.checkpoint.manager import CheckpointManager
from ablations.plan.infrastructure import CheckpointSection
from ablations.process.preemption import TERMINATE
from ablations.run.records import INTERRUPTED, RunSpec
from tests.ablations.byo.test_lightning import spec_for

pytest.importorskip("lightning")
pytestmark = pytest.mark.slow  # two short Lightning runs and a resume: about 7 s


@pytest.fixture(autouse=True)
def no_request_left() -> Iterator[None]:
    TERMINATE.clear()
    yield
    TERMINATE.clear()


class PreemptedSession(Session):
    """The machine is reclaimed while step `at` trains."""

    at = 7

    def report(
        self, step: int, loss: float | None = None, metrics: Mapping[str, float] | None = None
    ) -> Reply:
        if step == self.at:
            TERMINATE.request("SIGTERM")
        return super().report(step, loss, metrics)


def test_a_terminate_request_commits_the_step_and_the_rerun_resumes_there(
    tmp_path: Path,
) -> None:
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 1000})
    params = {"lr": 0.05, "resumable": True}  # a resumable loader: the rerun is bitwise
    spec: RunSpec = spec_for(tmp_path, checkpoint=store, steps=10, eval_every=5, params=params)
    record = execute(spec, LightningWorkload, CheckpointManager(spec))
    assert record.status == "accepted"  # no request: the plain run, for the comparison below

    TERMINATE.clear()
    interrupted = _run_with(PreemptedSession, spec.model_copy(update={"run_id": "p-s0-abc"}))
    assert interrupted.status == "failed" and interrupted.error is not None
    assert interrupted.error.type == INTERRUPTED and interrupted.error.cause == "infrastructure"
    assert interrupted.steps_done == 7 and "step 7 is committed" in interrupted.error.message
    assert interrupted.artifacts == {}  # not finished: its rerun exports

    TERMINATE.clear()
    resumed = execute(
        spec.model_copy(update={"run_id": "p-s0-abc"}),
        LightningWorkload,
        CheckpointManager(spec.model_copy(update={"run_id": "p-s0-abc"})),
    )
    assert resumed.status == "accepted" and resumed.checkpoint.resumed_from_step == 7
    assert resumed.metrics == record.metrics  # the resumable loader: bitwise


def _run_with(session_type: type[Session], spec: RunSpec) -> object:
    """`execute`, with the session class replaced (the preemption comes from inside)."""
    import ablations.byo.run as runner

    original = runner.Session
    runner.Session = session_type  # type: ignore[misc]
    try:
        return execute(spec, LightningWorkload, CheckpointManager(spec))
    finally:
        runner.Session = original  # type: ignore[misc]
