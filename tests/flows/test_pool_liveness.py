"""A heartbeat kept going without progress does not keep a pool attempt alive (issue 24): the
campaign's wait on a real Prefect flow run declares it lost once no checkpoint is committed.
The store is read for it at its own pace, not at each state poll (issue 45)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.states import Pending, Running

from ablations.checkpoint import commit
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.outage import OutlastingStore
from ablations.checkpoint.store import open_store
from ablations.plan.infrastructure import CheckpointSection
from ablations.pool.attempts import HEARTBEAT, attempt_prefix, result_key
from flows.pool import PoolExecutor, PoolSettings
from tests.faults.test_untrusted_store import ATTEMPT, _spec


@flow(name="liveness-probe")
def _placeholder() -> None:
    """Only its flow runs are used: created and set Running by hand, like a lost host's."""


def _wait_with_beats(tmp_path: Path, commit_steps: bool) -> tuple[str, str]:
    spec = _spec(CheckpointSection(store=f"file://{tmp_path / 'store'}"), tmp_path / "out")
    assert spec.checkpoint is not None
    store = open_store(spec.checkpoint, check=False)
    identity = Identity(spec.campaign_id, spec.run_id, spec.plan_hash, ATTEMPT)
    stop = threading.Event()

    def forge() -> None:  # a beat every 0.1 s, as a hung run's thread (or a forger) writes it
        beat = 0
        while not stop.wait(0.1):
            beat += 1
            body = {"attempt": ATTEMPT, "host": "gpu-1", "beat": beat}
            store.put(f"{attempt_prefix(spec, ATTEMPT)}/{HEARTBEAT}", json.dumps(body).encode())
            if commit_steps and beat % 5 == 0:
                commit.write(store, identity, beat, {"model.pt": b"w"})

    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)
        client.set_flow_run_state(run.id, Running(), force=True)
        settings = PoolSettings(
            "gpus", heartbeat_timeout_s=30, progress_timeout_s=1.5, poll_s=0.2, liveness_s=0.2
        )
        thread = threading.Thread(target=forge, daemon=True)
        thread.start()
        try:
            if commit_steps:  # progress: alive until the flow run ends by itself
                threading.Timer(4.0, lambda: _complete(run.id)).start()
            executor = PoolExecutor(settings, [])
            problem, _ = executor._wait(run.id, OutlastingStore(store), spec, ATTEMPT, "run")
        finally:
            stop.set()
            thread.join()
        state = client.read_flow_run(run.id).state
    assert state is not None
    return problem, state.type.value


def _complete(flow_run_id: object) -> None:
    from prefect.states import Completed

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Completed(), force=True)  # type: ignore[arg-type]


def test_beats_without_committed_steps_are_a_lost_attempt(
    prefect_server: None, tmp_path: Path
) -> None:
    problem, state = _wait_with_beats(tmp_path, commit_steps=False)
    assert "no progress for 2 s (still at no checkpoint" in problem and "gpu-1" in problem
    assert state == "CRASHED"


def test_beats_with_committed_steps_keep_the_attempt_alive(
    prefect_server: None, tmp_path: Path
) -> None:
    problem, state = _wait_with_beats(tmp_path, commit_steps=True)
    assert "ended COMPLETED" in problem and state == "COMPLETED"


def test_the_store_is_read_for_liveness_at_its_own_pace_not_at_each_state_poll(
    prefect_server: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state is read every `poll_s` (a finished run is noticed then); the heartbeat and
    the newest commit every `liveness_s` (their timeouts are minutes), and once more when
    the flow run starts (Pending counts: its process is starting on a host)."""
    spec = _spec(CheckpointSection(store=f"file://{tmp_path / 'store'}"), tmp_path / "out")
    assert spec.checkpoint is not None
    store = open_store(spec.checkpoint, check=False)
    reads: list[str] = []
    monkeypatch.setattr(PoolExecutor, "_beat", staticmethod(lambda *a: reads.append("beat")))
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)
        threading.Timer(0.5, lambda: _running(run.id)).start()
        threading.Timer(2.0, lambda: _complete(run.id)).start()
        settings = PoolSettings("gpus", poll_s=0.05, liveness_s=60)
        executor = PoolExecutor(settings, [])
        problem, _ = executor._wait(run.id, OutlastingStore(store), spec, ATTEMPT, "run")
    assert "ended COMPLETED" in problem
    assert reads == ["beat"]  # pending (started), then running: not one per 0.05 s poll


def _running(flow_run_id: object) -> None:
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run_id, Running(), force=True)  # type: ignore[arg-type]


def _left_by_an_outage(
    tmp_path: Path, state: State, beat: bool, result: bool
) -> tuple[str, str, float]:
    """A flow run left in `state` (the server down as its host reported the next one), with
    one heartbeat and the attempt's result in the store, or not: (how `_wait` ended, the
    flow run's state then, seconds waited). Completed after 20 s, so a wait never hangs."""
    spec = _spec(CheckpointSection(store=f"file://{tmp_path / 'store'}"), tmp_path / "out")
    assert spec.checkpoint is not None
    store = open_store(spec.checkpoint, check=False)
    if beat:
        body = {"attempt": ATTEMPT, "host": "gpu-1", "beat": 1}
        store.put(f"{attempt_prefix(spec, ATTEMPT)}/{HEARTBEAT}", json.dumps(body).encode())
    if result:
        store.put(result_key(spec, ATTEMPT), b"{}")  # unsealed: the caller checks it
    settings = PoolSettings(
        "gpus", heartbeat_timeout_s=3, progress_timeout_s=60, poll_s=0.2, result_look_s=0.5
    )
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)
        client.set_flow_run_state(run.id, state, force=True)
        guard = threading.Timer(20.0, lambda: _complete(run.id))
        guard.start()
        started = time.monotonic()
        try:
            executor = PoolExecutor(settings, [])
            problem, _ = executor._wait(run.id, OutlastingStore(store), spec, ATTEMPT, "run")
        finally:
            guard.cancel()
        waited = time.monotonic() - started
        final = client.read_flow_run(run.id).state
    assert final is not None
    return problem, final.type.value, waited


def test_a_result_committed_while_the_server_was_down_is_taken_without_the_final_state(
    prefect_server: None, tmp_path: Path
) -> None:
    problem, state, waited = _left_by_an_outage(tmp_path, Running(), beat=True, result=True)
    assert "result committed (still RUNNING)" in problem and state == "RUNNING"
    assert waited < 3  # before the heartbeat's timeout would have called it lost


def test_a_flow_run_left_pending_without_a_beat_is_a_lost_attempt(
    prefect_server: None, tmp_path: Path
) -> None:
    """Its process died on the host before its first beat (a restarting server refuses a new
    process's first request at once): lost after the heartbeat's timeout, never waited on."""
    problem, state, _ = _left_by_an_outage(tmp_path, Pending(), beat=False, result=False)
    assert "no heartbeat for 3 s" in problem and state == "CRASHED"
