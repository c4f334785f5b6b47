"""One long-lived worker process per slot, pinned to its device before torch is imported.

Importing torch costs seconds, so a slot keeps its process across runs and starts a new one
only after a crash. The child is spawned (never forked: a forked CUDA context is unusable)
and sets `CUDA_VISIBLE_DEVICES` as its very first act, so the run inside sees one card.
A worker that dies fails only the run it held; the next run gets a fresh worker.

Jobs (`ablations.slots.messages`): a run (its record back), the whole preflight on this slot
(work-pool hosts), the campaign's preflight up to the restart check's verdict, a restart
check's continuation (in a process that did not save it), the campaign's results step (so the
campaign process never loads their libraries) and one variant's `ablate probe` sweep.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ablations.preemption import TERMINATE, listen_for_sigterm
from ablations.preflight.across import PreflightStart, PreflightWorker
from ablations.preflight.verdict import Continuation
from ablations.progress import say
from ablations.records import PreflightReport, RunError, RunRecord, RunSpec
from ablations.slots.devices import SlotSpec
from ablations.slots.messages import (
    ContinueJob,
    Done,
    Failed,
    Finish,
    Job,
    PreflightJob,
    PreflightStartJob,
    ProbeJob,
    Ready,
    Reply,
    ResultsJob,
    RunJob,
    WorkerLost,
    job_error,
)
from ablations.slots.parent_watch import (
    die_with_parent,
    exit_when_parent_goes,
    outlive_parent,
)
from ablations.training.warmup import preload_for_training, prepare_torch_process

if TYPE_CHECKING:
    from ablations.probe.point import ProbePoint

_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Warmup:
    """What the campaign's slots prepare while it starts up, before their first job."""

    workload_entry: str | None = None
    """The workload's `module:Class`: its module is imported at start, not in the first run."""
    restart_check: bool = False
    """The preflight's restart check is still to run (a single slot then starts a spare)."""
    results: bool = False
    """This slot writes the results at the end: it imports their libraries (pandas,
    matplotlib, optuna: seconds) in the background while it waits for its first job."""
    on_terminate: bool = True
    """A SIGTERM makes the worker's run commit its step and the worker exit (the plan's
    `checkpoint.on_terminate`); off, SIGTERM kills the worker at once."""
    terminate_grace_seconds: float = 30.0
    """After a SIGTERM the worker exits within this, saved or not."""


def _serve(
    conn: Connection,
    visible_devices: str,
    cpu_threads: int,
    workload_entry: str | None,
    results: bool,
    parent_pid: int,
    signal_on_parent_death: bool,
    terminate_grace_seconds: float | None,
) -> None:
    """The child's main loop: receive jobs, do them, send each one's reply. With a grace
    period, a SIGTERM ends the run in progress at its next step with a checkpoint there
    (`ablations.preemption`) and the child after that run's reply."""
    if terminate_grace_seconds is not None:
        listen_for_sigterm(then=functools.partial(outlive_parent, terminate_grace_seconds))
    # Die with the campaign process, kill -9 included, even mid-run: nothing of a dead
    # campaign trains on or writes the store. The signal only when the main thread started
    # this child (it follows the starting thread); the pipe's hang-up in every case.
    if signal_on_parent_death:
        die_with_parent(signal.SIGKILL)
    exit_when_parent_goes(conn, parent_pid)
    conn.send(Ready(prepare_torch_process(visible_devices, cpu_threads, workload_entry)))
    preload_for_training()
    if results:
        preload = functools.partial(importlib.import_module, "ablations.outputs.export")
        threading.Thread(target=preload, daemon=True).start()
    while True:
        try:
            message = conn.recv()
        except EOFError:
            message = Finish()
        if isinstance(message, Finish):
            # Every result is sent and every file closed: skip the interpreter's teardown of
            # torch and the workload's libraries, a second or more of CPU per worker.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        reply = _do(message)
        with contextlib.suppress(OSError):  # a parent gone while its run saved: nobody to tell
            conn.send(reply)
        if TERMINATE.requested:  # asked to stop: its run (if any) has committed and replied
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


def _do(job: Job) -> Reply:
    """One job in this process: its result, or what it raised."""
    from ablations.slots.jobs import continue_check, preflight_start, run_preflight, run_spec

    if isinstance(job, ResultsJob):
        return _write_outputs(job.out_dir)
    if isinstance(job, ProbeJob):
        return _probe(job)
    if isinstance(job, PreflightJob):
        return Done(run_preflight(job.spec, job.expected_inputs).model_dump_json())
    if isinstance(job, PreflightStartJob):
        start = preflight_start(job.spec, job.expected_inputs, continue_elsewhere=True)
        return Done(start.model_dump_json())
    try:
        if isinstance(job, ContinueJob):
            return Done(continue_check(job.spec, job.until).model_dump_json())
        return Done(run_spec(job.spec).model_dump_json())
    except Exception as exc:  # a continuation's: the checking side reports a failed reload;
        return Failed.of(exc)  # a run's: the host failed it (a full disk, a store down)


