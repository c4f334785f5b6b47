"""A resume takes a committed step only when its commit record is the one the campaign's folder
holds (`checkpoint/held.py`, `commits/<run_id>.json`): a same-shape model swapped into the store
with its COMMIT.json rehashed, no `ABLATE_SIGNING_KEY` set, is refused with the reason, and the
run goes back to the newest step the folder holds, as for a corrupt checkpoint."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ablations.checkpoint import CheckpointManager, commit
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.held import HeldCommits
from ablations.checkpoint.state import MODEL, STATE
from ablations.run.hooks import RunHistory
from ablations.run.records import RunSpec
from tests.ablations.checkpoint.conftest import build, make_spec, train


@pytest.fixture
def in_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., RunSpec]:
    """A run of a campaign whose folder is `tmp_path/out`, its store outside it."""
    monkeypatch.delenv("ABLATE_SIGNING_KEY", raising=False)
    out = tmp_path / "out"
    out.mkdir()
    store = f"file://{tmp_path}/ckpt"
    return lambda **kw: make_spec(store, **kw).model_copy(update={"out_dir": str(out)})


def _swap_model(manager: CheckpointManager, step: int) -> None:
    """A forger's swap: the model at `step` replaced by one of the same shape (zeros), its
    commit record rewritten so that every size and sha256 matches, unsigned."""
    me = Identity("camp", "run-a", "hash-1")
    payload = commit.read(manager.store, me, step)
    weights = torch.load(io.BytesIO(payload[MODEL]), weights_only=True)
    buffer = io.BytesIO()
    torch.save({k: torch.zeros_like(v) for k, v in weights.items()}, buffer)
    commit.write(manager.store, me, step, {MODEL: buffer.getvalue(), STATE: payload[STATE]})


def test_a_swapped_model_with_its_commit_rehashed_is_refused(
    in_folder: Callable[..., RunSpec],
) -> None:
    spec = in_folder(interval={"steps": 10})
    first = CheckpointManager(spec)
    train(spec, first, 20)
    first.close()
    held = HeldCommits(str(spec.out_dir), "run-a").held()
    assert held is not None and sorted(held) == [10, 20]
    _swap_model(first, 20)

    again = CheckpointManager(spec)
    assert again.resume(build(spec), RunHistory()) == 10  # the newest step the folder holds
    error = again.close().last_error or ""
    assert "refused step 20" in error and "is not a commit this campaign recorded" in error
    assert "commits/run-a.json holds sha256" in error


def test_a_step_the_folder_never_held_is_refused(in_folder: Callable[..., RunSpec]) -> None:
    spec = in_folder(interval={"steps": 10})
    first = CheckpointManager(spec)
    train(spec, first, 10)
    first.close()
    me = Identity("camp", "run-a", "hash-1")
    payload = commit.read(first.store, me, 10)
    commit.write(first.store, me, 30, payload)  # planted beyond what the run committed
    again = CheckpointManager(spec)
    assert again.resume(build(spec), RunHistory()) == 10
    assert "holds no commit of this step" in (again.close().last_error or "")


def test_the_runs_own_commits_resume_and_the_file_keeps_the_newest(
    in_folder: Callable[..., RunSpec],
) -> None:
    spec = in_folder(interval={"steps": 5}, keep_last=2)
    first = CheckpointManager(spec)
    train(spec, first, 23)
    first.close()
    path = Path(str(spec.out_dir)) / "commits" / "run-a.json"
    assert sorted(int(s) for s in json.loads(path.read_text())) == [10, 15, 20]
    again = CheckpointManager(spec)
    assert again.resume(build(spec), RunHistory()) == 20
    assert again.close().last_error is None


def test_without_a_folder_file_the_store_is_trusted_as_before(
    in_folder: Callable[..., RunSpec],
) -> None:
    """A run started by an older release holds no file: nothing to check its store against."""
    spec = in_folder(interval={"steps": 10})
    first = CheckpointManager(spec)
    train(spec, first, 20)
    first.close()
    (Path(str(spec.out_dir)) / "commits" / "run-a.json").unlink()
    again = CheckpointManager(spec)
    assert again.resume(build(spec), RunHistory()) == 20
