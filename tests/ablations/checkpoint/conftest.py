"""Run specs over the digits workload, and a minimal loop that drives a checkpoint hook."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ablations.plan.infrastructure import CheckpointSection
from ablations.run.hooks import CheckpointHook, RunHistory
from ablations.run.records import RunSpec
from ablations.workloads.digits import DigitsWorkload
from tests.specs import bare_spec

SMALL = {"width": 16, "depth": 1, "batch_size": 32}
"""A tiny digits MLP: a step takes well under a millisecond on CPU."""


def make_spec(store: str, run_id: str = "run-a", **checkpoint: Any) -> RunSpec:
    return bare_spec(
        run_id=run_id,
        campaign_id="camp",
        plan_hash="hash-1",
        variant="control",
        category="essential",
        phase="pilot",
        seed=7,
        params=SMALL,
        steps=40,
        eval_every=20,
        entry="ablations.workloads.digits:DigitsWorkload",
        metric="accuracy",
        threshold=0.1,
        checkpoint=CheckpointSection(store=store, **checkpoint),
    )


def build(spec: RunSpec) -> DigitsWorkload:
    random.seed(spec.seed), np.random.seed(spec.seed), torch.manual_seed(spec.seed)
    return DigitsWorkload.build(spec.params, seed=spec.seed, device=torch.device("cpu"), steps=40)


def train(
    spec: RunSpec, hook: CheckpointHook | None, until: int, workload: DigitsWorkload | None = None
) -> tuple[DigitsWorkload, RunHistory, int]:
    """Resume (if hooked), then train to `until`, saving whenever the hook says so."""
    workload = workload or build(spec)
    history = RunHistory()
    step = hook.resume(workload, history) if hook else 0
    while step < until:
        step += 1
        # Mix in every global RNG so a resume that misses one of them changes the losses.
        noise = torch.rand(()) * 1e-3
        history.losses.append(float(workload.train_step(step)) + float(noise))
        if hook is not None and hook.due(step, step * 0.01):
            hook.save(step, workload, history)
    return workload, history, step


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """One intra-op thread, here and in child processes: on two busy cores, OpenMP's spinning
    threads make a tiny MLP's step ~100x slower than a single thread."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def file_store(tmp_path: Path) -> str:
    return f"file://{tmp_path / 'ckpt'}"


@pytest.fixture
def spec_factory(file_store: str) -> Callable[..., RunSpec]:
    return lambda **kw: make_spec(kw.pop("store", file_store), **kw)
