"""Preemption: a SIGTERM asks every running run to commit a checkpoint at its step and stop.

Rented and spot machines are reclaimed with a SIGTERM and a short grace period. A process
that trains listens for it (`listen_for_sigterm`); the handler only sets a flag, and the
training loop reads that flag at each step boundary: a plain attribute, no syscall and no
device sync on the hot path. A run that sees it commits a checkpoint at its current step, is
recorded as interrupted (an infrastructure cause, so a rerun resumes it from that step) and
its process exits.

    from ablations.process.preemption import TERMINATE
    if TERMINATE.requested:        # at a step boundary of any training loop
        ...save now, then stop...

Code that trains outside the driver (an external command, a Lightning or HF Trainer loop)
polls the same `TERMINATE.requested` and calls `TERMINATE.request()` to ask for the same.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from types import FrameType


class TerminateRequest:
    """Whether this process was asked to stop, since when and by what."""

    def __init__(self) -> None:
        self.requested = False
        """True once a SIGTERM (or `request`) asked every run to save and stop."""
        self.reason = ""
        """What asked: `SIGTERM`, or the caller's words."""
        self.since: float | None = None
        """`time.monotonic()` when it was first asked (the grace period counts from there)."""

    def request(self, reason: str = "SIGTERM") -> None:
        """Ask every run of this process to commit its step and stop (idempotent)."""
        if not self.requested:
            self.reason, self.since = reason, time.monotonic()
            self.requested = True

    def remaining(self, grace_seconds: float) -> float:
        """Seconds left of a grace period counted from the request (all of it before one)."""
        if self.since is None:
            return grace_seconds
        return max(0.0, grace_seconds - (time.monotonic() - self.since))

    def clear(self) -> None:
        """Forget the request (a test, or a process reused after handling it)."""
        self.requested, self.reason, self.since = False, "", None


TERMINATE = TerminateRequest()
"""This process's one terminate request."""


def listen_for_sigterm(then: Callable[[], None] | None = None) -> None:
    """From now on a SIGTERM sets `TERMINATE` (and, the first time, calls `then`, e.g. to
    forward it) instead of killing the process at once. Call it from the main thread."""

    def handler(signum: int, frame: FrameType | None) -> None:
        first = not TERMINATE.requested
        TERMINATE.request(signal.Signals(signum).name)
        if first and then is not None:  # a second SIGTERM changes nothing
            then()

    signal.signal(signal.SIGTERM, handler)
