"""What bench/gpu_check.sh checks on a card (`pytest -m gpu`), and the same logic on CPU in CI.

Device placement and bf16 autocast of the charlm workload, the RNG state through a checkpoint
(bitwise resume with deterministic algorithms), the allocator's peaks per phase in a probe, a
slot worker pinned to its card (forked from the fork server, and spawned), and
`slots_per_device: auto` on the real card. Each test but the last runs on `cpu` too (not
marked `gpu`, so `make test` runs it): the card found six of these failing for a reason that
had nothing to do with CUDA (the corpus then read the host's standard library), and CI now
sees such a failure first. `pytest -m gpu` selects the `cuda` cases only.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from ablations.checkpoint.state import capture, restore
from ablations.plan.infrastructure import ResourcesSection
from ablations.run.hooks import RunHistory
from ablations.run.records import RunSpec
from ablations.slots.devices import SlotSpec, card_memory, plan_slots
from ablations.training.driver import execute, seed_everything
from ablations.workers.jobs import RunJob
from ablations.workers.probe_point import probe_variant
from ablations.workers.worker import START_METHOD_ENV, SlotWorker
from ablations.workloads.charlm import CharLMWorkload, bf16_supported
from tests.specs import bare_spec

ON_A_CARD = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda:0", id="cuda", marks=ON_A_CARD)]
# The runs that train a charlm for a while on CPU are end to end for `make check`: `make test`
# runs them (marked slow), the development loop keeps its two minutes.
SLOW_ON_CPU = [pytest.param("cpu", id="cpu", marks=pytest.mark.slow), DEVICES[1]]
"""Each test's devices: the CPU case runs everywhere, the card's under `-m gpu`."""
SMALL: dict[str, Any] = {"n_layer": 2, "n_embd": 64, "n_head": 4, "block_size": 64,
                         "batch_size": 16, "corpus_bytes": 300_000, "dropout": 0.1}  # fmt: skip


def spec(**fields: Any) -> RunSpec:
    base: dict[str, Any] = dict(
        run_id="gpu-s0", campaign_id="gpu", plan_hash="0" * 64, variant="control",
        category="essential", phase="main", seed=0, params=SMALL, steps=20, eval_every=10,
        entry="ablations.workloads.charlm:CharLMWorkload", metric="val_loss",
        direction="minimize", threshold=100.0, device="cuda:0",
    )  # fmt: skip
    return bare_spec(**{**base, **fields})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_charlm_runs_on_the_device(precision: str, device: str) -> None:
    record = execute(spec(params={**SMALL, "precision": precision}, device=device))
    assert record.status == "accepted", record.error
    assert record.device == device
    assert record.environment is not None
    if device == "cpu":
        assert record.environment.device_name == "cpu"
    else:
        assert record.environment.cuda and record.environment.device_name != "cuda"
    assert record.memory["train"].reserved >= record.memory["train"].allocated > 0
    if precision == "bf16":
        params = {**SMALL, "precision": precision}
        workload = CharLMWorkload.build(params, seed=0, device=torch.device(device), steps=5)
        assert workload.autocast == bf16_supported(torch.device(device))


@pytest.mark.parametrize("device", SLOW_ON_CPU)
def test_resume_is_bitwise_with_deterministic_algorithms(device: str) -> None:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    try:
        steps, saved_at = 40, 25

        def build() -> CharLMWorkload:
            seed_everything(0)
            return CharLMWorkload.build(SMALL, seed=0, device=torch.device(device), steps=steps)

        straight = build()
        reference = torch.stack([straight.train_step(s) for s in range(1, steps + 1)]).cpu()
        first = build()
        for s in range(1, saved_at + 1):
            first.train_step(s)
        payload = capture(saved_at, first, RunHistory()).serialize()
        torch.manual_seed(999)  # every device's RNG (dropout's) must come back from the checkpoint
        resumed = build()
        restore(payload, resumed, RunHistory())
        rest = torch.stack([resumed.train_step(s) for s in range(saved_at + 1, steps + 1)]).cpu()
        assert torch.equal(rest, reference[saved_at:])
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("device", SLOW_ON_CPU)
def test_probe_reports_peaks_per_phase(device: str) -> None:
    points = probe_variant(spec(device=device), [1, 2, 4], steps=3)
    assert len(points) == 3 * 4 and all(p.ok for p in points), [p.error for p in points]
    for p in points:
        assert set(p.memory) == {"build", "train", "evaluate", "checkpoint"}
        assert p.memory["train"].reserved >= p.memory["train"].allocated > 0
    assert any(p.planned for p in points)


@pytest.mark.parametrize("device", SLOW_ON_CPU)
@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_slot_worker_sees_its_one_device(
    method: str, device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Forked from the fork server (torch imported there, CUDA never initialised) or spawned,
    the worker trains on its device; a card's worker sees only that one card."""
    monkeypatch.setenv(START_METHOD_ENV, method)
    if device == "cpu":
        slot = SlotSpec(name="cpu#0", device="cpu", cpu_threads=1)
    else:
        count = torch.cuda.device_count()
        slot = SlotSpec(name=f"cuda:{count - 1}", device=f"cuda:{count - 1}", cpu_threads=1)
    worker = SlotWorker(slot)
    try:
        record = worker.do(RunJob(spec(steps=5, eval_every=5, device=slot.local_device)))
    finally:
        worker.close()
    assert record.status == "accepted", record.error
    assert record.device == slot.local_device  # inside the worker only its own card is visible
    assert record.slot == slot.name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_auto_slots_follow_the_card_memory() -> None:
    total = torch.cuda.get_device_properties(0).total_memory
    assert abs(card_memory(0) - total) < 2**30  # nvidia-smi's figure, in MiB
    auto = ResourcesSection(devices=["cuda:0"], slots_per_device="auto", max_slots_per_device=8)
    assert len(plan_slots(auto, probe_peak=total // 100)) == 8  # a tiny run: the cap
    assert len(plan_slots(auto, probe_peak=total)) == 1  # never zero
    assert len(plan_slots(auto)) == 1  # no probe: one
