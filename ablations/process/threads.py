"""This process's share of the CPU cores, as its slot set it, known without importing torch.

A slot's process sets its share once (`share_cores`). A built-in or framework run trains here
and torch uses the share; a command's program is a process of its own, told the share in
`OMP_NUM_THREADS` (`cpu_share`), so the slot's process need not load torch (3 s of CPU) to
know it.
"""

from __future__ import annotations

import sys

_share: list[int] = []
"""The count `share_cores` set in this process (empty: none set)."""


def share_cores(threads: int, *, load_torch: bool = True) -> None:
    """Give this process `threads` CPU threads: torch's intra-op count (torch is imported for
    it unless `load_torch` is off: a command's run, whose program is another process)."""
    _share[:] = [threads]
    if load_torch or "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)


def cpu_share() -> int:
    """The count `share_cores` set; else torch's own intra-op count (importing torch)."""
    if _share:
        return _share[0]
    import torch

    return torch.get_num_threads()
