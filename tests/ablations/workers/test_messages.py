"""The typed messages between the campaign and a slot's worker: every one crosses a real pipe
intact, a `Failed` reply's cause comes from the exception's type unless the job names it, and
the parent raises it as the error of that cause. (The three basic causes of `Failed.of` and
`job_error` are pinned in test_worker.py; this file covers the rest of the contract.)"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from ablations.errors import (
    InfrastructureError,
    InputError,
    JobFailed,
    PlanError,
    Problem,
    StoreError,
    SupersededAttempt,
    WorkerLost,
    WorkloadError,
    WorkloadFailed,
)
from ablations.results.job import ResultsJob
from ablations.run.records import LOST_WORKER_ERRORS, RunError
from ablations.workers.jobs import ContinueJob, PreflightJob, PreflightStartJob, ProbeJob, RunJob
from ablations.workers.messages import Done, Failed, Finish, Ready, job_error
from tests.ablations.checkpoint.conftest import make_spec

SPEC = make_spec("memory://messages")


@pytest.mark.parametrize(
    "message",
    [
        Ready(workload_problem=None),
        Ready(
            workload_problem=Problem(
                "workload.hf_trainer", "module 'mywork' cannot be found", "mywork:make"
            )
        ),
        RunJob(SPEC),
        PreflightJob(SPEC, {"train": 1797}),
        PreflightStartJob(SPEC, None),
        ContinueJob(SPEC.model_copy(update={"attempt": "2-b"}), until=30),
        ProbeJob(SPEC, batch_sizes=[8, 16], steps=3),
        ResultsJob("/runs/camp"),
        Finish(),
        Done('{"run_id": "run-a"}'),
        Failed("StoreError", "cannot write s3://b/k", "infrastructure"),
    ],
    ids=lambda m: type(m).__name__,
)
def test_every_message_crosses_a_pipe_intact(message: Any) -> None:
    parent, child = multiprocessing.Pipe()
    with parent, child:
        child.send(message)
        received = parent.recv()
    assert received == message and type(received) is type(message)


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (SupersededAttempt("attempt 1-a was declared lost"), "infrastructure"),
        (WorkerLost("the worker process of slot cpu#0 died"), "infrastructure"),
        (FileNotFoundError(2, "No such file", "/data/x.npz"), "infrastructure"),
        (PermissionError(13, "Permission denied"), "infrastructure"),
        (WorkloadError("the workload does not import"), "workload"),
        (PlanError([Problem("seeds", "must be distinct", [1, 1])]), "workload"),
        (RuntimeError("CUDA error: device-side assert triggered"), "workload"),
        (ZeroDivisionError("division by zero"), "workload"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_a_failures_cause_follows_its_type(error: BaseException, cause: str) -> None:
    # the machine's errors are InfrastructureError or OSError (subclasses too); the rest,
    # including an input error the workload raised, are the workload's
    failure = Failed.of(error)
    assert failure.cause == cause
    assert failure.error_type == type(error).__name__
    assert failure.message == str(error)
    assert str(failure) == f"{type(error).__name__}: {error}"
    typed = job_error(failure, f"run-a failed: {failure}")
    assert isinstance(typed, JobFailed if cause == "infrastructure" else WorkloadFailed)
    assert typed.error_type == failure.error_type and str(typed) == f"run-a failed: {failure}"


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (ValueError("export: bad dtype"), "infrastructure"),  # a results step's: no workload code
        (StoreError("s3://b unreachable"), "workload"),
    ],
)
def test_a_job_that_knows_the_cause_overrides_the_type(error: Exception, cause: Any) -> None:
    failure = Failed.of(error, cause=cause)
    assert failure.cause == cause and failure.error_type == type(error).__name__
    expected = JobFailed if cause == "infrastructure" else WorkloadFailed
    assert type(job_error(failure, "x")) is expected


def test_the_parents_errors_sit_under_their_causes_bases() -> None:
    # `ablate` maps each base to its exit code: a lost worker or the machine's failure is 1
    # (rerun once fixed), the workload's code is the user's to fix (2)
    assert issubclass(WorkerLost, InfrastructureError) and not issubclass(WorkerLost, InputError)
    assert issubclass(JobFailed, InfrastructureError) and not issubclass(JobFailed, InputError)
    assert issubclass(WorkloadFailed, WorkloadError) and issubclass(WorkloadFailed, InputError)


def test_a_lost_worker_is_known_by_name_in_records_written_before_causes() -> None:
    # records without a cause recognize a lost worker by the error's type name: the class
    # that the parent raises must keep a name on that list
    failure = Failed.of(WorkerLost("the worker process of slot cuda:0 died"))
    assert failure.error_type in LOST_WORKER_ERRORS
    assert RunError.model_validate({"type": failure.error_type, "message": "x"}).cause == (
        "infrastructure"
    )
    assert RunError.model_validate({"type": "ValueError", "message": "x"}).cause == "workload"
