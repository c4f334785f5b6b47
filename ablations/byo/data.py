"""A data loader that resumes mid-epoch: for map-style datasets, with no extra to install.

    from ablations.byo.data import ResumableLoader

    def train_dataloader(self):
        return ResumableLoader(self.train, batch_size=32, shuffle=True)

Lightning saves a loader's `state_dict()` in its checkpoint and gives it back through
`load_state_dict()` on a resume (a plain `DataLoader` has neither, so Lightning restarts the
interrupted epoch with a fresh shuffle, and the batches after a resume are not the ones the run
straight through trains on: the restart check stops such a campaign). This loader's state is
small and exact: the seed, the epoch and the batches of it already given out. Epoch `e`'s order
is a permutation drawn from a generator seeded with `(seed, e)`, so it is the same whenever it
is drawn again, and it draws nothing from torch's global generator (dropout's stream is left
alone). The seed defaults to torch's initial seed when the loader is built (ablate seeds torch
with the run's seed first): each seed of a campaign shuffles its own way.

Batches are collated in this process (no worker processes): for a dataset whose rows are
tensors in memory. For heavy loading, torchdata's `StatefulDataLoader` does the same with
workers (`pip install torchdata`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sized
from typing import Any, Protocol

import torch
from torch.utils.data import default_collate

SEED_MIX = 1_000_003
"""Epoch e of seed s shuffles with the generator seeded `s * SEED_MIX + e`: distinct for every
(seed, epoch) pair a campaign uses (seeds below 2**32, epochs below a million)."""


class MapDataset(Protocol):
    """A map-style dataset: rows by index, and its length."""

    def __getitem__(self, index: int) -> Any: ...

    def __len__(self) -> int: ...


class ResumableLoader:
    """Batches of a map-style dataset, shuffled per epoch, resumable mid-epoch
    (`state_dict` / `load_state_dict`, which Lightning calls). See the module docstring."""

    def __init__(
        self,
        dataset: MapDataset,
        batch_size: int = 1,
        *,
        shuffle: bool = False,
        drop_last: bool = False,
        collate_fn: Callable[[list[Any]], Any] = default_collate,
        seed: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not isinstance(dataset, Sized):
            raise TypeError("ResumableLoader needs a map-style dataset (with __len__)")
        self.dataset, self.batch_size = dataset, batch_size
        self.shuffle, self.drop_last, self.collate_fn = shuffle, drop_last, collate_fn
        self.seed = torch.initial_seed() % 2**32 if seed is None else seed
        """The shuffle's seed (saved with the position)."""
        self.epoch = 0
        """Epochs completed."""
        self.position = 0
        """Batches of the current epoch given out (and trained, once the next one is asked)."""

    def __len__(self) -> int:
        """Batches per epoch."""
        rows = len(self.dataset)
        return rows // self.batch_size if self.drop_last else -(-rows // self.batch_size)

    def order(self, epoch: int) -> list[int]:
        """The dataset's row indices in epoch `epoch`'s order."""
        rows = len(self.dataset)
        if not self.shuffle:
            return list(range(rows))
        generator = torch.Generator().manual_seed(self.seed * SEED_MIX + epoch)
        return torch.randperm(rows, generator=generator).tolist()

    def __iter__(self) -> Iterator[Any]:
        """The rest of the current epoch (all of it, unless a restored state says otherwise)."""
        order, batches = self.order(self.epoch), len(self)
        while self.position < batches:
            start = self.position * self.batch_size
            rows = order[start : start + self.batch_size]
            # counted before it is given: a checkpoint taken after training on this batch
            # resumes with the next one
            self.position += 1
            yield self.collate_fn([self.dataset[i] for i in rows])
        self.epoch, self.position = self.epoch + 1, 0

    def state_dict(self) -> dict[str, int]:
        """The seed, the epoch and the batches of it given out."""
        return {"seed": self.seed, "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from `state_dict()`'s state: the next batch is the one after it."""
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]
