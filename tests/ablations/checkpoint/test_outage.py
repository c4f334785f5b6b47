"""A run's store calls ride through an outage of the real S3 protocol server (moto behind a
loopback fault proxy): a blip is retried away, an outage longer than the budget fails with a
message saying so, an answer retrying cannot change is not retried, a stalled read times out."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ablations.checkpoint import store as store_module
from ablations.checkpoint.manager import CheckpointManager
from ablations.checkpoint.outage import OUTAGE_ENV, OutlastingStore, outage_seconds, outlasting
from ablations.errors import InputError, StoreError, StoreUnreachable
from ablations.plan.infrastructure import CheckpointSection
from ablations.run.hooks import RunHistory
from tests.ablations.checkpoint.conftest import build, make_spec, train
from tests.fault_proxy import FaultProxy
from tests.s3_server import BUCKET


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(int(s3_endpoint.rsplit(":", 1)[1])).start()
    yield proxy
    proxy.stop()


def _section(proxy: FaultProxy, prefix: str) -> CheckpointSection:
    return CheckpointSection(store=f"s3://{BUCKET}/{prefix}", endpoint_url=proxy.endpoint)


def _up_after(proxy: FaultProxy, seconds: float) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), proxy.up()))
    thread.start()
    return thread


def test_a_blip_shorter_than_the_budget_is_ridden_through(proxy: FaultProxy) -> None:
    store = outlasting(_section(proxy, "blip"), seconds=30)
    proxy.down()
    back = _up_after(proxy, 1.0)
    store.put("a/b.bin", b"payload")  # tried while down, done once the proxy is back
    back.join()
    assert store.get("a/b.bin") == b"payload"
    assert store.keys("a") == ["a/b.bin"]


def test_an_outage_beyond_the_budget_fails_saying_how_long_it_tried(proxy: FaultProxy) -> None:
    store = outlasting(_section(proxy, "long"), seconds=2)
    proxy.down()
    started = time.monotonic()
    with pytest.raises(StoreUnreachable, match=r"stayed unreachable through \d+ tr(y|ies) over"):
        store.put("k", b"x")
    assert time.monotonic() - started < 15  # bounded: the budget and one call's timeouts


def test_the_probe_at_a_runs_start_rides_through_too(proxy: FaultProxy) -> None:
    proxy.down()
    back = _up_after(proxy, 1.0)
    store = outlasting(_section(proxy, "probe"), seconds=30)  # the check waited for the store
    back.join()
    assert store.keys("") == []


def test_a_missing_object_is_an_answer_not_an_outage(proxy: FaultProxy) -> None:
    store = outlasting(_section(proxy, "missing"), seconds=30)
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot read"):
        store.get("no/such/object")
    assert time.monotonic() - started < 5  # not retried for 30 s


def test_a_stalled_read_times_out_with_a_message(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore's read timeout (60 s in use) shortened so the test waits seconds, not minutes
    monkeypatch.setattr(store_module, "S3_TIMEOUTS", {"connect_timeout": 1, "read_timeout": 1})
    section = _section(proxy, "stall")
    store = OutlastingStore(store_module.open_store(section, sdk_retries=1), seconds=2)
    store.put("state.pt", b"x" * 1024)
    proxy.stall()
    started = time.monotonic()
    with pytest.raises(StoreUnreachable, match=r"(?i)read timeout.*stayed unreachable"):
        store.get("state.pt")
    assert time.monotonic() - started < 30


def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OUTAGE_ENV, "45")
    assert outage_seconds() == 45
    monkeypatch.setenv(OUTAGE_ENV, "soon")
    with pytest.raises(InputError, match=OUTAGE_ENV):
        outage_seconds()


def test_a_resume_that_cannot_read_fails_for_the_store_and_keeps_the_steps(
    proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(OUTAGE_ENV, "1")
    spec = make_spec(f"s3://{BUCKET}/resume", endpoint_url=proxy.endpoint, interval={"steps": 10})
    train(spec, saving := CheckpointManager(spec), until=20)
    assert saving.close().saves == 2
    proxy.down()
    with pytest.raises(StoreUnreachable):  # not "refused": no verdict on steps it cannot read
        train(spec, CheckpointManager(spec, store=OutlastingStore(saving.store, 1)), until=40)
    proxy.up()
    resumed = CheckpointManager(spec)
    assert resumed.resume(build(spec), RunHistory()) == 20  # both steps still there


class _ReadsTimeOut(OutlastingStore):
    """Lists and writes, but every read outlasts the outage (a stalled payload read)."""

    def get(self, key: str, limit: int | None = None) -> bytes:
        raise StoreUnreachable(f"reading {key}: read timeout (the store stayed unreachable)")


def test_a_payload_read_that_times_out_refuses_no_step(tmp_path: Path) -> None:
    spec = make_spec(f"file://{tmp_path}/store", interval={"steps": 10})
    train(spec, saving := CheckpointManager(spec), until=20)
    assert saving.close().saves == 2
    before = saving.store.keys("")
    stalled = CheckpointManager(spec, store=_ReadsTimeOut(saving.store, seconds=0))
    with pytest.raises(StoreUnreachable, match="read timeout"):
        stalled.resume(build(spec), RunHistory())
    assert saving.store.keys("") == before  # a refused step would have been removed


def test_a_full_local_disk_is_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC does not clear itself: the probe fails at once, not after the outage budget (a
    real full file system in tests/faults/test_infrastructure.py; here the classification)."""
    inner = store_module.open_store(CheckpointSection(store=f"file://{tmp_path}/s"), check=False)
    tries = []

    def full(key: str, data: bytes) -> None:
        tries.append(key)
        try:
            raise OSError(errno.ENOSPC, "No space left on device", key)
        except OSError as exc:
            raise StoreError(f"cannot write {key}: {exc}") from exc

    monkeypatch.setattr(inner, "put", full)
    started = time.monotonic()
    with pytest.raises(StoreError, match="No space left on device"):
        OutlastingStore(inner, seconds=30).check()  # the probe wraps the put's error in its own
    assert time.monotonic() - started < 5 and len(tries) == 1


def test_a_refused_path_is_an_answer_not_an_outage(tmp_path: Path) -> None:
    section = CheckpointSection(store=f"file://{tmp_path}/s")
    store = OutlastingStore(store_module.open_store(section, check=False), seconds=30)
    started = time.monotonic()
    with pytest.raises(StoreError):
        store.put("../outside", b"x")  # a key leading out of the store's root: refused
    assert time.monotonic() - started < 5 and not (tmp_path / "outside").exists()
