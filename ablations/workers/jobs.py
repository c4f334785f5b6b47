"""The jobs a slot's worker does for the campaign besides the results step
(`ablations.results.job`): a run, the preflight on this slot (whole, or up to the restart
check's verdict), a restart check's continuation, and one variant's `ablate probe` sweep.

Each kind is a `Job`: `run()` does it in the worker process, `send(worker)` asks a worker for
it from the campaign's and makes its result of the reply. The functions above them are what
the kinds run, in any process (a pool host's CPU slot calls them directly). Importing this
module imports no torch (the campaign process never does): a job imports what it needs when
it runs. No Prefect here.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ablations.errors import WorkerLost, WorkloadError
from ablations.files.names import PREFLIGHT_LOG, run_log_name
from ablations.preflight.across import PreflightStart, PreflightWorker
from ablations.preflight.verdict import Continuation
from ablations.run.records import PreflightReport, RunError, RunRecord, RunSpec, Stop
from ablations.text.say import say
from ablations.workers.messages import Done, Failed, Job, Worker, job_error
from ablations.workers.probe_point import ProbePoint

if TYPE_CHECKING:
    from ablations.checkpoint.outage import OutlastingStore


def run_spec(spec: RunSpec, store: OutlastingStore | None = None) -> RunRecord:
    """Execute one run with its checkpoint hook (when the plan checkpoints), on `store` when
    the caller has the run's store open already in this process (`hook_for`)."""
    from ablations.byo import is_external
    from ablations.run.workload import load_workload

    hook = None
    if spec.checkpoint is not None:
        from ablations.checkpoint import hook_for

        hook = hook_for(spec, store)
    try:
        factory = load_workload(spec.workload.entry)
    except WorkloadError:
        factory = None  # `execute` records the same failure as the run's
    if is_external(factory):  # its framework owns the loop: ablations.byo
        from ablations.byo.run import execute as execute_external

        return execute_external(spec, factory, hook)
    from ablations.training.driver import execute  # torch: a command's run never loads it

    return execute(spec, hook)


