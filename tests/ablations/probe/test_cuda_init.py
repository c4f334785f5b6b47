"""CUDA is initialised before any memory statistic: `ablate probe` lost its first variant on a
fresh H200 (every point `RuntimeError: Invalid device argument`), because torch 2.11's
`reset_peak_memory_stats` raises in a process that has not initialised CUDA yet.

On CPU, `torch.cuda` is replaced by a stand-in with that card's order rules (memory counters
raise or read 0 until something initialises CUDA), and the workload keeps its tensors on the
host whatever device it is given; everything else is the real probe and driver."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import torch

from ablations.plan.section import ParamValue
from ablations.run.records import RunSpec
from ablations.training.driver import execute
from ablations.workers.jobs import probe_on_slot
from ablations.workloads.digits import DigitsWorkload
from tests.specs import bare_spec

MIB = 2**20


class FreshCard:
    """`torch.cuda` of a process that has not touched CUDA yet, as torch 2.11 behaves there:
    `reset_peak_memory_stats` raises, `max_memory_*` read 0 (`memory_stats` is empty), and
    what initialises CUDA (`init`, `set_device`, `synchronize`, `get_device_name`) does."""

    def __init__(self) -> None:
        self.initialised = False
        self.current = 0
        self.resets = 0

    def init(self) -> None:
        self.initialised = True

    def is_initialized(self) -> bool:
        return self.initialised

    def set_device(self, device: torch.device | int) -> None:
        self.initialised = True  # THCPModule_setDevice initialises lazily
        self.current = device if isinstance(device, int) else (device.index or 0)

    def synchronize(self, device: object = None) -> None:
        self.initialised = True

    def get_device_name(self, device: object = None) -> str:
        self.initialised = True
        return "Fresh Card"

    def reset_peak_memory_stats(self, device: object = None) -> None:
        if not self.initialised:
            raise RuntimeError("Invalid device argument 0: did you call init?")
        self.resets += 1

    def max_memory_allocated(self, device: object = None) -> int:
        return 3 * MIB if self.initialised else 0

    def max_memory_reserved(self, device: object = None) -> int:
        return 4 * MIB if self.initialised else 0

    def empty_cache(self) -> None:
        pass  # a no-op before initialisation, as torch's


@pytest.fixture
def fresh_card(monkeypatch: pytest.MonkeyPatch) -> Iterator[FreshCard]:
    card = FreshCard()
    for name in (
        "init", "is_initialized", "set_device", "synchronize", "get_device_name",
        "reset_peak_memory_stats", "max_memory_allocated", "max_memory_reserved", "empty_cache",
    ):  # fmt: skip
        monkeypatch.setattr(torch.cuda, name, getattr(card, name))
    yield card


class HostDigits(DigitsWorkload):
    """Digits that trains on the host whatever device it is given (the card is a stand-in)."""

    @classmethod
    def build(
        cls, params: Mapping[str, ParamValue], *, seed: int, device: torch.device, steps: int
    ) -> DigitsWorkload:
        return DigitsWorkload.build(params, seed=seed, device=torch.device("cpu"), steps=steps)


def spec(variant: str, **params: Any) -> RunSpec:
    return bare_spec(
        run_id=f"probe-{variant}", campaign_id="fresh", plan_hash="0" * 64, variant=variant,
        category="essential", phase="pilot", seed=0, params={"batch_size": 8, **params},
        steps=20, eval_every=10, entry=f"{__name__}:HostDigits", metric="accuracy",
        threshold=0.0, device="cuda:0",
    )  # fmt: skip


def test_the_stand_in_fails_as_the_card_did(fresh_card: FreshCard) -> None:
    """The stand-in is faithful: what the probe did before (reset first) raises the card's
    error, and a counter read before initialisation says nothing."""
    assert torch.cuda.max_memory_reserved(0) == 0
    with pytest.raises(RuntimeError, match="Invalid device argument"):
        torch.cuda.reset_peak_memory_stats(0)


def test_every_variant_gets_its_points_in_a_fresh_worker(fresh_card: FreshCard) -> None:
    """One worker process probes the variants one after another, the first on a card nothing
    has initialised yet: every point of every variant runs, with the allocator's peaks."""
    variants = [spec("control"), spec("lr=0.3", lr=0.3), spec("width=16", width=16)]
    for variant in variants:
        points, device_name = probe_on_slot(variant, [1, 2], steps=3)
        assert device_name == "Fresh Card"
        assert [p.batch_size for p in points] == [1, 2, 8], variant.variant
        for p in points:
            assert p.ok, f"{p.variant} batch {p.batch_size}: {p.error}"
            assert set(p.memory) == {"build", "train", "evaluate", "checkpoint"}
            assert p.memory["train"].reserved == 4 * MIB  # the card's counters, not zero
    assert fresh_card.resets >= 4 * 3 * len(variants)  # each phase of each point was reset


def test_a_run_on_a_fresh_card_measures_every_phase(fresh_card: FreshCard) -> None:
    """The driver's run initialises the card before its first counter too."""
    record = execute(spec("control").model_copy(update={"phase": "main"}))
    assert record.status == "accepted", record.error
    assert set(record.memory) == {"build", "train", "evaluate"}
    assert all(m.reserved == 4 * MIB for m in record.memory.values())
