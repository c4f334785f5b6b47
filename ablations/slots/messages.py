"""What the campaign and a slot's worker process say to each other over their pipe.

The worker first sends `Ready`; then each job is one request (`RunJob`, `PreflightJob`,
`PreflightStartJob`, `ContinueJob`, `ProbeJob`, `ResultsJob`) answered by one reply: `Done`
with the result as JSON (a record, a report, a path), or `Failed` with what the job raised and
its cause. `Finish` asks the worker to exit. The parent turns a `Failed` it cannot record into
a typed error: `JobFailed` (the machine's cause) or `WorkloadFailed` (the workload's code), and
a worker that died under a job into `WorkerLost`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ablations.errors import InfrastructureError, WorkloadError
from ablations.records import FailureCause, RunSpec


@dataclass(frozen=True)
class Ready:
    """The worker's first message: pinned to its device, torch imported."""

    workload_problem: str | None
    """Why the warm-up's workload module does not import there, or None."""


@dataclass(frozen=True)
class RunJob:
    """Train one run; `Done` holds its `RunRecord`."""

    spec: RunSpec


@dataclass(frozen=True)
class PreflightJob:
    """The whole preflight on this slot (a work-pool host); `Done` holds a `PreflightReport`."""

    spec: RunSpec
    expected_inputs: dict[str, int] | None


@dataclass(frozen=True)
class PreflightStartJob:
    """The preflight up to the restart check's verdict, whose continuation runs in another
    process; `Done` holds a `PreflightStart`."""

    spec: RunSpec
    expected_inputs: dict[str, int] | None


@dataclass(frozen=True)
class ContinueJob:
    """A restart check's continuation up to step `until`; `Done` holds a `Continuation`."""

    spec: RunSpec
    until: int


@dataclass(frozen=True)
class ProbeJob:
    """One variant's `ablate probe` sweep; `Done` holds its points and the device's name."""

    spec: RunSpec
    batch_sizes: list[int]
    steps: int


@dataclass(frozen=True)
class ResultsJob:
    """The campaign's results step (ledger, report, manifest); `Done` holds the manifest's path."""

    out_dir: str


Job = RunJob | PreflightJob | PreflightStartJob | ContinueJob | ProbeJob | ResultsJob


@dataclass(frozen=True)
class Finish:
    """Exit once the current job is answered."""


@dataclass(frozen=True)
class Done:
    """The job's result, as JSON (or the manifest's path for `ResultsJob`)."""

    body: str


@dataclass(frozen=True)
class Failed:
    """The job raised: the exception's type and message, and whose cause it is."""

    error_type: str
    message: str
    cause: FailureCause
    """infrastructure: a store, the disk, the ledger; workload: the workload's own code."""

    @classmethod
    def of(cls, exc: BaseException, *, cause: FailureCause | None = None) -> Failed:
        """The reply for `exc`; its cause from its type unless given (the machine's errors
        are `InfrastructureError` or `OSError`; the rest are the workload's)."""
        if cause is None:
            machine = isinstance(exc, InfrastructureError | OSError)
            cause = "infrastructure" if machine else "workload"
        return cls(type(exc).__name__, str(exc), cause)

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"


Reply = Done | Failed


class WorkerLost(InfrastructureError):
    """A slot's worker process died under a job (killed for memory, a CUDA fault, a signal)."""


class JobFailed(InfrastructureError):
    """A job failed in a slot's worker for the machine's cause: a store, the disk, the ledger."""

    def __init__(self, message: str, failure: Failed) -> None:
        super().__init__(message)
        self.failure = failure


class WorkloadFailed(WorkloadError):
    """A job failed in a slot's worker because the workload's own code raised."""

    def __init__(self, message: str, failure: Failed) -> None:
        super().__init__(message)
        self.failure = failure


def job_error(failure: Failed, message: str) -> JobFailed | WorkloadFailed:
    """The typed error to raise for a job's `Failed` reply, by its cause."""
    if failure.cause == "infrastructure":
        return JobFailed(message, failure)
    return WorkloadFailed(message, failure)
