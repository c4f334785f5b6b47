"""The restart check's two halves as records, and its verdict (no torch: any process judges).

The reference half (train, save, keep training) and the continuation (a fresh process
resumes from the store and takes the same steps) run in different processes; the campaign
process compares what each reports.
"""

from __future__ import annotations

import math

from pydantic import ConfigDict

from ablations.run.records import Record, Stop

CUDA_REL_TOL = 1e-5
"""Loss agreement on CUDA when non-deterministic kernels (atomics) are allowed."""


class RestartReference(Record):
    """What the uninterrupted run did after the check's save."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")  # a NaN loss too

    early: int
    """The step saved."""
    until: int
    """The last step both sides take."""
    losses: list[float]
    """Losses of steps `early + 1 .. until` without interruption."""
    digest: str
    """sha256 of the weights at `until`."""
    exact: bool
    """Whether bitwise agreement is expected (CPU, or deterministic CUDA kernels)."""
    pid: int
    """The process that saved (the continuation must run in another)."""


class Continuation(Record):
    """What the fresh process did: resumed from the store and trained to `until`."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    resumed: int
    """The step it resumed from (0: it found no usable checkpoint)."""
    refused: str | None = None
    """Why the store's checkpoint was refused, when it was."""
    losses: list[float]
    digest: str
    pid: int
    """The process that resumed."""


def restart_stop(step: int, message: str, value: float | None = None) -> Stop:
    """A `restart` stop at the check's save step."""
    return Stop(rule="restart", step=step, value=value, message=f"no usable restart: {message}")


def reload_failed(reference: RestartReference, exc: BaseException) -> Stop:
    """The stop for a continuation that could not run at all."""
    return restart_stop(
        reference.early, f"reloading the checkpoint failed: {type(exc).__name__}: {exc}"
    )


def verdict(reference: RestartReference, got: Continuation) -> Stop | None:
    """None when the continuation is the uninterrupted run's; the first difference otherwise."""
    early = reference.early
    if got.resumed != early:
        why = f" ({got.refused})" if got.refused else ""
        return restart_stop(
            early,
            f"reloaded step {got.resumed}, expected {early}{why}; fix the checkpoint store "
            "(or the workload's state_dict/load_state_dict)",
        )
    expected, losses = reference.losses, got.losses
    if len(losses) != len(expected):
        return restart_stop(early, f"{len(losses)} steps after reload, expected {len(expected)}")
    for i, (a, b) in enumerate(zip(expected, losses, strict=True)):
        same = a == b if reference.exact else math.isclose(a, b, rel_tol=CUDA_REL_TOL)
        if not same:
            return restart_stop(
                early,
                f"step {early + i + 1} after reload has loss {b!r}, the uninterrupted "
                f"run {a!r}: the checkpoint misses part of the training state; fix the "
                "workload's state_dict/load_state_dict (or the checkpoint store it names)",
                value=abs(a - b),
            )
    if reference.exact and got.digest != reference.digest:
        return restart_stop(
            early,
            f"weights after {reference.until} steps differ from the uninterrupted run's; fix "
            "the workload's state_dict/load_state_dict",
        )
    return None