def _write_outputs(out_dir: str) -> Reply:
    """The results step in this process: the manifest's path, or what went wrong."""
    try:
        from ablations.outputs.export import write_outputs_at

        return Done(str(write_outputs_at(Path(out_dir))))
    except Exception as exc:  # the campaign process raises it as the results task's error;
        return Failed.of(exc, cause="infrastructure")  # no workload code runs in this step


def _probe(job: ProbeJob) -> Reply:
    """A variant's probe sweep as JSON (points and the card's name), or the error."""
    try:
        import torch

        from ablations.probe.point import probe_variant

        points = probe_variant(job.spec, job.batch_sizes, job.steps)
        device = torch.device(job.spec.device)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        body = {"points": [p.model_dump(mode="json") for p in points], "name": name}
        return Done(json.dumps(body))
    except Exception as exc:  # e.g. the workload's `probe_groups` raised: the CLI reports it
        return Failed.of(exc)


class SlotWorker:
    """The parent's handle on one slot's worker process."""

    def __init__(self, slot: SlotSpec, warmup: Warmup | None = None) -> None:
        self.slot = slot
        self.warmup = warmup or Warmup()
        self._process: Any = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._warmed: bool = False
        self._workload_problem: str | None = None
        self.restarts = 0

    def start(self) -> None:
        """Start the worker process unless it runs (returns at once; the child imports torch)."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                if self._process is not None:
                    self.restarts += 1
                self._start()

    def _start(self) -> None:
        context = mp.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(
                child,
                self.slot.visible_devices,
                self.slot.cpu_threads,
                self.warmup.workload_entry,
                self.warmup.results,
                os.getpid(),
                threading.current_thread() is threading.main_thread(),
                self.warmup.terminate_grace_seconds if self.warmup.on_terminate else None,
            ),
            name=f"ablate-slot-{self.slot.name}",
            daemon=True,
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent
        self._warmed = False

    @property
    def pid(self) -> int | None:
        """The worker process's id (None before it starts)."""
        return self._process.pid if self._process is not None else None

    def workload_problem(self) -> str | None:
        """Wait for the worker's warm-up; why the workload does not import there, or None."""
        with self._lock:
            if self._process is None:
                self._start()
            self._await_warmup()
            return self._workload_problem

    def _await_warmup(self) -> None:
        """Read the warm-up report the child sends first (once per process; lock held)."""
        if self._warmed:
            return
        received, ready = self._receive()
        if received:  # else it died: the job that follows finds it dead and reports that
            assert isinstance(ready, Ready)
            self._workload_problem, self._warmed = ready.workload_problem, True

    def _receive(self) -> tuple[bool, Any]:
        """(True, the child's next message), or (False, None) once the child has died."""
        assert self._conn is not None
        try:
            while not self._conn.poll(_POLL_SECONDS):
                if not self._process.is_alive():
                    return False, None
            return True, self._conn.recv()
        except (EOFError, OSError):
            return False, None

    def run(self, spec: RunSpec) -> RunRecord:
        """Execute one run on this slot. A worker that dies under it (not the workload raising:
        that is a record) is replaced, and the run retried once from its last committed
        checkpoint; a second death yields a `failed` record that a rerun retries."""
        started = time.time()
        reply = self._call(RunJob(self._here(spec)))
        if reply is None:
            lost = self._crashed(spec, started)
            say(f"  {spec.run_id}: {lost.error}; retrying once on a fresh worker")
            reply = self._call(RunJob(self._here(spec)))
        if reply is None:
            return self._crashed(spec, started)
        if isinstance(reply, Failed):  # a rerun retries it, once the disk or store is back
            return RunRecord.failed(
                spec, reply.error_type, reply.message, device=self.slot.device,
                slot=self.slot.name, started_at=started, ended_at=time.time(),
            )  # fmt: skip
        record = RunRecord.model_validate_json(reply.body)
        if record.interrupted:  # its worker exits after this reply: a next run starts afresh
            self.close()
        return record.model_copy(update={"slot": self.slot.name})

    def preflight(self, spec: RunSpec, expected: dict[str, int] | None) -> PreflightReport:
        """The data and restart checks, wholly on this slot's device."""
        reply = self._call(PreflightJob(self._here(spec), expected))
        if reply is None:
            return self._died_in_preflight().finish()
        assert isinstance(reply, Done)  # a preflight reports its own errors
        return PreflightReport.model_validate_json(reply.body)

    def preflight_start(self, spec: RunSpec, expected: dict[str, int] | None) -> PreflightStart:
        """The data check and the restart check's reference half on this slot's device."""
        reply = self._call(PreflightStartJob(self._here(spec), expected))
        if reply is None:
            return self._died_in_preflight()
        assert isinstance(reply, Done)  # a preflight reports its own errors
        return PreflightStart.model_validate_json(reply.body)

    def continue_check(self, spec: RunSpec, until: int) -> Continuation:
        """A restart check's continuation in this worker; raises when it could not run
        (`WorkerLost`, or the continuation's error as `JobFailed` or `WorkloadFailed`)."""
        reply = self._call(ContinueJob(self._here(spec), until))
        if reply is None:
            raise WorkerLost(f"the worker process of slot {self.slot.name} died")
        if isinstance(reply, Failed):
            raise job_error(reply, str(reply))
        return Continuation.model_validate_json(reply.body)

    def probe(
        self, spec: RunSpec, batch_sizes: list[int], steps: int
    ) -> tuple[list[ProbePoint], str]:
        """One variant's probe sweep on this slot: its points and the device's name. A worker
        that dies (the OS killed it for memory, a CUDA fault) yields one failed point."""
        from ablations.probe.point import ProbePoint

        reply = self._call(ProbeJob(self._here(spec), batch_sizes, steps))
        if reply is None:
            message = f"the worker process of slot {self.slot.name} died during the probe"
            error = RunError(type="WorkerCrashed", message=message)
            return [ProbePoint(variant=spec.variant, group="?", batch_size=0, error=error)], "?"
        if isinstance(reply, Failed):
            raise job_error(reply, f"probe of {spec.variant} failed: {reply}")
        data = json.loads(reply.body)
        return [ProbePoint.model_validate(p) for p in data["points"]], str(data["name"])

    def write_outputs(self, out_dir: Path) -> Path:
        """The results step (ledger, report, manifest) in this worker; raises on failure
        (`WorkerLost`, or `JobFailed` naming what the step raised)."""
        reply = self._call(ResultsJob(str(out_dir)))
        if reply is None:
            raise WorkerLost(f"the worker process of slot {self.slot.name} died writing results")
        if isinstance(reply, Failed):
            raise job_error(reply, f"writing the results failed: {reply}")
        return Path(reply.body)

    def _died_in_preflight(self) -> PreflightStart:
        message = f"the worker process of slot {self.slot.name} died during preflight"
        return PreflightStart(error=RunError(type="WorkerCrashed", message=message))

    def _here(self, spec: RunSpec) -> RunSpec:
        """The spec on this slot's device as its worker process sees it."""
        return spec.model_copy(update={"device": self.slot.local_device})

    def _call(self, job: Job) -> Reply | None:
        """Send one job and wait for its reply; None when the worker died meanwhile."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                if self._process is not None:
                    self.restarts += 1
                self._start()
            assert self._conn is not None
            self._await_warmup()
            try:
                self._conn.send(job)
            except OSError:
                return None
            try:
                received, reply = self._receive()
            except BaseException:  # this process is being stopped (Prefect raises on SIGTERM)
                self.terminate(wait=True)  # the child's run commits its step before it goes
                raise
            return reply if received else None

    def _crashed(self, spec: RunSpec, started: float) -> RunRecord:
        code = None
        if self._process is not None:
            self._process.join(timeout=5)
            code = self._process.exitcode
            self._process = None
            self.restarts += 1  # the next run starts a fresh worker
        return RunRecord.failed(
            spec,
            "WorkerCrashed",
            f"the worker process of slot {self.slot.name} died (exit code {code})",
            device=self.slot.device,
            slot=self.slot.name,
            started_at=started,
            ended_at=time.time(),
        )

    def terminate(self, *, wait: bool = False) -> None:
        """Pass a SIGTERM on to the worker: its run commits its current step and the worker
        exits (`wait`: within the grace period). Without `on_terminate`, it is killed."""
        process = self._process
        if process is None or not process.is_alive():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        if wait:
            process.join(timeout=TERMINATE.remaining(self.warmup.terminate_grace_seconds))

    def close(self, *, wait: bool = True) -> None:
        """Ask the worker to finish, then make sure it is gone (`wait=False`: kill it now,
        as when the campaign stops on an error; its run resumes from its checkpoint). Once
        this process was asked to terminate, it waits for the worker's save (the grace)."""
        self.ask_to_finish()
        if self._process is None:
            return
        timeout = 10.0 if wait else 0.0
        if TERMINATE.requested and self.warmup.on_terminate:
            timeout = TERMINATE.remaining(self.warmup.terminate_grace_seconds)
        self._process.join(timeout=timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5)
        self._process = None

    def ask_to_finish(self) -> None:
        """Tell the worker to exit after its current job (returns at once; `close` waits)."""
        if self._process is None or self._conn is None:
            return
        with contextlib.suppress(OSError):  # a broken pipe: it is gone already
            self._conn.send(Finish())


def _conforms(worker: SlotWorker) -> PreflightWorker:  # typed conformance check: mypy fails here
    return worker
