"""Commit records: only committed checkpoints count, corrupt and foreign ones are refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ablations.checkpoint import (
    CheckpointManager,
    ForeignCheckpoint,
    RefusedCheckpoint,
    commit,
    fence,
)
from ablations.checkpoint.commit import COMMIT, Identity
from ablations.checkpoint.state import MODEL, STATE
from ablations.checkpoint.store import FsspecStore, open_store
from ablations.errors import ProtectedObject
from ablations.plan.infrastructure import CheckpointSection
from ablations.run.records import RunSpec
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


def test_an_attempt_writes_in_its_own_folder_and_resumes_from_any_attempts_newest(
    spec_factory: Callable[..., RunSpec],
):
    from ablations.checkpoint import fence

    first = spec_factory(interval={"steps": 10}).model_copy(update={"attempt": "1-a"})
    manager = CheckpointManager(first)
    fence.accept(manager.store, "camp", "run-a", "1-a")
    train(first, manager, 20)
    manager.close()
    mine = Identity("camp", "run-a", "hash-1", "1-a")
    assert commit.scan(manager.store, mine) == ([10, 20], [])
    assert commit.scan(manager.store, ME) == ([], [])  # nothing in the run's own folder
    # a second attempt's save that died before its commit: listed nowhere, removed by no one
    other = Identity("camp", "run-a", "hash-1", "2-b")
    manager.store.put(f"{commit.step_key(other, 30)}/{MODEL}", b"half")
    assert [(s, i.attempt) for s, i in commit.committed_by_any(manager.store, ME)] == [
        (10, "1-a"),
        (20, "1-a"),
    ]

    third = first.model_copy(update={"attempt": "3-c"})
    fence.accept(manager.store, "camp", "run-a", "3-c")
    resumed = CheckpointManager(third)
    assert len(train(third, resumed, 30)[1].losses) == 30
    summary = resumed.close()
    assert summary.resumed_from_step == 20 and summary.failures == 0
    assert summary.uri is not None and summary.uri.endswith("/run-a/attempts/3-c/step-00000030")
    assert commit.scan(manager.store, Identity("camp", "run-a", "hash-1", "3-c"))[0] == [30]
    assert commit.scan(manager.store, other) == ([], [30])  # not its folder: left alone
    assert commit.scan(manager.store, mine)[0] == [10, 20]


def test_a_superseded_attempt_commits_nothing_more(spec_factory: Callable[..., RunSpec]):
    from ablations.checkpoint import fence

    late = spec_factory(interval={"steps": 10}).model_copy(update={"attempt": "1-a"})
    manager = CheckpointManager(late)
    fence.accept(manager.store, "camp", "run-a", "2-b")  # declared lost before it saved
    with pytest.raises(fence.SupersededAttempt, match=r"1-a .* declared lost .* 2-b accepted"):
        train(late, manager, 30)
    summary = manager.close()
    assert summary.saves == 0 and "declared lost" in str(summary.last_error)
    assert commit.committed_by_any(manager.store, ME) == []


def _file_store(root: Path) -> FsspecStore:
    return open_store(CheckpointSection(store=f"file://{root}"), check=False)


def test_a_writers_delete_refuses_the_pools_pointer_and_other_attempts(tmp_path: Path) -> None:
    """The guard behind every restart check: deleting a run's folder would take the
    campaign's pointer to its accepted attempt (and that attempt's commits) with it."""
    store = _file_store(tmp_path)
    run = Identity("camp", "preflight-x", "hash-1")
    fence.accept(store, "camp", "preflight-x", "att-1")
    commit.write(store, replace(run, attempt="att-1"), 2, {"model.pt": b"m"})
    with pytest.raises(ProtectedObject, match=r"preflight-x/accepted\.json"):
        commit.remove_writer(store, run)
    assert fence.accepted(store, "camp", "preflight-x") == "att-1"  # nothing was deleted
    assert commit.committed_by_any(store, run) == [(2, replace(run, attempt="att-1"))]

    store.delete(f"camp/preflight-x/{fence.ACCEPTED}")  # the attempt's folder alone: refused too
    with pytest.raises(ProtectedObject, match=r"attempts/att-1/step-00000002"):
        commit.remove_writer(store, run)


def test_a_writers_delete_removes_its_own_saves_and_nothing_beside_them(tmp_path: Path) -> None:
    store = _file_store(tmp_path)
    check = Identity("camp", "restart-preflight-x", "hash-1")
    commit.write(store, check, 2, {"model.pt": b"m"})
    commit.write(store, ME, 2, {"model.pt": b"m"})
    commit.remove_writer(store, check)
    assert store.keys("camp/restart-preflight-x") == []
    assert commit.scan(store, ME) == ([2], [])  # another run's saves, untouched

    attempt = Identity("camp", "run-b", "hash-1", attempt="att-2")  # an attempt's own folder
    fence.accept(store, "camp", "run-b", "att-2")
    commit.write(store, attempt, 4, {"model.pt": b"m"})
    commit.remove_writer(store, attempt)
    assert commit.scan(store, attempt) == ([], [])
    assert fence.accepted(store, "camp", "run-b") == "att-2"


def test_the_campaign_holds_a_commits_digest_before_the_commit_exists(tmp_path: Path) -> None:
    """The held digest goes first: a kill between the two leaves a digest without a commit
    (nothing resumes an uncommitted step), never a commit the campaign does not hold, which
    the resume would refuse and so retrain a whole interval (a kill test once retrained 11
    steps of a 10-step interval)."""
    store = _file_store(tmp_path)
    record = f"{commit.step_key(ME, 10)}/{COMMIT}"
    seen: list[tuple[str, bool]] = []

    def hold(digest: str) -> None:
        seen.append((digest, record in store.keys(commit.step_key(ME, 10))))

    _, digest = commit.write_committed(store, ME, 10, {MODEL: b"weights"}, hold)
    assert seen == [(digest, False)]
    assert record in store.keys(commit.step_key(ME, 10))


@pytest.mark.parametrize("attempt", [None, "1-a"])
def test_a_survey_lists_once_what_scan_and_committed_by_any_list_twice(
    tmp_path: Path, attempt: str | None
) -> None:
    store = _file_store(tmp_path)
    me = replace(ME, attempt=attempt)
    other = replace(ME, attempt="2-b")
    commit.write(store, me, 10, {"model.pt": b"m"})
    commit.write(store, other, 20, {"model.pt": b"m"})
    store.put(f"{commit.step_key(me, 30)}/{MODEL}", b"half")  # mine, died before its commit
    store.put(f"{commit.step_key(other, 40)}/{MODEL}", b"half")  # another writer's: not mine
    listed: list[str] = []
    keys = store.keys

    def counted(prefix: str) -> list[str]:
        listed.append(prefix)
        return keys(prefix)

    store.keys = counted  # type: ignore[method-assign]
    partial, committed = commit.survey(store, me)
    assert len(listed) == 1
    assert partial == [30] == commit.scan(store, me)[1]
    assert committed == [(10, me), (20, other)] == commit.committed_by_any(store, me)
