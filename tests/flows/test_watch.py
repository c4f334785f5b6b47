"""`flows.watch.FlowRunWatch` on a real Prefect server: the waits on several flow runs share
one reading a period, each sees its own run's state (a deleted one's as gone), a failed
reading reaches the waits, and the reading thread ends when no flow run is held."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prefect import flow
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.objects import State
from prefect.states import Completed, Running

from flows.watch import GONE, FlowRunWatch


@flow(name="watch-probe")
def _placeholder() -> None:
    """Only its flow runs are used, their states set by hand."""


def test_waits_on_several_flow_runs_share_one_reading_a_period(
    prefect_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with get_client(sync_client=True) as client:
        runs = [client.create_flow_run(_placeholder) for _ in range(3)]
        client.set_flow_run_state(runs[0].id, Running(), force=True)
        client.set_flow_run_state(runs[1].id, Completed(), force=True)
    requests: list[int] = []
    read = SyncPrefectClient.read_flow_runs

    def counted(self: SyncPrefectClient, **kwargs: Any) -> Any:
        requests.append(1)
        return read(self, **kwargs)

    monkeypatch.setattr(SyncPrefectClient, "read_flow_runs", counted)
    watch = FlowRunWatch(period_s=0.2)
    seen: dict[int, list[str]] = {i: [] for i in range(3)}

    def wait(i: int) -> None:
        deadline = time.monotonic() + 1.5
        with watch.watching(runs[i].id) as run:
            while time.monotonic() < deadline:
                state = watch.next_state(run)
                seen[i].append(state.type.value if isinstance(state, State) else str(state))

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {i: set(states) for i, states in seen.items()} == {
        0: {"RUNNING"},
        1: {"COMPLETED"},
        2: {"PENDING"},
    }
    # About 1.5 s / 0.2 s readings for the three waits together, not one each per wait.
    assert len(requests) <= 10 < sum(len(states) for states in seen.values())
    deadline = time.monotonic() + 5
    while watch._reader is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watch._reader is None  # no flow run held: no thread left reading


def test_a_failed_reading_is_raised_in_the_wait(
    prefect_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)

    def refused(self: SyncPrefectClient, **kwargs: Any) -> Any:
        raise RuntimeError("server gone")

    monkeypatch.setattr(SyncPrefectClient, "read_flow_runs", refused)
    watch = FlowRunWatch(period_s=0.05)
    with watch.watching(run.id) as held, pytest.raises(RuntimeError, match="server gone"):
        watch.next_state(held)


def test_a_deleted_flow_run_is_gone_not_pending_forever(prefect_server: None) -> None:
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)
        watch = FlowRunWatch(period_s=0.05)
        with watch.watching(run.id) as held:
            assert isinstance(watch.next_state(held), State)
            client.delete_flow_run(run.id)
            assert watch.next_state(held) == GONE


def _final_state_seen_in(watch: FlowRunWatch, run_id: Any, end: Any) -> float:
    """Seconds from `end()` (which finishes the run) to the held run's final state read."""
    with watch.watching(run_id) as held:
        assert isinstance(watch.next_state(held), State)
        ended = time.monotonic()
        end()
        while True:
            state = watch.next_state(held)
            if isinstance(state, State) and state.is_final():
                return time.monotonic() - ended


def test_an_end_heard_from_the_server_s_events_is_read_at_once(prefect_server: None) -> None:
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)
        client.set_flow_run_state(run.id, Running(), force=True)
        # A period far longer than the test: only the heard end can make it read in time.
        watch = FlowRunWatch(period_s=0.05, heard_period_s=60.0)
        with watch.watching(run.id) as held:
            deadline = time.monotonic() + 20
            while not watch.hears_ends:
                assert time.monotonic() < deadline, "never subscribed to the server's events"
                watch.next_state(held)
            seen_after = _final_state_seen_in(
                watch, run.id, lambda: client.set_flow_run_state(run.id, Completed(), force=True)
            )
    assert seen_after < 10.0  # read as the event came, not a minute later


def test_without_the_server_s_events_the_watch_reads_at_its_period(
    prefect_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.run_events

    def refused(**kwargs: Any) -> Any:
        raise OSError("websockets dropped by a proxy")

    monkeypatch.setattr(flows.run_events, "get_events_subscriber", refused)
    with get_client(sync_client=True) as client:
        run = client.create_flow_run(_placeholder)
        client.set_flow_run_state(run.id, Running(), force=True)
        watch = FlowRunWatch(period_s=0.1, heard_period_s=60.0)
        seen_after = _final_state_seen_in(
            watch, run.id, lambda: client.set_flow_run_state(run.id, Completed(), force=True)
        )
        assert not watch.hears_ends
    assert seen_after < 10.0
