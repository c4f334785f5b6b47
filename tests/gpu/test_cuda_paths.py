"""What bench/gpu_check.sh checks, on a card (`pytest -m gpu`; skipped without CUDA).

Device placement and bf16 autocast of the charlm workload, CUDA RNG state through a
checkpoint (bitwise resume with deterministic algorithms), the allocator's peaks per phase in
a probe, a slot worker pinned to its card (forked from the fork server, and spawned),
and `slots_per_device: auto` on the real card.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from ablations.checkpoint.state import capture, restore
from ablations.hooks import RunHistory
from ablations.plan.sections import ResourcesSection
from ablations.probe.point import probe_variant
from ablations.records import RunSpec
from ablations.slots.devices import SlotSpec, card_memory, plan_slots
from ablations.slots.jobs import RunJob
from ablations.slots.worker import START_METHOD_ENV, SlotWorker
from ablations.training.driver import execute, seed_everything
from ablations.workloads.charlm import CharLMWorkload

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
CUDA = torch.device("cuda:0")
SMALL: dict[str, Any] = {"n_layer": 2, "n_embd": 64, "n_head": 4, "block_size": 64,
                         "batch_size": 16, "corpus_bytes": 300_000, "dropout": 0.1}  # fmt: skip


def spec(**fields: Any) -> RunSpec:
    base: dict[str, Any] = dict(
        run_id="gpu-s0", campaign_id="gpu", plan_hash="0" * 64, variant="control",
        category="essential", phase="main", seed=0, params=SMALL, steps=20, eval_every=10,
        workload="ablations.workloads.charlm:CharLMWorkload", metric="val_loss",
        direction="minimize", threshold=100.0, device="cuda:0",
    )  # fmt: skip
    return RunSpec(**{**base, **fields})


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_charlm_runs_on_the_card(precision: str) -> None:
    record = execute(spec(params={**SMALL, "precision": precision}))
    assert record.status == "accepted", record.error
    assert record.device == "cuda:0"
    assert record.environment is not None and record.environment.cuda
    assert record.memory["train"].reserved >= record.memory["train"].allocated > 0
    if precision == "bf16":
        params = {**SMALL, "precision": precision}
        workload = CharLMWorkload.build(params, seed=0, device=CUDA, steps=5)
        assert workload.autocast == torch.cuda.is_bf16_supported()


def test_resume_on_the_card_is_bitwise_with_deterministic_algorithms() -> None:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    try:
        steps, saved_at = 40, 25

        def build() -> CharLMWorkload:
            seed_everything(0)
            return CharLMWorkload.build(SMALL, seed=0, device=CUDA, steps=steps)

        straight = build()
        reference = torch.stack([straight.train_step(s) for s in range(1, steps + 1)]).cpu()
        first = build()
        for s in range(1, saved_at + 1):
            first.train_step(s)
        payload = capture(saved_at, first, RunHistory()).serialize()
        torch.cuda.manual_seed_all(999)  # dropout's CUDA RNG must come back from the checkpoint
        resumed = build()
        restore(payload, resumed, RunHistory())
        rest = torch.stack([resumed.train_step(s) for s in range(saved_at + 1, steps + 1)]).cpu()
        assert torch.equal(rest, reference[saved_at:])
    finally:
        torch.use_deterministic_algorithms(False)


def test_probe_reports_allocator_peaks_per_phase() -> None:
    points = probe_variant(spec(), [1, 2, 4], steps=3)
    assert points and all(p.ok for p in points)
    for p in points:
        assert set(p.memory) == {"build", "train", "evaluate", "checkpoint"}
        assert p.memory["train"].reserved >= p.memory["train"].allocated > 0
    assert any(p.planned for p in points)


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_slot_worker_sees_its_one_card(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forked from the fork server (torch imported there, CUDA never initialised) or spawned,
    the worker trains on its card and sees only that one."""
    monkeypatch.setenv(START_METHOD_ENV, method)
    count = torch.cuda.device_count()
    worker = SlotWorker(
        SlotSpec(name=f"cuda:{count - 1}", device=f"cuda:{count - 1}", cpu_threads=1)
    )
    try:
        record = worker.do(RunJob(spec(steps=5, eval_every=5)))
    finally:
        worker.close()
    assert record.status == "accepted", record.error
    assert record.device == "cuda:0"  # inside the worker only its own card is visible
    assert record.slot == f"cuda:{count - 1}"


def test_auto_slots_follow_the_card_memory() -> None:
    total = torch.cuda.get_device_properties(0).total_memory
    assert abs(card_memory(0) - total) < 2**30  # nvidia-smi's figure, in MiB
    auto = ResourcesSection(devices=["cuda:0"], slots_per_device="auto", max_slots_per_device=8)
    assert len(plan_slots(auto, probe_peak=total // 100)) == 8  # a tiny run: the cap
    assert len(plan_slots(auto, probe_peak=total)) == 1  # never zero
    assert len(plan_slots(auto)) == 1  # no probe: one
