"""One long-lived worker process per slot, pinned to its device before torch is imported.

Importing torch costs seconds, so a slot keeps its process across runs and starts a new one
only after a crash. The child is spawned (never forked: a forked CUDA context is unusable)
and sets `CUDA_VISIBLE_DEVICES` as its very first act, so the run inside sees one card.
On Linux the workers are forked by multiprocessing's fork server, which has imported torch
once and never touches CUDA (`ablations.workers.zygote`): a worker then starts in milliseconds,
not seconds. A worker that dies fails only the run it held; the next run gets a fresh worker.

The worker knows no kind of job: it calls each `Job`'s `run()` and sends back its result or
what it raised, and `SlotWorker.do(job)` hands a job to it (`ablations.workers.messages`). The
kinds live with what they run: `ablations.workers.jobs` (a run, the preflight, a restart check's
continuation, a probe sweep) and `ablations.results.job` (the results step).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing as mp
import os
import signal
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

from ablations.errors import Problem
from ablations.process.parent_watch import (
    SERVER_PARENT_ENV,
    die_with_parent,
    exit_when_parent_goes,
    outlive_parent,
)
from ablations.process.preemption import TERMINATE, listen_for_sigterm
from ablations.run.records import RunSpec
from ablations.slots.devices import SlotSpec
from ablations.training.warmup import preload_for_training, prepare_torch_process
from ablations.workers.messages import Done, Finish, Job, Ready, Reply, Worker

R = TypeVar("R")
_POLL_SECONDS = 0.5
START_METHOD_ENV = "ABLATE_WORKER_START"
"""`spawn` starts every worker as a fresh interpreter instead of forking it from the fork
server (the default on Linux; elsewhere workers are always spawned)."""
_ZYGOTE = "ablations.workers.zygote"


def _context() -> Any:
    """The multiprocessing context the workers start from."""
    spawn = os.environ.get(START_METHOD_ENV) == "spawn"
    if spawn or "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload([_ZYGOTE])  # effective when the server starts (once)
    # Who the server's parent must be, so the server sees it died before it could ask for the
    # parent-death signal (`parent_watch.die_with_the_server_parent`).
    os.environ[SERVER_PARENT_ENV] = str(os.getpid())
    return context


@dataclass(frozen=True)
class Warmup:
    """What the campaign's slots prepare while it starts up, before their first job."""

    workload_imports: tuple[tuple[str, str], ...] = ()
    """The workload's `(field, module:attr)` imports (`WorkloadSection.named_imports`): they
    are imported at start, not in the first run, and a failure is reported as bad input."""
    restart_check: bool = False
    """The preflight's restart check is still to run (a single slot then starts a spare)."""
    preload: tuple[str, ...] = ()
    """Modules this slot imports in a background thread while it waits for its first job. The
    executor names the results step's for the slot that writes them at the end (pandas,
    matplotlib, optuna: seconds); the worker itself knows no kind of job."""
    on_terminate: bool = True
    """A SIGTERM makes the worker's run commit its step and the worker exit (the plan's
    `checkpoint.on_terminate`); off, SIGTERM kills the worker at once."""
    terminate_grace_seconds: float = 30.0
    """After a SIGTERM the worker exits within this, saved or not."""
    log_dir: str | None = None
    """The campaign folder's root: a job naming a log (`Job.log_name`) prints into it there,
    not onto the campaign's terminal (`ablations.workers.output`). None: the terminal."""


def _serve(
    conn: Connection,
    environ: dict[str, str],
    visible_devices: str,
    cpu_threads: int,
    workload_imports: tuple[tuple[str, str], ...],
    preload: tuple[str, ...],
    parent_pid: int,
    signal_on_parent_death: bool,
    terminate_grace_seconds: float | None,
    log_dir: str | None = None,
) -> None:
    """The child's main loop: receive jobs, do them, send each one's reply. With a grace
    period, a SIGTERM ends the run in progress at its next step with a checkpoint there
    (`ablations.process.preemption`) and the child after that run's reply."""
    # The campaign's environment as of this start: a forked child inherits the fork
    # server's, taken when the server started.
    os.environ.clear()
    os.environ.update(environ)
    # A Ctrl-C at the terminal reaches the whole process group, this child too: the campaign
    # process alone decides what it means (its runs commit and stop on the SIGTERM it passes
    # on), so the child's run is not torn out from under it by a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if terminate_grace_seconds is not None:
        listen_for_sigterm(then=functools.partial(outlive_parent, terminate_grace_seconds))
    # Die with the campaign process, kill -9 included, even mid-run: nothing of a dead
    # campaign trains on or writes the store. The signal only when the main thread started
    # this child (it follows the starting thread); the pipe's hang-up in every case.
    if signal_on_parent_death:
        die_with_parent(signal.SIGKILL)
    exit_when_parent_goes(conn, parent_pid)
    conn.send(Ready(prepare_torch_process(visible_devices, cpu_threads, workload_imports)))
    preload_for_training()
    for module in preload:
        load = functools.partial(importlib.import_module, module)
        threading.Thread(target=load, daemon=True).start()
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
        name = message.log_name()
        if name is None or log_dir is None:
            reply = _do(message)
        else:  # the job's frameworks talk into its log, not over the progress lines
            from ablations.workers.output import output_to

            with output_to(Path(log_dir), name):
                reply = _do(message)
        with contextlib.suppress(OSError):  # a parent gone while its run saved: nobody to tell
            conn.send(reply)
        if TERMINATE.requested:  # asked to stop: its run (if any) has committed and replied
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


