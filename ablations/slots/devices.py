"""Devices and slots: which devices exist, and a thread-safe lease of one slot per run.

Prefect's concurrency limits bound how many runs go at once but never say *which* device a
run got, so the lease is ours: a queue of slots, each owning one long-lived worker process
pinned to its device.
"""

from __future__ import annotations

import math
import os
import queue
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import ValidationError

from ablations.errors import InputError
from ablations.plan.infrastructure import ResourcesSection

T = TypeVar("T")


@dataclass(frozen=True)
class SlotSpec:
    """One place a run can go: a device, and which of its slots."""

    name: str
    """Unique slot name, e.g. `cuda:1` or `cuda:1#2` or `cpu#0`."""
    device: str
    """The device as the plan names it: `cpu` or `cuda:N`."""
    cpu_threads: int
    """torch intra-op threads for a CPU slot, so slots do not oversubscribe the cores."""

    @property
    def visible_devices(self) -> str:
        """`CUDA_VISIBLE_DEVICES` for the slot's worker: its one card, or none for CPU."""
        return self.device.split(":")[1] if self.device.startswith("cuda:") else ""

    @property
    def local_device(self) -> str:
        """The device name inside the worker, where only this slot's card is visible."""
        return "cuda:0" if self.device.startswith("cuda:") else "cpu"


def _nvidia_driver_present() -> bool:
    """Whether an NVIDIA driver is visible, without importing torch (seconds on a CPU box)."""
    return (
        os.path.exists("/proc/driver/nvidia")
        or os.path.exists("/dev/nvidiactl")
        or shutil.which("nvidia-smi") is not None
    )


def cuda_device_count() -> int:
    """CUDA devices visible to this process (0 without torch, a driver or CUDA)."""
    if "torch" not in sys.modules and not _nvidia_driver_present():
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, as a container or taskset sets it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


SIBLINGS = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
"""Linux: the hardware threads sharing CPU 0's core, e.g. `0`, `0-1` or `0,64`."""


def threads_per_core(siblings: Path = SIBLINGS) -> int:
    """Hardware threads per physical core (2 with hyperthreading; 1 where unknown)."""
    try:
        text = siblings.read_text().strip()
    except OSError:
        return 1
    count = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        count += int(high) - int(low) + 1 if high else 1
    return max(1, count)


def per_device(
    resources: ResourcesSection, device: str, probe_peak: int | None, margin: float
) -> int:
    """Slots on `device`: the plan's number, or for `auto` what the probe's peak fits on the
    card (1 without a probe, and on CPU, where slots follow the cores)."""
    if resources.slots_per_device != "auto":
        return resources.slots_per_device
    if probe_peak is None or not device.startswith("cuda:"):
        return 1
    total = card_memory(int(device.split(":")[1]))
    return slots_that_fit(total, probe_peak, margin, resources.max_slots_per_device)


CUDA_CONTEXT_BYTES = 600 * 2**20
"""Per process, outside the allocator's counters: what a CUDA context itself takes. Counted
once per slot when several runs share a card."""


def slots_that_fit(device_bytes: int, peak_bytes: int, margin: float, cap: int) -> int:
    """Runs one card holds: each takes its peak plus a CUDA context, with the margin kept
    free; at least 1, at most `cap`."""
    if peak_bytes <= 0:
        return 1
    per_run = (peak_bytes + CUDA_CONTEXT_BYTES) * (1 + margin)
    return max(1, min(cap, math.floor(device_bytes / per_run)))


def card_memory(index: int) -> int:
    """Total memory of CUDA device `index` in bytes: from nvidia-smi, so the campaign process
    never initializes CUDA (a context there would take memory from the runs); else torch."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        query = [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits", f"-i={index}"]
        try:
            done = subprocess.run(query, capture_output=True, text=True, timeout=30, check=True)
            return int(float(done.stdout.strip().splitlines()[0]) * 2**20)  # MiB
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            pass
    import torch

    return int(torch.cuda.get_device_properties(index).total_memory)


def plan_slots(
    resources: ResourcesSection,
    devices_override: str | None = None,
    probe_peak: int | None = None,
    margin: float = 0.2,
) -> list[SlotSpec]:
    """The slots for a campaign: from the plan's `resources`, or a `--devices` override.
    `probe_peak` (bytes, from `ablate probe`) sizes `slots_per_device: auto`."""
    devices: object = resources.devices
    if devices_override is not None:
        devices = parse_devices(devices_override)
    cores = usable_cpus()
    if devices == "auto":
        count = cuda_device_count()
        # Without CUDA, one CPU slot per physical core: small models gain far more from
        # runs side by side than from intra-op threads, and hyperthreads share one core.
        physical = max(1, cores // threads_per_core())
        device_list = [f"cuda:{i}" for i in range(count)] or ["cpu"] * physical
    elif isinstance(devices, int):
        device_list = ["cpu"] * devices
    else:
        assert isinstance(devices, list)
        device_list = list(devices)
        wanted = [d for d in device_list if d.startswith("cuda:")]
        available = cuda_device_count()
        missing = [d for d in wanted if int(d.split(":")[1]) >= available]
        if missing:
            raise InputError(
                f"resources.devices: {missing} not present (this machine has {available} CUDA "
                "devices); use 'auto' or a number of CPU slots"
            )
    counts = [per_device(resources, d, probe_peak, margin) for d in device_list]
    cpu_total = sum(k for d, k in zip(device_list, counts, strict=True) if not d.startswith("cuda"))
    threads = max(1, cores // max(1, cpu_total))
    slots: list[SlotSpec] = []
    for index, (device, count) in enumerate(zip(device_list, counts, strict=True)):
        base = device if device.startswith("cuda:") else f"cpu#{index}"
        for k in range(count):
            name = base if count == 1 else f"{base}#{k}"
            plain = "cpu" if device.startswith("cpu") else device
            slots.append(SlotSpec(name=name, device=plain, cpu_threads=threads))
    return slots


def parse_devices(text: str) -> Literal["auto"] | int | list[str]:
    """A `--devices` value: `auto`, a number of slots (>= 1) or a list of devices."""
    text = text.strip()
    if text == "auto":
        return "auto"
    if text.isdigit():
        if int(text) < 1:
            raise InputError(f"--devices must be at least 1, got {text}")
        return int(text)
    devices = [d.strip() for d in text.split(",") if d.strip()]
    try:
        return ResourcesSection(devices=devices).devices
    except ValidationError as exc:  # one line naming the value, not pydantic's report
        reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise InputError(f"--devices {text!r}: {reasons}") from exc


class SlotLease(Generic[T]):
    """A thread-safe lease of slots: `with leases.lease() as slot:` blocks until one is free."""

    def __init__(self, slots: list[T]) -> None:
        self._free: queue.Queue[T] = queue.Queue()
        for slot in slots:
            self._free.put(slot)
        self.slots = list(slots)

    @contextmanager
    def lease(self) -> Iterator[T]:
        slot = self._free.get()
        try:
            yield slot
        finally:
            self._free.put(slot)
