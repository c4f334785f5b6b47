"""What the campaign and a slot's worker process say to each other over their pipe.

The worker first sends `Ready`; then each job is one request, a `Job`, answered by one reply:
`Done` with the result as text (a record's JSON, a path), or `Failed` with what the job raised
and its cause. `Finish` asks the worker to exit. The parent turns a `Failed` it cannot record
into a typed error: `JobFailed` (the machine's cause) or `WorkloadFailed` (the workload's code),
and a worker that died under a job into `WorkerLost`.

A job carries itself out: the worker calls its `run()` and knows no kind of job. The kinds live
with what they run: `ablations.workers.jobs` (a run, the preflight, a restart check's
continuation, a probe sweep) and `ablations.results.job` (the results step).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from ablations.errors import (
    JobFailed,
    Problem,
    WorkloadFailed,
)
from ablations.run.causes import FailureCause, cause_of_own_write
from ablations.run.records import RunSpec
from ablations.slots.devices import SlotSpec

R = TypeVar("R")


class Worker(Protocol):
    """What a job's `send` may ask of the worker it is sent to (`SlotWorker` is one: its
    conformance line is in worker.py). A protocol, so the messages know no worker."""

    slot: SlotSpec

    def do(self, job: Job[R]) -> R: ...

    def here(self, spec: RunSpec) -> RunSpec: ...

    def call(self, job: Job[Any]) -> Reply | None: ...

    def reap(self) -> int | None: ...

    def close(self, *, wait: bool = True) -> None: ...


@dataclass(frozen=True)
class Ready:
    """The worker's first message: pinned to its device, torch imported."""

    workload_problem: Problem | None
    """Why one of the warm-up's workload imports fails there (naming its plan field), or None."""


class Job(ABC, Generic[R]):
    """A request to a slot's worker that says what is done with it on each side of the pipe
    (a kind is a frozen dataclass: it pickles to the worker as it is).

    In the worker process `run()` does it, importing what it needs there, so a worker imports
    nothing of a kind it never receives; `dump` makes the result `Done`'s text, `failure` what
    `run` raised a `Failed`. In the campaign process `send(worker)` (what `Worker.do`
    calls) passes it to the worker and makes its result of the reply."""

    @abstractmethod
    def run(self) -> R:
        """The job, in the worker process."""

    def dump(self, result: R) -> str:
        """`Done`'s text for the result: its JSON (a record's; a kind with another result
        says otherwise)."""
        assert isinstance(result, BaseModel)
        return result.model_dump_json()

    def failure(self, exc: Exception) -> Failed:
        """The reply when `run` raised: the cause from the exception's type. A kind may
        raise instead: the worker then dies, and the parent sees a worker lost."""
        return Failed.of(exc)

    def log_name(self) -> str | None:
        """The log its output goes to, relative to the campaign's folder (`ablations.files.names`;
        None: the worker's own output, the terminal): the kinds that train say which."""
        return None

    @abstractmethod
    def send(self, worker: Worker) -> R:
        """In the campaign process: the result from `worker`, made of its reply (`Done`,
        `Failed`, or none when the worker died under the job)."""


@dataclass(frozen=True)
class Finish:
    """Exit once the current job is answered."""


@dataclass(frozen=True)
class Done:
    """The job's result as text (`Job.dump`): a record's JSON, the manifest's path."""

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
        """The reply for `exc`; its cause from its type unless given (a job raising outside
        the workload's own loop fails for the machine on any `OSError`; else `cause_of`)."""
        if cause is None:
            cause = cause_of_own_write(exc)
        return cls(type(exc).__name__, str(exc), cause)

    def __str__(self) -> str:
        return f"{self.error_type}: {self.message}"


Reply = Done | Failed


def job_error(failure: Failed, message: str) -> JobFailed | WorkloadFailed:
    """The typed error to raise for a job's `Failed` reply, by its cause."""
    if failure.cause == "infrastructure":
        return JobFailed(message, failure.error_type)
    return WorkloadFailed(message, failure.error_type)
