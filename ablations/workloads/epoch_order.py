"""The order a workload visits its training examples: a fresh permutation each epoch.

A CPU generator draws the permutations, so the data position is a small state (generator,
permutation, cursor) that a checkpoint restores exactly: a run resumed mid-epoch sees the same
batches as one trained straight through. The permutation lives on the run's device, so taking
a batch never copies indices from the host in the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


class EpochOrder:
    """Batches of example indices, without replacement within an epoch (the last partial
    batch of an epoch is skipped, so every batch has the same size)."""

    def __init__(self, examples: int, seed: int, device: torch.device) -> None:
        self.examples = examples
        self.device = device
        self.generator = torch.Generator().manual_seed(seed)
        self.permutation = self._new_permutation()
        self.cursor = 0

    def _new_permutation(self) -> torch.Tensor:
        perm = torch.randperm(self.examples, generator=self.generator)
        return perm.to(self.device, non_blocking=True)

    def take(self, batch_size: int) -> torch.Tensor:
        """The next batch's indices (on the device); a new epoch when this one runs short."""
        if self.cursor + batch_size > self.examples:
            self.permutation = self._new_permutation()
            self.cursor = 0
        chosen = self.permutation[self.cursor : self.cursor + batch_size]
        self.cursor += batch_size
        return chosen

    def state_dict(self) -> dict[str, Any]:
        """The data position, as the workload's checkpointed state holds it."""
        return {
            "generator": self.generator.get_state(),
            "permutation": self.permutation.cpu(),
            "cursor": self.cursor,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.permutation = state["permutation"].to(self.device)
        self.cursor = int(state["cursor"])
