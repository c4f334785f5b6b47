"""Whose fault a failure is: the machine's (a store, the disk, the network, a server) or the
workload's, from the exception and what it was raised from."""

from __future__ import annotations

import errno

import pytest

from ablations.errors import StoreError, WorkloadError
from ablations.run.causes import cause_of, cause_of_own_write, infrastructure_phrase
from ablations.run.records import RunError


def _raised_from(outer: Exception, inner: BaseException) -> Exception:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except Exception as chained:
        return chained


def _endpoint_down() -> Exception:
    from botocore.exceptions import EndpointConnectionError

    return EndpointConnectionError(endpoint_url="http://127.0.0.1:9/b")


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        OSError(errno.EIO, "Input/output error"),
        OSError(errno.EROFS, "Read-only file system"),
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        TimeoutError("timed out"),
        StoreError("cannot write s3://b/k"),
        _endpoint_down(),
        _raised_from(RuntimeError("could not save"), OSError(errno.ENOSPC, "full")),
    ],
    ids=repr,
)
def test_the_machines_failures_are_infrastructure(exc: BaseException) -> None:
    assert cause_of(exc) == "infrastructure"
    assert RunError.of(exc).cause == "infrastructure"


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("shapes (3,) and (4,) differ"),
        FileNotFoundError(errno.ENOENT, "No such file or directory", "data.npy"),
        PermissionError(errno.EACCES, "Permission denied", "/data"),
        WorkloadError("not the protocol"),
        _raised_from(ValueError("bad"), KeyError("lr")),
    ],
    ids=repr,
)
def test_the_workloads_failures_stay_the_workloads(exc: BaseException) -> None:
    assert cause_of(exc) == "workload"
    assert RunError.of(exc).cause == "workload"


def test_any_os_error_of_the_projects_own_write_is_the_machines() -> None:
    denied = PermissionError(errno.EACCES, "Permission denied", "metrics/run.csv")
    assert cause_of(denied) == "workload"  # a workload's own path: the same on every rerun
    assert cause_of_own_write(denied) == "infrastructure"  # the folder's: the machine's
    assert cause_of_own_write(ValueError("bad predictions")) == "workload"


@pytest.mark.parametrize(
    ("error_type", "message", "phrase"),
    [
        ("OSError", "[Errno 28] No space left on device: 'x'", "the disk was full"),
        ("StoreError", "cannot write s3://b/k: ConnectionError", "the checkpoint store"),
        ("JobFailed", "checkpoint store s3://b is not usable", "the checkpoint store"),
        ("WorkerCrashed", "the worker process of slot cpu#0 died", "a worker process was lost"),
        ("EndpointConnectionError", "Could not connect", "(EndpointConnectionError)"),
    ],
)
def test_the_phrase_names_what_failed(error_type: str, message: str, phrase: str) -> None:
    assert phrase in infrastructure_phrase(error_type, message)
