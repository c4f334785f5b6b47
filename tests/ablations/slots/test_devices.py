from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ablations.errors import AblationError
from ablations.plan.infrastructure import ResourcesSection
from ablations.slots.devices import SlotLease, plan_slots, threads_per_core, usable_cpus


def test_cpu_slot_count_and_threads() -> None:
    slots = plan_slots(ResourcesSection(devices=2))
    assert [s.name for s in slots] == ["cpu#0", "cpu#1"]
    assert all(s.device == "cpu" and s.visible_devices == "" for s in slots)
    assert all(s.cpu_threads >= 1 for s in slots)


def test_override_and_several_slots_per_device() -> None:
    slots = plan_slots(ResourcesSection(devices=1, slots_per_device=2), "3")
    assert len(slots) == 6 and len({s.name for s in slots}) == 6


def test_missing_cuda_device_is_refused_clearly() -> None:
    with pytest.raises(AblationError, match=r"\['cuda:7'\] not present"):
        plan_slots(ResourcesSection(devices=["cuda:7"]))
    with pytest.raises(AblationError, match="unknown device"):
        plan_slots(ResourcesSection(), "tpu:0")


def test_pool_never_leases_one_slot_twice() -> None:
    pool = SlotLease(["a", "b"])
    active: dict[str, int] = {"a": 0, "b": 0}
    overlaps: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        with pool.lease() as slot:
            with lock:
                active[slot] += 1
                if active[slot] > 1:
                    overlaps.append(slot)
            time.sleep(0.01)
            with lock:
                active[slot] -= 1

    threads = [threading.Thread(target=work) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [] and active == {"a": 0, "b": 0}


@pytest.mark.parametrize(("text", "threads"), [("0", 1), ("0-1", 2), ("0,64", 2), ("3-6", 4)])
def test_threads_per_core_from_the_sibling_list(tmp_path: Path, text: str, threads: int) -> None:
    siblings = tmp_path / "thread_siblings_list"
    siblings.write_text(text + "\n")
    assert threads_per_core(siblings) == threads
    assert threads_per_core(tmp_path / "missing") == 1


def test_auto_cpu_slots_are_one_per_physical_core_with_the_threads_split() -> None:
    slots = plan_slots(ResourcesSection(devices="auto"))
    if slots[0].device == "cpu":
        cores = usable_cpus()
        assert len(slots) == max(1, cores // threads_per_core())
        assert all(s.cpu_threads == max(1, cores // len(slots)) for s in slots)


def test_the_schema_says_what_auto_gives_on_cpu() -> None:
    described = ResourcesSection.model_fields["devices"].description or ""
    assert "one CPU slot per physical core" in described  # as plan_slots does, above


def test_several_cards_simulated_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machines lent here have one card: several are simulated (three H200-sized cards),
    each slot pinned to its own card, `auto` packing each by the probe's peak."""
    from ablations.slots import devices

    monkeypatch.setattr(devices, "cuda_device_count", lambda: 3)
    monkeypatch.setattr(devices, "card_memory", lambda index: 141 * 10**9)
    auto = ResourcesSection(devices="auto", slots_per_device="auto")
    slots = plan_slots(auto, probe_peak=30 * 10**9, margin=0.2)  # 141 / (30.6 x 1.2): 3
    assert [s.name for s in slots[:4]] == ["cuda:0#0", "cuda:0#1", "cuda:0#2", "cuda:1#0"]
    assert len(slots) == 9 and {s.visible_devices for s in slots} == {"0", "1", "2"}
    assert {s.local_device for s in slots} == {"cuda:0"}  # each worker sees its one card
    listed = plan_slots(ResourcesSection(devices=["cuda:2"], slots_per_device=2))
    assert [(s.name, s.visible_devices) for s in listed] == [("cuda:2#0", "2"), ("cuda:2#1", "2")]
