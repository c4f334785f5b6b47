"""Commit records: only committed checkpoints count, corrupt and foreign ones are refused."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from ablations.checkpoint import CheckpointManager, ForeignCheckpoint, RefusedCheckpoint, commit
from ablations.checkpoint.commit import COMMIT, Identity
from ablations.checkpoint.state import MODEL, STATE
from ablations.records import RunSpec
from tests.ablations.checkpoint.conftest import build, train

ME = Identity("camp", "run-a", "hash-1")


def test_partial_checkpoints_are_ignored_and_cleaned(spec_factory: Callable[..., RunSpec]):
    spec = spec_factory(interval={"steps": 10})
    manager = CheckpointManager(spec)
    train(spec, manager, 20)
    manager.close()
    store = manager.store
    # a save that died after its payload, before its commit record
    store.put(f"{commit.step_key(ME, 30)}/{MODEL}", b"half")
    assert commit.scan(store, ME) == ([10, 20], [30])
    resumed = CheckpointManager(spec)
    workload, history = build(spec), train(spec, None, 0)[1]
    assert resumed.resume(workload, history) == 20
    assert commit.scan(store, ME) == ([10, 20], [])
    assert len(history.losses) == 20


@pytest.mark.parametrize("damage", ["truncate", "flip", "drop", "bad-record"])
def test_damaged_checkpoint_falls_back_to_the_previous(
    spec_factory: Callable[..., RunSpec], damage: str
) -> None:
    spec = spec_factory(interval={"steps": 10}, keep_last=3)
    manager = CheckpointManager(spec)
    train(spec, manager, 20)
    manager.close()
    store, key = manager.store, commit.step_key(ME, 20)
    data = store.get(f"{key}/{STATE}")
    if damage == "truncate":
        store.put(f"{key}/{STATE}", data[: len(data) // 2])
    elif damage == "flip":
        store.put(f"{key}/{STATE}", data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "drop":
        store.delete(f"{key}/{STATE}")
    else:
        store.put(f"{key}/{COMMIT}", b'{"objects": ')
    with pytest.raises(RefusedCheckpoint, match=r"step-00000020"):
        commit.read(store, ME, 20)
    again = CheckpointManager(spec)
    assert again.resume(build(spec), train(spec, None, 0)[1]) == 10
    summary = again.close()
    assert summary.resumed_from_step == 10
    assert summary.last_error is not None and "refused step 20" in summary.last_error
    assert commit.scan(store, ME)[0] == [10]  # the refused newer one no longer shadows


@pytest.mark.parametrize("field", ["plan_hash", "run_id"])
def test_checkpoint_of_another_plan_or_run_is_refused(
    spec_factory: Callable[..., RunSpec], field: str
) -> None:
    spec = spec_factory(interval={"steps": 10})
    manager = CheckpointManager(spec)
    train(spec, manager, 10)
    manager.close()
    key = f"{commit.step_key(ME, 10)}/{COMMIT}"
    record = json.loads(manager.store.get(key))
    record[field] = "someone-else"
    manager.store.put(key, json.dumps(record).encode())
    with pytest.raises(ForeignCheckpoint, match=f"{field}.*someone-else.*refused"):
        CheckpointManager(spec).resume(build(spec), train(spec, None, 0)[1])
    assert commit.scan(manager.store, ME)[0] == [10]  # never deleted: it is not ours


def test_retention_keeps_the_newest_and_never_the_only_one(
    spec_factory: Callable[..., RunSpec],
) -> None:
    spec = spec_factory(interval={"steps": 5}, keep_last=2)
    manager = CheckpointManager(spec)
    train(spec, manager, 5)
    manager.wait()
    assert commit.scan(manager.store, ME)[0] == [5]  # the only one survives its own pruning
    train(spec, manager, 30, workload=None)
    summary = manager.close()
    assert commit.scan(manager.store, ME) == ([25, 30], [])
    assert summary.saves == 6 and summary.failures == 0
    assert summary.uri is not None and summary.uri.endswith("step-00000030")
