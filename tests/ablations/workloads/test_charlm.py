"""The charlm workload on CPU: it learns, resumes bit for bit mid-epoch, splits by file."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import torch

from ablations.checkpoint.state import capture, restore
from ablations.run.hooks import RunHistory
from ablations.training.driver import execute, seed_everything
from ablations.workloads.charlm import CharLMWorkload
from ablations.workloads.corpus import load_corpus
from tests.specs import bare_spec

CPU = torch.device("cpu")
TINY: dict[str, Any] = {"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 32,
                        "batch_size": 8, "lr": 0.01, "corpus_bytes": 300_000,
                        "eval_bytes": 4096}  # fmt: skip


def build(params: dict[str, Any], steps: int, seed: int = 0) -> CharLMWorkload:
    seed_everything(seed)
    return CharLMWorkload.build(params, seed=seed, device=CPU, steps=steps)


@pytest.mark.slow
def test_loss_falls_over_200_steps() -> None:
    workload = build(TINY, 200)
    before = workload.evaluate().metrics
    losses = [float(workload.train_step(step)) for step in range(1, 201)]
    after = workload.evaluate().metrics
    assert sum(losses[-20:]) / 20 < sum(losses[:10]) / 10 - 1.0
    assert after["val_loss"] < before["val_loss"] - 1.0
    assert abs(after["bits_per_byte"] * 0.6931471805599453 - after["val_loss"]) < 1e-9


@pytest.mark.slow
def test_resume_mid_epoch_is_bitwise() -> None:
    # ~270 kB / 32-byte windows / batch 128: an epoch is ~65 steps; save at 50, cross it after.
    params = {**TINY, "n_embd": 16, "batch_size": 128, "dropout": 0.1}
    steps, saved_at = 70, 50
    straight = build(params, steps)
    reference = [straight.train_step(step).item() for step in range(1, steps + 1)]

    first = build(params, steps)
    for step in range(1, saved_at + 1):
        first.train_step(step)
    assert 0 < first.order.cursor < len(first.starts)  # mid-epoch
    payload = capture(saved_at, first, RunHistory()).serialize()
    torch.manual_seed(12345)  # the global RNG moves on: the checkpoint must bring it back
    resumed = build(params, steps, seed=0)
    assert restore(payload, resumed, RunHistory()) == saved_at
    continued = [resumed.train_step(step).item() for step in range(saved_at + 1, steps + 1)]
    assert not torch.equal(
        resumed.order.permutation, first.order.permutation
    )  # crossed into a new epoch
    assert continued == reference[saved_at:]


def test_heldout_split_shares_no_file_with_training() -> None:
    corpus = load_corpus(300_000)
    train = {name for name, _ in corpus.train}
    held = {name for name, _ in corpus.heldout}
    assert train and held and not train & held
    digests = {hashlib.sha256(data).digest() for _, data in corpus.train}
    assert not any(hashlib.sha256(data).digest() in digests for _, data in corpus.heldout)
    assert build(TINY, 10).check_data() == []


def test_run_environment_records_the_corpus_digest() -> None:
    spec = bare_spec(run_id="charlm-env", campaign_id="c", plan_hash="h", variant="control",
                   category="essential", phase="pilot", seed=0, params=TINY, steps=4,
                   eval_every=4, entry="ablations.workloads.charlm:CharLMWorkload",
                   metric="val_loss", direction="minimize", threshold=10.0)  # fmt: skip
    record = execute(spec)
    assert record.status == "accepted", record.error
    assert record.environment is not None
    assert record.environment.data_sha256 == load_corpus(300_000).sha256
    assert set(record.metrics) == {"val_loss", "bits_per_byte"}


def test_truncated_files_are_reported_per_split() -> None:
    whole = build(TINY, 5).input_report().groups
    cut = build({**TINY, "max_file_bytes": 2000}, 5).input_report().groups
    assert whole["heldout"].truncated == whole["train"].truncated == 0
    assert 0 < cut["heldout"].truncated <= cut["heldout"].seen == whole["heldout"].seen
    assert 0 < cut["train"].truncated <= cut["train"].seen
