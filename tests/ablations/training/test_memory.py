"""Peak memory per phase: on CPU the process's peak RSS, reset per segment so a phase's peak
is not an earlier one's; folded per phase as the maximum over its segments. On a card the
allocator's peaks (run with `pytest -m gpu`; skipped without CUDA)."""

from __future__ import annotations

import pytest
import torch

from ablations.run.records import MemoryPeak
from ablations.training.memory import PhaseMemory, _peak_rss_bytes

MIB = 1024 * 1024
BIG = 256 * MIB
"""A buffer far above the RSS noise of a test process (allocator caches, imports)."""


def _touch(nbytes: int) -> torch.Tensor:
    """A tensor whose every page is written, so it counts in the resident set."""
    return torch.ones(nbytes // 4, dtype=torch.float32)


def test_a_cpu_phase_reports_the_peak_rss_of_its_segment() -> None:
    memory = PhaseMemory(torch.device("cpu"))
    memory.start()
    if not memory._can_reset_rss:
        pytest.skip("this kernel refuses resetting the peak RSS: the lifetime peak is kept")
    base = _peak_rss_bytes()  # the current RSS: the peak was just reset to it
    buffer = _touch(BIG)
    memory.stop("train")
    del buffer
    train = memory.peaks["train"]
    assert train.allocated == train.reserved  # one number on CPU: the process's RSS
    assert train.allocated >= base + BIG - 16 * MIB


def test_each_segment_starts_from_the_current_rss_not_an_earlier_peak() -> None:
    memory = PhaseMemory(torch.device("cpu"))
    memory.start()
    buffer = _touch(BIG)
    memory.stop("train")
    del buffer  # returned to the OS: the resident set shrinks again
    memory.start()
    if not memory._can_reset_rss:
        pytest.skip("this kernel refuses resetting the peak RSS: the lifetime peak is kept")
    memory.stop("evaluate")
    assert memory.peaks["evaluate"].allocated <= memory.peaks["train"].allocated - BIG // 2


def test_a_phase_is_the_maximum_over_its_segments() -> None:
    memory = PhaseMemory(torch.device("cpu"))
    memory.start()
    buffer = _touch(BIG)
    memory.stop("train")
    del buffer
    first = memory.peaks["train"]
    memory.start()
    memory.stop("evaluate")
    memory.start()
    memory.stop("train")  # a smaller second segment does not lower the phase's peak
    assert memory.peaks["train"] == first
    assert set(memory.peaks) == {"train", "evaluate"}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_phase_reports_the_allocators_peaks_per_segment() -> None:
    cuda = torch.device("cuda:0")
    memory = PhaseMemory(cuda)
    memory.start()
    buffer = torch.ones(BIG // 4, device=cuda)
    memory.stop("train")
    del buffer
    torch.cuda.empty_cache()
    memory.start()
    small = torch.ones(MIB // 4, device=cuda)
    memory.stop("evaluate")
    del small
    train, evaluate = memory.peaks["train"], memory.peaks["evaluate"]
    assert train.allocated >= BIG and train.reserved >= train.allocated
    assert evaluate.allocated < BIG // 2  # reset at the segment's start
    assert evaluate.reserved >= evaluate.allocated
    assert memory.peaks.get("build", MemoryPeak()) == MemoryPeak()
