"""When to checkpoint: every N steps, every S seconds, or `auto` (Young/Daly, capped).

`auto` saves once early (`BOOTSTRAP_STEPS` in) to measure the cost C of a checkpoint (the
loop's stall plus the time until the commit record is written), then uses

    tau = min(sqrt(2 * C * M), L)

with M the expected time between interruptions and L the tolerable lost work, converted to
steps with the measured step time. It re-tunes when C moves by more than `RETUNE_RATIO`.
The expected fraction of time lost, C/tau + tau/(2M), is reported with it.

`due()` compares numbers only: no I/O and no device synchronization on the hot path.
"""

from __future__ import annotations

import math

from ablations.plan.infrastructure import CheckpointSection

BOOTSTRAP_STEPS = 5
"""Steps before the first `auto` save: past the first step's warm-up (lazy init, autotuning)
but early enough that a short run still measures its checkpoint cost."""
RETUNE_RATIO = 0.25
"""Relative change of the measured C that re-tunes tau (smaller changes are noise)."""


def young_daly(cost: float, mtbf: float, max_loss: float) -> float:
    """The checkpoint interval in seconds: sqrt(2 C M), capped by the tolerable loss L."""
    return min(math.sqrt(2.0 * cost * mtbf), max_loss)


def overhead(cost: float, tau: float, mtbf: float) -> float:
    """Expected fraction of time lost: saving (C/tau) plus redone work on a failure (tau/2M)."""
    return cost / tau + tau / (2.0 * mtbf)


class IntervalPolicy:
    """Decides `due(step, elapsed)` for one run from the plan's checkpoint section."""

    def __init__(self, section: CheckpointSection) -> None:
        self.every_steps = section.interval.steps
        self.every_seconds = section.interval.seconds
        self.auto = section.interval.is_auto
        self.mtbf = section.mtbf_hours * 3600.0
        self.max_loss = section.max_loss_minutes * 60.0
        self.cost: float | None = None
        """C in use (seconds); None until a save has been committed."""
        self.tau: float | None = None
        self.interval_steps: int | None = self.every_steps
        self.step_seconds: float | None = None
        self._last_step = 0
        self._last_elapsed = 0.0
        self._saves = 0

    def start(self, step: int, elapsed: float) -> None:
        """Count from `step` (0, or the step resumed from)."""
        self._last_step, self._last_elapsed = step, elapsed

    def due(self, step: int, elapsed: float) -> bool:
        if elapsed < self._last_elapsed:  # a new process restarted the driver's clock
            self._last_elapsed = elapsed
        if self.every_steps is not None:
            return step % self.every_steps == 0
        if self.every_seconds is not None:
            return elapsed - self._last_elapsed >= self.every_seconds
        if self.interval_steps is None:
            if self.tau is not None:  # tuned, but no step time measured yet: go by the clock
                return elapsed - self._last_elapsed >= self.tau
            # bootstrap: one early save, then wait until its cost is known
            return self._saves == 0 and step - self._last_step >= BOOTSTRAP_STEPS
        return step - self._last_step >= self.interval_steps

    def saved(self, step: int, elapsed: float) -> None:
        """A save was taken at `step`: update the step time measured since the last one."""
        if step > self._last_step and elapsed > self._last_elapsed:
            self.step_seconds = (elapsed - self._last_elapsed) / (step - self._last_step)
        self._last_step, self._last_elapsed = step, elapsed
        self._saves += 1
        self._retune()

    def measured(self, cost: float) -> None:
        """A save was committed `cost` seconds after the loop started it."""
        if self.cost is None or abs(cost - self.cost) > RETUNE_RATIO * self.cost:
            self.cost = cost
        self._retune()

    def _retune(self) -> None:
        if self.cost is None:
            return
        if self.auto:
            self.tau = young_daly(self.cost, self.mtbf, self.max_loss)
            if self.step_seconds:
                self.interval_steps = max(1, round(self.tau / self.step_seconds))
        elif self.every_seconds is not None:
            self.tau = self.every_seconds
            if self.step_seconds:
                self.interval_steps = max(1, round(self.tau / self.step_seconds))
        elif self.every_steps is not None and self.step_seconds:
            self.tau = self.every_steps * self.step_seconds

    @property
    def expected_overhead(self) -> float | None:
        if self.cost is None or not self.tau:
            return None
        return overhead(self.cost, self.tau, self.mtbf)
