"""Background saves: retried with backoff, failures loud in the summary, never in the loop."""

from __future__ import annotations

import itertools
import logging
import threading
import time

import pytest
from moto.server import ThreadedMotoServer

from ablations.checkpoint import CheckpointManager, Retry, commit, open_store
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.saver import Saver
from ablations.run.hooks import RunHistory
from tests.ablations.checkpoint.conftest import build, make_spec, train
from tests.s3_server import BUCKET, free_port

FAST = Retry(attempts=3, backoff_seconds=0.02, max_backoff_seconds=0.05)


def test_a_failing_job_is_retried_with_backoff_then_succeeds() -> None:
    calls: list[float] = []

    def flaky() -> str:
        calls.append(time.perf_counter())
        if len(calls) < 3:
            raise ConnectionError("endpoint went away")
        return "s3://b/ok"

    saver = Saver(Retry(attempts=3, backoff_seconds=0.05, max_backoff_seconds=1.0))
    saver.submit(1, flaky)
    outcome = saver.close()
    assert outcome is not None and outcome.uri == "s3://b/ok" and outcome.attempts == 3
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # doubled


def test_one_save_in_flight_and_the_loop_only_waits_to_copy() -> None:
    release = threading.Event()
    saver = Saver(FAST)
    saver.submit(1, lambda: (release.wait(5) and "done") or "late")
    assert not saver.pending_done()
    with pytest.raises(RuntimeError, match="already in flight"):
        saver.submit(2, lambda: "x")
    release.set()
    outcome = saver.close()
    assert outcome is not None and outcome.uri == "done"


def test_server_gone_mid_run_is_reported_and_the_last_commit_stays_usable(
    s3_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    spec = make_spec(
        f"s3://{BUCKET}/gone", endpoint_url=f"http://127.0.0.1:{port}", interval={"steps": 5}
    )
    assert spec.checkpoint is not None
    # one try per call inside the SDK, so the saver's own retries are what the test sees
    store = open_store(spec.checkpoint, sdk_retries=1)
    manager = CheckpointManager(spec, store=store, retry=FAST)
    workload, history, _ = train(spec, manager, 10)
    manager.wait()
    server.stop()  # the endpoint disappears; moto's data stays in this process
    with caplog.at_level(logging.WARNING, logger="ablations.checkpoint"):
        started = time.perf_counter()
        for step in range(11, 21):  # the loop goes on; saves at 15 and 20 fail behind it
            workload.train_step(step)
            history.losses.append(0.0)
            if manager.due(step, step * 0.01):
                manager.save(step, workload, history)
        loop_seconds = time.perf_counter() - started
        summary = manager.close()
    assert summary.saves == 2 and summary.failures == 2
    assert summary.last_error is not None and summary.last_error.startswith("step 20: ")
    assert summary.uri is not None and summary.uri.endswith("step-00000010")
    assert "CHECKPOINT NOT WRITTEN" in caplog.text and "retrying" in caplog.text
    assert loop_seconds < 30  # the loop waited for one failed save at most, never hung
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        me = Identity("camp", "run-a", "hash-1")
        assert commit.scan(manager.store, me)[0] == [5, 10]
        assert CheckpointManager(spec).resume(build(spec), RunHistory()) == 10
    finally:
        server.stop()
