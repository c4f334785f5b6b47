"""`ResumableLoader`: a loader restored from its state continues with exactly the batches the
uninterrupted one gives, every epoch is its own permutation, each seed shuffles its own way,
and no draw touches torch's global generator (dropout's stream)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils.data import TensorDataset

from ablations.byo.data import ResumableLoader

ROWS = TensorDataset(torch.arange(10.0).unsqueeze(1), torch.arange(10))


def batches(loader: ResumableLoader, count: int) -> list[list[int]]:
    """The label rows of the next `count` batches, across epochs."""
    out: list[list[int]] = []
    while len(out) < count:
        for _, labels in itertools.islice(loader, count - len(out)):
            out.append(labels.tolist())
    return out


def test_a_restored_loader_continues_mid_epoch_with_the_same_batches() -> None:
    straight = batches(ResumableLoader(ROWS, batch_size=3, shuffle=True, seed=7), 9)
    first = ResumableLoader(ROWS, batch_size=3, shuffle=True, seed=7)
    before = batches(first, 5)  # 4 batches an epoch: the save falls in the second epoch
    state = first.state_dict()
    assert state == {"seed": 7, "epoch": 1, "position": 1}
    resumed = ResumableLoader(ROWS, batch_size=3, shuffle=True, seed=0)  # a fresh process
    resumed.load_state_dict(state)
    assert before + batches(resumed, 4) == straight


def test_epochs_and_seeds_shuffle_their_own_way_and_every_row_comes_once() -> None:
    loader = ResumableLoader(ROWS, batch_size=10, shuffle=True, seed=1)
    epoch0, epoch1 = batches(loader, 2)
    assert sorted(epoch0) == sorted(epoch1) == list(range(10)) and epoch0 != epoch1
    other = batches(ResumableLoader(ROWS, batch_size=10, shuffle=True, seed=2), 1)[0]
    assert other != epoch0
    plain = batches(ResumableLoader(ROWS, batch_size=4), 3)
    assert plain == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_lengths_and_the_seed_taken_from_torch() -> None:
    assert len(ResumableLoader(ROWS, batch_size=3)) == 4
    assert len(ResumableLoader(ROWS, batch_size=3, drop_last=True)) == 3
    torch.manual_seed(123)  # what seed_everything(seed) does before the data module is built
    assert ResumableLoader(ROWS).seed == 123
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        ResumableLoader(ROWS, batch_size=0)


def test_shuffling_draws_nothing_from_torchs_generator() -> None:
    torch.manual_seed(0)
    before = torch.get_rng_state()
    batches(ResumableLoader(ROWS, batch_size=3, shuffle=True), 8)
    assert torch.equal(torch.get_rng_state(), before)