def _start_and_close(process: Any, child: Connection) -> None:
    """Start the child, then close this process's copy of the child's end of the pipe (its
    hang-up then means the child is gone)."""
    try:
        process.start()
    finally:
        child.close()


def _do(job: Job[Any]) -> Reply:
    """One job in this process: its result, or what it raised (as the job makes a reply of it:
    a preflight's error ends the worker)."""
    try:
        return Done(job.dump(job.run()))
    except Exception as exc:
        return job.failure(exc)


class SlotWorker:
    """The parent's handle on one slot's worker process."""

    def __init__(self, slot: SlotSpec, warmup: Warmup | None = None) -> None:
        self.slot = slot
        self.warmup = warmup or Warmup()
        self._started_process: Any = None
        self._starting: threading.Thread | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._warmed: bool = False
        self._workload_problem: Problem | None = None
        self.restarts = 0

    def start(self) -> None:
        """Start the worker process unless it runs (returns at once; the child imports torch)."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                if self._process is not None:
                    self.restarts += 1
                self._start()

    def _start(self) -> None:
        context = _context()
        forked = context.get_start_method() == "forkserver"
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(
                child,
                dict(os.environ),
                self.slot.visible_devices,
                self.slot.cpu_threads,
                self.warmup.workload_imports,
                self.warmup.preload,
                os.getpid(),
                # The parent-death signal follows the thread that started the child: only a
                # child spawned by this process's main thread can use it. A forked child's
                # parent is the fork server: it watches the pipe and the campaign's pid alone.
                not forked and threading.current_thread() is threading.main_thread(),
                self.warmup.terminate_grace_seconds if self.warmup.on_terminate else None,
                self.warmup.log_dir,
            ),
            name=f"ablate-slot-{self.slot.name}",
            daemon=True,
        )
        if forked:
            # The first start waits for the fork server to import torch (seconds): in the
            # background, as a spawned child's own import would be.
            starting = threading.Thread(target=_start_and_close, args=(process, child))
            starting.start()
            self._starting = starting
        else:
            _start_and_close(process, child)
            self._starting = None
        self._process, self._conn = process, parent
        self._warmed = False

    @property
    def _process(self) -> Any:
        """The worker's `multiprocessing.Process`, started (None before the first start)."""
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        return self._started_process

    @_process.setter
    def _process(self, process: Any) -> None:
        self._started_process = process

    @property
    def pid(self) -> int | None:
        """The worker process's id (None before it starts)."""
        return self._process.pid if self._process is not None else None

    def workload_problem(self) -> Problem | None:
        """Wait for the worker's warm-up; why the workload does not import there, or None.
        A SIGTERM to this process ends the wait (the caller sees `TERMINATE.requested`)."""
        with self._lock:
            if self._process is None:
                self._start()
            self._await_warmup(until_terminate=True)
            return self._workload_problem

    def _await_warmup(self, *, until_terminate: bool = False) -> None:
        """Read the warm-up report the child sends first (once per process; lock held)."""
        if self._warmed:
            return
        received, ready = self._receive(until_terminate=until_terminate)
        if received:  # else it died: the job that follows finds it dead and reports that
            assert isinstance(ready, Ready)
            self._workload_problem, self._warmed = ready.workload_problem, True

    def _receive(self, *, until_terminate: bool = False) -> tuple[bool, Any]:
        """(True, the child's next message), or (False, None) once the child has died (or,
        `until_terminate`, once this process is asked to terminate)."""
        assert self._conn is not None
        try:
            while not self._conn.poll(_POLL_SECONDS):
                if not self._process.is_alive() or (until_terminate and TERMINATE.requested):
                    # A child that replies and exits (its run committed on a SIGTERM) may do
                    # both between the poll and this check: its reply is still in the pipe.
                    if not self._conn.poll(0):
                        return False, None
                    break
            return True, self._conn.recv()
        except (EOFError, OSError):
            return False, None

    def do(self, job: Job[R]) -> R:
        """The job's result from this worker, as the job makes it of the reply (`Job.send`)."""
        return job.send(self)

    def here(self, spec: RunSpec) -> RunSpec:
        """The spec on this slot's device as its worker process sees it."""
        return spec.model_copy(update={"device": self.slot.local_device})

    def call(self, job: Job[Any]) -> Reply | None:
        """Send one job and wait for its reply; None when the worker died meanwhile (then
        `reap` it)."""
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

    def reap(self) -> int | None:
        """The exit code of a worker that died under a job; the next job starts a fresh one."""
        code = None
        if self._process is not None:
            self._process.join(timeout=5)
            code = self._process.exitcode
            self._process = None
            self.restarts += 1
        return code

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
            # A worker still warming up holds no run: nothing of it to wait for.
            grace = TERMINATE.remaining(self.warmup.terminate_grace_seconds)
            timeout = grace if self._warmed else 0.0
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


def _conforms(worker: SlotWorker) -> Worker:  # the typed conformance check: mypy fails here
    return worker
