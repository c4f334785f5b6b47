"""The campaign's preflight across two of its processes: no process is started for it.

The restart check needs a process that did not save the checkpoint. A campaign already has
one: a second slot's worker (idle before the pilot), or, with a single slot, a spare worker
started with the slots. So the leased slot runs the data check and the restart check's
reference half, the other process the continuation, and this process (no torch) compares.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

from ablations.errors import JobFailed, StoreError
from ablations.preflight.verdict import (
    Continuation,
    RestartReference,
    reload_failed,
    verdict,
)
from ablations.run.records import PreflightReport, Record, RunError, RunSpec, Stop


class PreflightStart(Record):
    """The leased slot's part: the data check, and the restart check up to its verdict."""

    data_problems: list[str] = []
    restart: Stop | None = None
    """A restart stop found already (the save failed, or the whole check ran on the slot)."""
    reference: RestartReference | None = None
    """Set when the continuation is still to run in another process."""
    error: RunError | None = None
    seconds: float = 0.0

    def finish(self, restart: Stop | None = None, seconds: float = 0.0) -> PreflightReport:
        """The report, with the continuation's verdict when there was one."""
        stop = self.restart or restart
        return PreflightReport(
            passed=not self.data_problems and stop is None and self.error is None,
            data_problems=self.data_problems,
            restart=stop,
            error=self.error,
            seconds=self.seconds + seconds,
        )


class PreflightWorker(Protocol):
    """What the preflight asks of a worker process (`ablations.workers.worker.SlotWorker`
    conforms): the preflight sits below the slots and talks to them through this."""

    def preflight_start(self, spec: RunSpec, expected: dict[str, int] | None) -> PreflightStart:
        """The data check and the restart check up to its verdict, in the worker's process."""
        ...

    def continue_check(self, spec: RunSpec, until: int) -> Continuation:
        """The restart check's continuation, from the reference's checkpoint."""
        ...


def preflight_across(
    slot: PreflightWorker,
    other: Callable[[], AbstractContextManager[PreflightWorker]],
    spec: RunSpec,
    expected_inputs: dict[str, int] | None,
) -> PreflightReport:
    """Preflight `spec` on `slot`, continuing the restart check in `other()`'s process."""
    start = slot.preflight_start(spec, expected_inputs)
    if start.reference is None:
        return start.finish()
    started = time.perf_counter()
    with other() as worker:
        try:
            got = worker.continue_check(spec.for_restart_check(), start.reference.until)
        except (JobFailed, StoreError) as exc:  # the store or the disk, not the restart: no verdict
            failed = start.model_copy(update={"error": RunError.of(exc, cause="infrastructure")})
            return failed.finish(seconds=time.perf_counter() - started)
        except Exception as exc:  # any other failure to reload is what the check reports
            return start.finish(reload_failed(start.reference, exc))
    return start.finish(verdict(start.reference, got), time.perf_counter() - started)
