"""Peak memory per phase of a run (build, train, evaluate).

On a GPU the caching allocator's peaks: `max_memory_allocated` (what tensors used) and
`max_memory_reserved` (what the allocator held, which is what makes a card run out). Both are
host-side counters, so reading them never synchronizes the device. CUDA is initialised on the
device when the counters are created (`init_cuda`): before that, torch 2.11's
`reset_peak_memory_stats` raises "Invalid device argument" and `max_memory_*` read 0, which
is how `ablate probe` lost its first variant on a fresh card. On CPU the process's peak
resident set size (Linux `VmHWM`), reset at the start of each phase so one phase's peak is not
an earlier run's: a slot's worker process runs many runs.
"""

from __future__ import annotations

import os
import resource
import sys

import torch

from ablations.run.records import MemoryPeak

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK_RSS = b"5"
"""Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0); cheap, no page walk."""


def _peak_rss_bytes() -> int:
    """Peak RSS since the last reset (VmHWM), else the lifetime peak from getrusage."""
    try:
        status = _read(_STATUS)
        start = status.index(b"VmHWM:") + len(b"VmHWM:")
        return int(status[start : status.index(b"kB", start)]) * 1024  # reported in kB
    except (OSError, ValueError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # bytes on macOS


def _read(path: str) -> bytes:
    # os-level calls: about 3x cheaper than pathlib's text I/O, and this runs per segment.
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 16384)
    finally:
        os.close(fd)


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def init_cuda(device: torch.device) -> None:
    """Initialise CUDA in this process and make `device` the current card, before anything
    reads or resets its allocator's statistics (those calls do not initialise CUDA themselves;
    every other `torch.cuda` call the project makes does). Idempotent and cheap once done."""
    torch.cuda.init()
    if device.index is not None:
        torch.cuda.set_device(device)  # a workload's bare "cuda" tensors land there too


class PhaseMemory:
    """Folds the peak of every segment of a phase into one `MemoryPeak` per phase name.

    Call `start()` when a segment begins and `stop(name)` when it ends; train and evaluate
    alternate, so each phase is the maximum over its segments.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        if self.cuda:
            init_cuda(device)
        self._can_reset_rss = True
        self.peaks: dict[str, MemoryPeak] = {}

    def start(self) -> None:
        """Begin a segment: reset the peak counters."""
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self._can_reset_rss:
            try:
                _write(_CLEAR_REFS, _RESET_PEAK_RSS)
            except OSError:  # not Linux, or a sandbox refusing it: fall back to lifetime peak
                self._can_reset_rss = False

    def stop(self, phase: str) -> None:
        """End a segment of `phase`: fold its peak into the phase's record."""
        if self.cuda:
            allocated = torch.cuda.max_memory_allocated(self.device)
            reserved = torch.cuda.max_memory_reserved(self.device)
        else:
            allocated = reserved = _peak_rss_bytes()
        before = self.peaks.get(phase, MemoryPeak())
        self.peaks[phase] = MemoryPeak(
            allocated=max(before.allocated, allocated), reserved=max(before.reserved, reserved)
        )
