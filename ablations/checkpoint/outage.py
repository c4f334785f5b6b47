"""Riding through a store outage: every call a run makes to its store (the probe at its start,
the resume's listing and reads, the saver's writes, retention) is retried with bounded
backoff while the store is unreachable, for up to `outage_seconds()` in all per call, and
only then fails (`StoreUnreachable`, an infrastructure cause: the campaign stays undecided and a
rerun retrains the run). An answer that retrying cannot change is never retried: a missing
object, a refused or foreign checkpoint, an object too large or untrusted.

    store = outlasting(section)     # opened, probed through any outage, every call retried
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from typing import TypeVar

from ablations.checkpoint.store import FsspecStore, Store, open_store
from ablations.errors import (
    ForeignCheckpoint,
    InputError,
    ObjectTooLarge,
    ProtectedObject,
    RefusedCheckpoint,
    StoreError,
    StoreUnreachable,
    UntrustedObject,
)
from ablations.plan.infrastructure import CheckpointSection
from ablations.run.causes import INFRASTRUCTURE_ERRNOS

log = logging.getLogger(__name__)

OUTAGE_ENV = "ABLATE_STORE_OUTAGE_SECONDS"
"""Seconds of outage a run rides through per store call (the environment of `ablate run`;
the slot workers inherit it)."""
DEFAULT_OUTAGE_SECONDS = 300.0
"""An endpoint restarted, a network blip, a brief regional error: minutes, not hours. Longer
and a run would hold its card idle for a store that is gone; the rerun does better."""
FIRST_WAIT_SECONDS = 0.5
"""The wait after a first failed try, doubled after each further one..."""
MOST_WAIT_SECONDS = 15.0
"""...up to this: an outage's end is noticed within 15 s, with a few dozen tries at most."""

ANSWERS = (FileNotFoundError, PermissionError, FileExistsError, IsADirectoryError)
"""What a store answers through an `OSError` (s3fs raises these, often without an errno)."""
CHAIN_DEPTH = 8
"""How far down the `raise ... from` chain the store's answer is looked for."""
FINAL = (ForeignCheckpoint, ObjectTooLarge, ProtectedObject, RefusedCheckpoint, UntrustedObject)
"""Store answers that retrying cannot change."""

T = TypeVar("T")


def seconds_from_env(name: str, default: float) -> float:
    """The environment's `name` as seconds from 0 to a day, else `default` when unset;
    `InputError` naming it for a value that is not."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86_400:
        raise InputError(f"{name} must be seconds from 0 to 86400 (got {text[:20]!r})")
    return seconds


def outage_seconds() -> float:
    """The outage a run rides through per store call: `ABLATE_STORE_OUTAGE_SECONDS`, else
    `DEFAULT_OUTAGE_SECONDS`."""
    return seconds_from_env(OUTAGE_ENV, DEFAULT_OUTAGE_SECONDS)


DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""A local store's disk full or read-only: it does not clear itself within minutes, so the
run fails at once (the campaign stays undecided) and the rerun, once space is freed, retrains."""


def transient(exc: StoreError) -> bool:
    """Whether another try may succeed: the store failed to answer (a network's or a server's
    error, a failing device), not answered no (a missing object, a denied or refused path) or
    had no room (a full disk)."""
    if isinstance(exc, FINAL):
        return False
    cause = exc.__cause__
    for _ in range(CHAIN_DEPTH):  # through the store's own wrapping (`check` wraps `put`)
        if isinstance(cause, OSError):  # the OS's or the client's answer decides
            if isinstance(cause, ANSWERS):
                return False
            if cause.errno is None or isinstance(cause, ConnectionError | TimeoutError):
                return True
            return cause.errno in INFRASTRUCTURE_ERRNOS - DISK_ERRNOS
        if cause is None:
            break
        cause = cause.__cause__
    return True  # a client's or a server's error (botocore's, aiohttp's): not an answer


class OutlastingStore:
    """A `Store` whose calls ride through an outage of up to `seconds` each."""

    def __init__(self, store: Store, seconds: float | None = None) -> None:
        self.inner = store
        self.url = store.url
        self.seconds = outage_seconds() if seconds is None else seconds

    def put(self, key: str, data: bytes) -> None:
        self._ride(f"writing {key}", lambda: self.inner.put(key, data))

    def get(self, key: str, limit: int | None = None) -> bytes:
        return self._ride(f"reading {key}", lambda: self.inner.get(key, limit))

    def keys(self, prefix: str) -> list[str]:
        return self._ride(f"listing {prefix}", lambda: self.inner.keys(prefix))

    def delete(self, prefix: str) -> None:
        self._ride(f"deleting {prefix}", lambda: self.inner.delete(prefix))

    def uri(self, key: str) -> str:
        return self.inner.uri(key)

    def check(self) -> None:
        self._ride("checking the store", self.inner.check)

    def _ride(self, what: str, call: Callable[[], T]) -> T:
        def unreachable(exc: Exception, tries: int, elapsed: float) -> Exception:
            return StoreUnreachable(
                f"{exc} (the store stayed unreachable through {tries} "
                f"tr{'y' if tries == 1 else 'ies'} over {elapsed:.0f} s; a run rides "
                f"through {self.seconds:g} s, {OUTAGE_ENV})"
            )

        def retryable(exc: Exception) -> bool:
            return isinstance(exc, StoreError) and transient(exc)

        return ride_out(f"store {self.url}: {what}", call, self.seconds, retryable, unreachable)


def ride_out(
    what: str,
    call: Callable[[], T],
    seconds: float,
    retryable: Callable[[Exception], bool],
    unreachable: Callable[[Exception, int, float], Exception],
) -> T:
    """`call()`, tried again with bounded backoff while it raises what `retryable` accepts,
    for up to `seconds` in all; then `unreachable(last error, tries, elapsed)` is raised
    (from the last error). The one backoff of a service's outage: the store's here, the
    Prefect API's in `flows/api_outage.py`."""
    started = time.monotonic()
    wait, tries = FIRST_WAIT_SECONDS, 0
    while True:
        tries += 1
        try:
            return call()
        except Exception as exc:
            if not retryable(exc):
                raise
            elapsed = time.monotonic() - started
            if elapsed + wait > seconds:
                raise unreachable(exc, tries, elapsed) from exc
            log.warning(
                "%s failed (try %d, %.0f s into an outage of at most %g s), retrying in "
                "%.1f s: %s",
                what, tries, elapsed, seconds, wait, exc,
            )  # fmt: skip
            time.sleep(wait)
            wait = min(wait * 2, MOST_WAIT_SECONDS)


def _conforms(store: OutlastingStore) -> Store:  # the typed conformance check: mypy fails here
    return store


def outlasting(section: CheckpointSection, *, seconds: float | None = None) -> OutlastingStore:
    """The plan's store, probed through any outage of up to `seconds` (`StoreError` after),
    every later call riding through the same."""
    inner: FsspecStore = open_store(section, check=False)
    store = OutlastingStore(inner, seconds)
    store.check()
    return store
