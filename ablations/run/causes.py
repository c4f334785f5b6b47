"""Whose fault an exception is, decided where it arises: the workload's (a rerun would fail
the same way, so the run's failure is a finding) or the infrastructure's (the store, the disk,
the network, a server: a rerun retries the run once it is back, and no decision is taken on it).

    cause_of(OSError(errno.ENOSPC, "No space left on device"))   # "infrastructure"
    cause_of(ValueError("bad shape"))                           # "workload"
    infrastructure_phrase("StoreError", "cannot write s3://b/k")  # "the checkpoint store was..."
"""

from __future__ import annotations

import errno
from typing import Literal

from ablations.errors import InfrastructureError

FailureCause = Literal["workload", "infrastructure"]
"""workload: the run's own code raised (a rerun would fail the same way); infrastructure: the
store, the disk, the network or the worker process failed under it (a rerun retries it)."""

INFRASTRUCTURE_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "ENOSPC", "EDQUOT", "EIO", "EROFS", "ESTALE", "EREMOTEIO", "ENOLINK", "ECOMM",
        "ENETDOWN", "ENETUNREACH", "ENETRESET", "ECONNABORTED", "ECONNRESET", "ECONNREFUSED",
        "ETIMEDOUT", "EHOSTDOWN", "EHOSTUNREACH", "EPIPE",
    )
    if hasattr(errno, name)
)  # fmt: skip
"""The OS errors of a disk or a network: a full or failing disk, a file system gone read-only
or stale, a connection refused or cut. A missing file or a denied path (ENOENT, EACCES) is not
among them: a workload naming a wrong data path fails the same way on every rerun."""

NETWORK_MODULES = ("botocore", "aiobotocore", "aiohttp", "urllib3", "requests", "http", "ssl")
"""Packages whose own exceptions are a connection's or a server's (an S3 endpoint's 5xx, a
refused or cut connection), whatever the code that called them."""

CHAIN_DEPTH = 8
"""How far down `__cause__` / `__context__` an error is looked into: a workload's `RuntimeError`
raised while a write failed for a full disk is the disk's."""


def cause_of(exc: BaseException) -> FailureCause:
    """`infrastructure` when `exc`, or an error it was raised from or while handling, is
    the machine's or a service's; `workload` otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < CHAIN_DEPTH:
        seen.add(id(current))
        if _of_the_machine(current):
            return "infrastructure"
        current = current.__cause__ or current.__context__
    return "workload"


def cause_of_own_write(exc: BaseException) -> FailureCause:
    """`cause_of` for what this project's own code raised writing its files or talking to
    its store (never the workload's code): any `OSError` there is the machine's."""
    return "infrastructure" if isinstance(exc, OSError) else cause_of(exc)


def _of_the_machine(exc: BaseException) -> bool:
    if isinstance(exc, InfrastructureError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, OSError) and exc.errno in INFRASTRUCTURE_ERRNOS:
        return True
    return type(exc).__module__.partition(".")[0] in NETWORK_MODULES


STORE_ERRORS = ("StoreError", "RefusedCheckpoint", "ObjectTooLarge", "JobFailed")
"""Error types of a run whose store failed under it (`ablations.errors.StoreError` and its
kinds; a worker's `JobFailed` carries the store's message)."""
DISK_FULL = ("No space left on device", "Disk quota exceeded", "[Errno 28]", "[Errno 122]")


def infrastructure_phrase(error_type: str, message: str) -> str:
    """What failed, in a few words, for the line that leaves a campaign undecided."""
    if any(mark in message for mark in DISK_FULL):
        return "the disk was full"
    if error_type in ("WorkerCrashed", "WorkerLost"):
        return "a worker process was lost"
    if error_type in STORE_ERRORS or "store" in message:
        return "the checkpoint store was unreachable"
    return f"the machine or a service failed ({error_type})"


def failed_for_the_machine(error_type: str, message: str, cause: FailureCause) -> bool:
    """Whether a recorded failure was the infrastructure's: by its cause, or, in a record of
    a release that classified every failure of a run as the workload's, by what it says (a
    store's error type, a full disk)."""
    if cause == "infrastructure" or error_type in STORE_ERRORS:
        return True
    return any(mark in message for mark in DISK_FULL)
