"""What the restart check's runs saw besides their losses: enough to name why a resume differs.

The check (`ablations.byo.restart`) runs the framework straight through, to its middle step
(saving there) and resumed from that save. Losses alone say *that* the resumed run differs; an
adapter that can see the batches and the model says *why*. During the check the session holds
a `RestartTrace`, and an adapter that has one records into it:

    trace.batch(step, batch)        # each training batch, by the optimizer step it feeds
    trace.state(module.state_dict(), optimizer.state_dict())   # at the middle step: after
                                    # it was trained, or as the resume restored it

Only digests are kept (sha256 of the tensors' bytes), so a large model costs one hash at the
middle step and nothing is held. A command's program is not traced (its batches are its own):
its check names the possible causes instead of the one found.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from typing import Any


def digest(value: Any) -> str:
    """sha256 of a nest of tensors, arrays, numbers and strings (dicts by sorted key)."""
    sha = hashlib.sha256()
    _feed(sha, value)
    return sha.hexdigest()


def _feed(sha: Any, value: Any) -> None:
    # A tensor exists only where torch is loaded: a command's check never loads it here.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        tensor = value.detach()
        sha.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        # bytes, not values: -0.0 and a NaN's payload count (a resume is bitwise or not)
        sha.update(tensor.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, Mapping):
        sha.update(b"{")
        for key in sorted(value, key=repr):
            _feed(sha, key)
            _feed(sha, value[key])
        sha.update(b"}")
    elif isinstance(value, (list, tuple)):
        sha.update(b"[")
        for item in value:
            _feed(sha, item)
        sha.update(b"]")
    elif hasattr(value, "tobytes") and hasattr(value, "dtype"):  # a numpy array
        sha.update(f"A{value.dtype}{getattr(value, 'shape', ())}".encode() + value.tobytes())
    else:
        sha.update(repr(value).encode())


class RestartTrace:
    """One check run's batches (by step) and its model and optimizer state at the middle."""

    def __init__(self, middle: int) -> None:
        self.middle = middle
        """The step the first run saves at and the resumed run starts after."""
        self.batches: dict[int, str] = {}
        """Optimizer step -> digest of its batches (micro-batches chained, in order)."""
        self.state_digest: str | None = None
        """Digest of the model and optimizer state at `middle`."""

    def batch(self, step: int, batch: Any) -> None:
        """The batch the framework trains optimizer step `step` on (called per micro-batch)."""
        self.batches[step] = digest([self.batches.get(step, ""), batch])

    def state(self, *states: Any) -> None:
        """The model and optimizer state at the middle step (state dicts, as saved)."""
        self.state_digest = digest(list(states))
