"""Full state for exact resume, loaded without executing pickles."""

from __future__ import annotations

import io
import pickle
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from ablations.checkpoint import CheckpointManager, commit
from ablations.checkpoint.commit import Identity
from ablations.checkpoint.state import MODEL, STATE, capture, loads, set_rng_state
from ablations.errors import StoreError
from ablations.run.hooks import RunHistory
from ablations.run.records import RunSpec
from tests.ablations.checkpoint.conftest import build, make_spec, train
from tests.s3_server import BUCKET


@pytest.fixture(params=["file", "memory", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., RunSpec]:
    if request.param == "file":
        return lambda **kw: make_spec(f"file://{tmp_path}/ckpt", **kw)
    if request.param == "memory":
        return lambda **kw: make_spec(f"memory://state-{tmp_path.name}", **kw)
    endpoint = request.getfixturevalue("s3_endpoint")
    url = f"s3://{BUCKET}/{tmp_path.name}"
    return lambda **kw: make_spec(url, endpoint_url=endpoint, **kw)


def test_resume_is_bitwise_exact(any_store: Callable[..., RunSpec]) -> None:
    spec = any_store(interval={"steps": 8})
    reference_workload, reference, _ = train(spec.model_copy(update={"checkpoint": None}), None, 40)
    first = CheckpointManager(spec)
    train(spec, first, 19)  # "crash" after step 19: the last commit is step 16
    assert first.close().saves == 2
    # the interrupted run scrambles every global RNG before the new "process" resumes
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    second = CheckpointManager(spec)
    workload, history, _ = train(spec, second, 40)
    summary = second.close()
    assert summary.resumed_from_step == 16 and summary.failures == 0
    assert history.losses == reference.losses  # float equality: bit for bit
    assert workload.evaluate().metrics == reference_workload.evaluate().metrics
    for a, b in zip(
        workload.model.state_dict().values(),
        reference_workload.model.state_dict().values(),
        strict=True,
    ):
        assert torch.equal(a, b)


def test_capture_is_a_copy_taken_at_save_time() -> None:
    spec = make_spec("memory://unused")
    workload = build(spec)
    history = RunHistory(losses=[1.0])
    snapshot = capture(1, workload, history)
    before = {k: v.clone() for k, v in workload.model.state_dict().items()}
    workload.train_step(2)  # mutates parameters and optimizer state in place
    history.losses.append(2.0)
    for name, value in snapshot.model.items():
        assert torch.equal(value, before[name])
    assert snapshot.state["history"]["losses"] == [1.0]
    payload = snapshot.serialize()
    state = loads(payload[STATE], STATE)
    assert set(state) >= {"step", "optimizer", "scheduler", "workload", "history", "rng"}
    assert set(loads(payload[MODEL], MODEL)) == set(before)


def test_state_pt_loads_with_weights_only_alone(tmp_path: Path) -> None:
    # An independent reader needs no allowlist and nothing of ablate's: numpy's RNG state is
    # stored as a tensor, and restoring it gives numpy's exact stream back.
    spec = make_spec("memory://unused")
    workload = build(spec)
    np.random.seed(7)
    np.random.random(3)  # mid-stream, and a cached gaussian: every field of the state matters
    np.random.standard_normal()
    path = tmp_path / STATE
    path.write_bytes(capture(1, workload, RunHistory()).serialize()[STATE])
    expected = np.random.random(5), np.random.standard_normal()
    state = torch.load(path, map_location="cpu", weights_only=True)  # no safe_globals
    assert state["rng"]["numpy"]["key"].dtype == torch.int64
    np.random.seed(1)
    set_rng_state(state["rng"])
    assert np.array_equal(np.random.random(5), expected[0])
    assert np.random.standard_normal() == expected[1]


def test_an_older_checkpoint_with_numpy_objects_still_restores() -> None:
    np.random.seed(3)
    legacy = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    buffer = io.BytesIO()
    torch.save({"rng": legacy}, buffer)
    expected = np.random.random(4)
    np.random.seed(1)
    set_rng_state(loads(buffer.getvalue(), STATE)["rng"])
    assert np.array_equal(np.random.random(4), expected)


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("pickled code ran",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_pickle_with_code_is_never_executed(capsys: pytest.CaptureFixture[str]) -> None:
    buffer = io.BytesIO()
    torch.save({"x": _Boom()}, buffer)
    with pytest.raises(StoreError, match="cannot be loaded safely"):
        loads(buffer.getvalue(), STATE)
    with pytest.raises(StoreError, match="cannot be loaded safely"):
        loads(pickle.dumps({"x": _Boom()}), STATE)
    assert "pickled code ran" not in capsys.readouterr().out


def test_a_malicious_but_committed_checkpoint_is_refused_and_skipped(
    spec_factory: Callable[..., RunSpec],
) -> None:
    spec = spec_factory(interval={"steps": 10})
    manager = CheckpointManager(spec)
    train(spec, manager, 20)
    manager.close()
    buffer = io.BytesIO()
    torch.save({"x": _Boom()}, buffer)
    me = Identity("camp", "run-a", "hash-1")
    # forge step 20 with a consistent commit record: only the safe loader stands in the way
    commit.write(manager.store, me, 20, {MODEL: buffer.getvalue(), STATE: buffer.getvalue()})
    again = CheckpointManager(spec)
    assert again.resume(build(spec), RunHistory()) == 10
    assert "cannot be loaded safely" in (again.close().last_error or "")