def preflight_on_slot(spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
    """Data check on the workload's inputs, then the whole restart check on `spec`'s device
    (its continuation in a new process)."""
    return preflight_start(spec, expected_inputs, continue_elsewhere=False).finish()


def preflight_start(
    spec: RunSpec, expected_inputs: dict[str, int] | None, *, continue_elsewhere: bool
) -> PreflightStart:
    """The data check, then the restart check: whole, or (`continue_elsewhere`, and a store
    other processes can see) up to the reference, its continuation left to another process."""
    from ablations.byo import is_external
    from ablations.run.workload import load_workload

    started = time.perf_counter()
    try:
        factory = load_workload(spec.workload.entry)
        restart, reference = None, None
        if is_external(factory):  # its data is its own: nothing to inspect; see ablations.byo
            check = getattr(factory, "preflight", None)
            if callable(check):
                check(spec)  # the framework and the user's classes import: raises otherwise
            if spec.stop_rules.restart.enabled and spec.checkpoint is not None:
                from ablations.byo.restart import external_restart_check

                restart = external_restart_check(spec, factory)
            return PreflightStart(restart=restart, seconds=time.perf_counter() - started)
        import torch  # a built-in workload's: an external one's program or framework loads it

        from ablations.preflight.data_check import check_data

        workload = factory.build(
            spec.params, seed=spec.seed, device=torch.device(spec.device), steps=spec.steps
        )
        problems = [
            str(p) for p in check_data(workload, expected_inputs, spec.workload.data_sha256)
        ]
        del workload
        if spec.stop_rules.restart.enabled and spec.checkpoint is not None:
            from ablations.preflight.restart_check import reference_half, restart_check

            if continue_elsewhere and not spec.checkpoint.store.startswith("memory://"):
                half = reference_half(spec.for_restart_check())
                restart, reference = (half, None) if isinstance(half, Stop) else (None, half)
            else:
                restart = restart_check(spec)
    except Exception as exc:  # a preflight that crashes fails the campaign's preflight, clearly
        return PreflightStart(
            error=RunError.of(exc),
            seconds=time.perf_counter() - started,
        )
    return PreflightStart(
        data_problems=problems,
        restart=restart,
        reference=reference,
        seconds=time.perf_counter() - started,
    )


def continue_check(spec: RunSpec, until: int) -> Continuation:
    """The restart check's continuation, in this process (which did not save the checkpoint)."""
    from ablations.preflight.restart_check import continue_from_checkpoint

    return continue_from_checkpoint(spec, until)


def probe_on_slot(
    spec: RunSpec, batch_sizes: list[int], steps: int
) -> tuple[list[ProbePoint], str]:
    """A variant's probe sweep on `spec`'s device: its points and the device's name."""
    import torch

    from ablations.workers.probe_point import probe_variant

    points = probe_variant(spec, batch_sizes, steps)
    device = torch.device(spec.device)
    return points, torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


# -- the jobs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunJob(Job[RunRecord]):
    """Train one run; `Done` holds its `RunRecord`."""

    spec: RunSpec

    def run(self) -> RunRecord:
        return run_spec(self.spec)

    def log_name(self) -> str:
        return run_log_name(self.spec.run_id)

    def send(self, worker: Worker) -> RunRecord:
        """The run on the worker's slot. A worker that dies under it (not the workload
        raising: that is a record) is replaced, and the run retried once from its last
        committed checkpoint; a second death yields a `failed` record that a rerun retries,
        as does a `Failed` reply (the host failed it: a full disk, a store down)."""
        slot, started = worker.slot, time.time()
        job = replace(self, spec=worker.here(self.spec))
        reply = worker.call(job)
        if reply is None:
            lost = self._lost(worker, started)
            say(f"  {self.spec.run_id}: {lost.error}; retrying once on a fresh worker")
            reply = worker.call(job)
        if reply is None:
            return self._lost(worker, started)
        if isinstance(reply, Failed):  # a rerun retries it, once the disk or store is back
            return RunRecord.failed(
                self.spec, reply.error_type, reply.message, device=slot.device,
                slot=slot.name, started_at=started, ended_at=time.time(),
            )  # fmt: skip
        record = RunRecord.model_validate_json(reply.body)
        if record.interrupted:  # its worker exits after this reply: a next run starts afresh
            worker.close()
        return record.model_copy(update={"slot": slot.name})

    def _lost(self, worker: Worker, started: float) -> RunRecord:
        code = worker.reap()
        return RunRecord.failed(
            self.spec,
            "WorkerCrashed",
            f"the worker process of slot {worker.slot.name} died (exit code {code})",
            device=worker.slot.device,
            slot=worker.slot.name,
            started_at=started,
            ended_at=time.time(),
        )


@dataclass(frozen=True)
class PreflightJob(Job[PreflightReport]):
    """The whole preflight on this slot (a work-pool host); `Done` holds a `PreflightReport`."""

    spec: RunSpec
    expected_inputs: dict[str, int] | None

    def log_name(self) -> str:
        return PREFLIGHT_LOG

    def run(self) -> PreflightReport:
        return preflight_on_slot(self.spec, self.expected_inputs)

    def failure(self, exc: Exception) -> Failed:
        """A preflight reports its own errors: one that raises all the same ends the worker,
        and the parent reports a worker lost in preflight."""
        raise exc

    def send(self, worker: Worker) -> PreflightReport:
        """The data and restart checks, wholly on the worker's device."""
        reply = worker.call(replace(self, spec=worker.here(self.spec)))
        if reply is None:
            return _died_in_preflight(worker).finish()
        assert isinstance(reply, Done)  # a preflight reports its own errors
        return PreflightReport.model_validate_json(reply.body)


@dataclass(frozen=True)
class PreflightStartJob(Job[PreflightStart]):
    """The preflight up to the restart check's verdict, whose continuation runs in another
    process; `Done` holds a `PreflightStart`."""

    spec: RunSpec
    expected_inputs: dict[str, int] | None

    def log_name(self) -> str:
        return PREFLIGHT_LOG

    def run(self) -> PreflightStart:
        return preflight_start(self.spec, self.expected_inputs, continue_elsewhere=True)

    def failure(self, exc: Exception) -> Failed:
        """As `PreflightJob`'s: a preflight reports its own errors."""
        raise exc

    def send(self, worker: Worker) -> PreflightStart:
        """The data check and the restart check's reference half on the worker's device."""
        reply = worker.call(replace(self, spec=worker.here(self.spec)))
        if reply is None:
            return _died_in_preflight(worker)
        assert isinstance(reply, Done)  # a preflight reports its own errors
        return PreflightStart.model_validate_json(reply.body)


def _died_in_preflight(worker: Worker) -> PreflightStart:
    message = f"the worker process of slot {worker.slot.name} died during preflight"
    return PreflightStart(error=RunError(type="WorkerCrashed", message=message))


@dataclass(frozen=True)
class ContinueJob(Job[Continuation]):
    """A restart check's continuation up to step `until`; `Done` holds a `Continuation`."""

    spec: RunSpec
    until: int

    def log_name(self) -> str:
        return PREFLIGHT_LOG

    def run(self) -> Continuation:
        return continue_check(self.spec, self.until)

    def send(self, worker: Worker) -> Continuation:
        """The continuation in the worker; raises when it could not run (`WorkerLost`, or the
        continuation's error as `JobFailed` or `WorkloadFailed`: the checking side reports a
        failed reload)."""
        reply = worker.call(replace(self, spec=worker.here(self.spec)))
        if reply is None:
            raise WorkerLost(f"the worker process of slot {worker.slot.name} died")
        if isinstance(reply, Failed):
            raise job_error(reply, str(reply))
        return Continuation.model_validate_json(reply.body)


@dataclass(frozen=True)
class ProbeJob(Job[tuple[list[ProbePoint], str]]):
    """One variant's `ablate probe` sweep; `Done` holds its points and the device's name."""

    spec: RunSpec
    batch_sizes: list[int]
    steps: int

    def run(self) -> tuple[list[ProbePoint], str]:
        return probe_on_slot(self.spec, self.batch_sizes, self.steps)

    def dump(self, result: tuple[list[ProbePoint], str]) -> str:
        points, name = result
        return json.dumps({"points": [p.model_dump(mode="json") for p in points], "name": name})

    def send(self, worker: Worker) -> tuple[list[ProbePoint], str]:
        """The sweep on the worker's slot: its points and the device's name. A worker that
        dies (the OS killed it for memory, a CUDA fault) yields one failed point; an error
        (e.g. the workload's `probe_groups` raised) is raised, for the CLI to report."""
        reply = worker.call(replace(self, spec=worker.here(self.spec)))
        if reply is None:
            message = f"the worker process of slot {worker.slot.name} died during the probe"
            error = RunError(type="WorkerCrashed", message=message)
            return [
                ProbePoint(variant=self.spec.variant, group="?", batch_size=0, error=error)
            ], "?"
        if isinstance(reply, Failed):
            raise job_error(reply, f"probe of {self.spec.variant} failed: {reply}")
        data = json.loads(reply.body)
        return [ProbePoint.model_validate(p) for p in data["points"]], str(data["name"])


@dataclass(frozen=True)
class PreflightOnSlot:
    """A slot's worker as the preflight asks for it (`PreflightWorker`): its two jobs."""

    worker: Worker

    def preflight_start(self, spec: RunSpec, expected: dict[str, int] | None) -> PreflightStart:
        return self.worker.do(PreflightStartJob(spec, expected))

    def continue_check(self, spec: RunSpec, until: int) -> Continuation:
        return self.worker.do(ContinueJob(spec, until))


def _conforms(slot: PreflightOnSlot) -> PreflightWorker:  # typed conformance check: mypy fails here
    return slot
