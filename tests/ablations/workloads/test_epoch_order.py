from __future__ import annotations

import torch

from ablations.workloads.epoch_order import EpochOrder

CPU = torch.device("cpu")


def test_an_epoch_visits_each_example_once_and_skips_the_short_last_batch() -> None:
    order = EpochOrder(10, seed=0, device=CPU)
    epoch = torch.cat([order.take(3) for _ in range(3)])
    assert sorted(epoch.tolist()) == sorted(set(epoch.tolist())) and len(epoch) == 9
    first_permutation = order.permutation
    order.take(3)  # one example left: a new epoch starts
    assert order.cursor == 3 and not torch.equal(order.permutation, first_permutation)


def test_a_restored_order_continues_with_the_same_batches_across_epochs() -> None:
    straight = EpochOrder(10, seed=7, device=CPU)
    interrupted = EpochOrder(10, seed=7, device=CPU)
    for _ in range(2):  # stop mid-epoch
        straight.take(4)
        interrupted.take(4)
    state = interrupted.state_dict()
    restored = EpochOrder(10, seed=123, device=CPU)  # another seed: the state decides
    restored.load_state_dict(state)
    for _ in range(5):  # crosses two epoch boundaries
        assert torch.equal(restored.take(4), straight.take(4))
