"""The process's random generators as one value: saved in a framework's checkpoint, and
forked around an evaluation so that its draws leave training's stream as it was.

    state = random_state()        # torch (CPU and every visible card), Python, numpy
    set_random_state(state)
"""

from __future__ import annotations

import random
from typing import Any

import torch


def random_state() -> dict[str, Any]:
    """torch's (CPU and every visible card's), Python's and numpy's generators, as tensors
    and plain values (the checkpoint loads with `weights_only=True`)."""
    import numpy as np

    kind, keys, position, has_gauss, cached = np.random.get_state(legacy=True)
    assert not isinstance(keys, str)  # legacy=True: the tuple form
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, cached],
    }


def set_random_state(state: dict[str, Any]) -> None:
    import numpy as np

    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, cached))
