"""Background commits: one save in flight, retried with backoff, every outcome recorded."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from ablations.errors import SupersededAttempt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retry:
    """How hard a save tries before it is counted as a failure."""

    attempts: int = 4
    """Tries per checkpoint; 4 with the backoff below spans about 7 s of outage."""
    backoff_seconds: float = 1.0
    """Wait after the first failed try; doubled after each further one."""
    max_backoff_seconds: float = 8.0


@dataclass(frozen=True)
class Outcome:
    """What one background save did."""

    step: int
    uri: str | None
    """Set when committed."""
    error: str | None
    """Set when every attempt failed: the last error."""
    attempts: int
    seconds: float
    """From submission to commit (or to giving up)."""


class Saver:
    """Runs commit jobs on one background thread, at most one in flight."""

    def __init__(self, retry: Retry = Retry()) -> None:
        self.retry = retry
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-saver")
        self._pending: Future[Outcome] | None = None
        self._lock = threading.Lock()

    def pending_done(self) -> bool:
        """Whether nothing is in flight (cheap, never blocks)."""
        return self._pending is None or self._pending.done()

    def wait(self) -> Outcome | None:
        """Block until the save in flight ends; its outcome (None when there was none)."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending.result() if pending is not None else None

    def submit(self, step: int, job: Callable[[], str]) -> None:
        """Queue `job` (returns the committed URI); the caller has waited for the previous."""
        with self._lock:
            if self._pending is not None:
                raise RuntimeError("a checkpoint is already in flight: call wait() first")
            self._pending = self._pool.submit(self._attempt, step, job, time.perf_counter())

    def _attempt(self, step: int, job: Callable[[], str], submitted: float) -> Outcome:
        delay = self.retry.backoff_seconds
        error = "never attempted"
        for attempt in range(1, self.retry.attempts + 1):
            try:
                uri = job()
                return Outcome(step, uri, None, attempt, time.perf_counter() - submitted)
            except SupersededAttempt as exc:  # final: no retry makes this attempt accepted again
                log.warning("checkpoint step %d not committed: %s", step, exc)
                return Outcome(step, None, str(exc), attempt, time.perf_counter() - submitted)
            except Exception as exc:  # every failure is retried, then reported, never raised
                error = f"{type(exc).__name__}: {exc}"
                if attempt < self.retry.attempts:
                    log.warning(
                        "checkpoint step %d attempt %d/%d failed, retrying in %.2fs: %s",
                        step, attempt, self.retry.attempts, delay, error,
                    )  # fmt: skip
                    time.sleep(delay)
                    delay = min(delay * 2, self.retry.max_backoff_seconds)
        log.error(
            "CHECKPOINT NOT WRITTEN: step %d failed %d times; last error: %s",
            step, self.retry.attempts, error,
        )  # fmt: skip
        return Outcome(step, None, error, self.retry.attempts, time.perf_counter() - submitted)

    def close(self) -> Outcome | None:
        """Wait for the save in flight, then stop the thread."""
        outcome = self.wait()
        self._pool.shutdown(wait=True)
        return outcome
