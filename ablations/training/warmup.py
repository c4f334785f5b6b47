"""The first acts of a process that will train: pin the device, then pay the imports up front.

Both the slot workers and the restart check's fresh process call this as they start, while
the campaign is still starting up, so no run pays these seconds on the critical path.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ablations.errors import Problem


def prepare_torch_process(
    visible_devices: str, cpu_threads: int, workload_imports: Sequence[tuple[str, str]]
) -> Problem | None:
    """Pin `CUDA_VISIBLE_DEVICES` before torch loads, set the threads, import the workload
    (each `(field, module:attr)` of `WorkloadSection.named_imports`).

    Returns why the first of them does not import (the campaign reports it as bad input), or
    None: the campaign process itself never imports the workload or torch."""
    os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices  # before CUDA is initialised
    import torch

    if torch.cuda.is_initialized():  # forked from a parent that had used CUDA: unusable here
        raise RuntimeError(
            "this slot worker inherited an initialised CUDA context from its parent; "
            "set ABLATE_WORKER_START=spawn"
        )

    # The slot's thread count: it splits the cores between slots, and CPU reductions give
    # other last bits under another count (the restart check compares exactly).
    torch.set_num_threads(cpu_threads)
    if not workload_imports:
        return None
    from ablations.plan.io import workload_problems

    problems = workload_problems(workload_imports)
    return problems[0] if problems else None


def preload_for_training() -> None:
    """What the first run would import on its way: after the workload check is reported,
    so bad input is refused without waiting for it."""
    # Constructing the first optimizer imports torch._dynamo lazily: about 2 s of CPU.
    importlib.import_module("torch._dynamo")
