"""The seam between the training driver and checkpointing.

The driver owns the loop; a `CheckpointHook` owns saving and restoring. The driver asks
`due(step)` after every step (cheap, no I/O), and only when it is due flushes its pending
device-side losses into `history` and calls `save`. Keeping the decision separate from the
save means the hot path never syncs the device for a checkpoint that is not taken.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ablations.run.records import CheckpointSummary
from ablations.run.workload import Workload


@dataclass
class RunHistory:
    """What a run has recorded so far; saved in every checkpoint for exact resume."""

    losses: list[float] = field(default_factory=list)
    """Training loss per completed step (index i = step i + 1)."""
    evaluations: list[dict[str, float]] = field(default_factory=list)
    """Each evaluation: `step` plus the workload's metrics."""
    step_seconds: list[float] = field(default_factory=list)
    """Wall seconds of recent steps, measured on the check cadence (for interval tuning)."""


class CheckpointHook(Protocol):
    """Saves and restores a run's full training state (see `ablations.checkpoint`)."""

    def resume(self, workload: Workload, history: RunHistory) -> int:
        """Restore the latest committed checkpoint into `workload` and `history`, in place.

        Returns the number of steps already done (0 when there is nothing to resume)."""
        ...

    def due(self, step: int, elapsed_train_seconds: float) -> bool:
        """Whether a checkpoint should be taken now that `step` steps are done."""
        ...

    def save(self, step: int, workload: Workload, history: RunHistory) -> None:
        """Copy the state to host memory and commit it in the background."""
        ...

    def close(self) -> CheckpointSummary:
        """Wait for the save in flight; return what checkpointing did (failures included)."""
        ...
