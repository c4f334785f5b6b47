"""A process stopped while its slot worker trains (a pool host's flow run gets Prefect's
TerminationSignal on SIGTERM): the worker is passed the SIGTERM, its run commits the step it
reached, and the worker is gone within the grace period."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType

import pytest

from ablations.checkpoint.commit import COMMIT
from ablations.plan.infrastructure import CheckpointSection, Interval
from ablations.slots.devices import SlotSpec
from ablations.workers.jobs import RunJob
from ablations.workers.worker import SlotWorker, Warmup
from tests.specs import bare_spec


class Stopped(BaseException):
    """What the process's own SIGTERM handler raises in its main thread (as Prefect's does)."""


@pytest.mark.slow  # a worker process and a run stopped mid-way
def test_a_stopped_caller_lets_its_worker_commit_the_current_step(tmp_path: Path) -> None:
    spec = bare_spec(
        run_id="control-s0-0123456789", campaign_id="c", plan_hash="h", variant="control",
        category="essential", phase="main", seed=0, params={"width": 16, "depth": 1},
        steps=10**7, eval_every=10**7, entry="ablations.workloads.digits:DigitsWorkload",
        metric="accuracy", threshold=0.0,
        checkpoint=CheckpointSection(store=f"file://{tmp_path}", interval=Interval(steps=10**7)),
    )  # fmt: skip
    worker = SlotWorker(SlotSpec("cpu#0", "cpu", 1), Warmup(terminate_grace_seconds=60.0))
    assert worker.workload_problem() is None  # started and warmed up: the run starts at once

    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        signal.setitimer(signal.ITIMER_REAL, 2.0)
        started = time.monotonic()
        with pytest.raises(Stopped):
            worker.do(RunJob(spec))
        waited = time.monotonic() - started
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    process = worker._process
    assert process is not None and not process.is_alive() and process.exitcode == 0
    commits = sorted(tmp_path.rglob(COMMIT))
    assert len(commits) == 1, commits  # no interval checkpoint: only the one taken on SIGTERM
    assert commits[0].parent.name.startswith("step-") and commits[0].parent.name != "step-00000000"
    assert waited < 60
    worker.close()
