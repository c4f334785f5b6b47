"""A pilot is the prefix of its main run: the main run resumes where the pilot ended, bitwise."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import torch

from ablations.checkpoint import CheckpointManager
from ablations.plan.infrastructure import CheckpointSection
from ablations.run.records import RunRecord, RunSpec
from ablations.training.driver import execute
from tests.ablations.checkpoint.conftest import SMALL
from tests.specs import bare_spec

STEPS, EVAL_EVERY = 40, 20


def _spec(store: str, out_dir: Path, **fields: Any) -> RunSpec:
    """A tiny digits run (cosine LR over `STEPS`, shuffled batches) checkpointing to `store`."""
    values: dict[str, Any] = {
        "run_id": "main-s3",
        "campaign_id": "camp",
        "plan_hash": "hash-1",
        "variant": "control",
        "category": "essential",
        "phase": "main",
        "seed": 3,
        "params": SMALL,
        "steps": STEPS,
        "eval_every": EVAL_EVERY,
        "entry": "ablations.workloads.digits:DigitsWorkload",
        "metric": "accuracy",
        "threshold": 0.0,
        "checkpoint": CheckpointSection(store=store, interval={"steps": 1000}),
        "out_dir": str(out_dir),
        **fields,
    }
    return bare_spec(**values)


def _run(spec: RunSpec, hooked: bool = True) -> RunRecord:
    record = execute(spec, CheckpointManager(spec) if hooked else None)
    assert record.status == "accepted", (record.error, record.stop)
    return record


def _rows(out_dir: Path, name: str) -> list[list[str]]:
    with (out_dir / "metrics" / name).open() as handle:
        return list(csv.reader(handle))


def _weights(out_dir: Path, run_id: str) -> dict[str, torch.Tensor]:
    return torch.load(out_dir / "models" / f"{run_id}.pt", weights_only=True)


@pytest.mark.parametrize("until", [15, 20], ids=["between-evaluations", "at-an-evaluation"])
def test_a_main_run_resumed_from_its_pilot_equals_the_run_trained_straight_through(
    tmp_path: Path, until: int
) -> None:
    store = f"file://{tmp_path}/ckpt"
    straight = _run(_spec(store, tmp_path / "straight"), hooked=False)
    pilot_spec = _spec(
        store,
        tmp_path / "resumed",
        run_id="pilot-s3",
        phase="pilot",
        until=until,
        checkpoint_id="main-s3",
    )
    pilot = _run(pilot_spec)
    main = _run(_spec(store, tmp_path / "resumed", resume_step=until))

    # The pilot trained its prefix, committed it at exactly its last step under the main
    # run's id, and its last evaluation (the one the gate reads) is at that step.
    assert pilot.steps_done == until and pilot.checkpoint.saves == 1
    assert pilot.checkpoint.uri is not None
    assert pilot.checkpoint.uri.endswith(f"camp/main-s3/step-{until:08d}")
    assert pilot.evaluations[-1]["step"] == until
    assert len(_rows(tmp_path / "resumed", "pilot-s3.steps.csv")) == 1 + until
    # The main run trained only the rest, and its results are bitwise those of the run
    # trained straight through: losses, evaluations, final weights.
    assert main.checkpoint.resumed_from_step == until and main.checkpoint.note is None
    assert main.steps_done - main.checkpoint.resumed_from_step == STEPS - until
    assert main.evaluations == straight.evaluations and main.metrics == straight.metrics
    for name in ("steps.csv", "evals.csv"):
        assert _rows(tmp_path / "resumed", f"main-s3.{name}") == _rows(
            tmp_path / "straight", f"main-s3.{name}"
        )
    resumed, trained = (
        _weights(tmp_path / "resumed", "main-s3"),
        _weights(tmp_path / "straight", "main-s3"),
    )
    assert resumed.keys() == trained.keys()
    assert all(torch.equal(resumed[k], trained[k]) for k in trained)


def test_the_pilot_sees_the_main_runs_schedule_not_a_compressed_one(tmp_path: Path) -> None:
    store = f"file://{tmp_path}/ckpt"
    prefix = _run(_spec(store, tmp_path / "a", run_id="p", until=15, checkpoint_id="m"))
    compressed = _run(_spec(store, tmp_path / "b", run_id="c", steps=15), hooked=False)
    straight = _run(_spec(store, tmp_path / "c"), hooked=False)

    first = _rows(tmp_path / "a", "p.steps.csv")
    assert first == _rows(tmp_path / "c", "main-s3.steps.csv")[: len(first)]
    assert first != _rows(tmp_path / "b", "c.steps.csv")  # the cosine schedule differs
    assert prefix.evaluations[-1]["step"] == 15 and compressed.steps_done == 15
    assert straight.steps_done == STEPS


def test_a_main_run_whose_pilot_checkpoint_is_missing_trains_from_zero_and_says_so(
    tmp_path: Path,
) -> None:
    # What a memory:// store gives a main run on another worker process than its pilot's.
    main = _run(_spec(f"file://{tmp_path}/empty", tmp_path / "out", resume_step=15))

    assert main.steps_done == STEPS and main.checkpoint.resumed_from_step is None
    assert main.checkpoint.note is not None
    note = main.checkpoint.note
    assert "its pilot left no checkpoint at step 15" in note and "trained from the start" in note
