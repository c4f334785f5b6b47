"""`ablate worker`: one long-lived process per GPU host taking the pool's runs.

It is Prefect's process worker (the same pool type, deployment and job variables; the UI
shows it among the pool's workers), with one change: a flow run is not a new interpreter but
a process forked from a fork server that has Prefect, the `run` flow and the store's client
imported (`flows.engine_fork`). What a run no longer pays on its host: 1.3 to 2.4 CPU s of
imports, 2 to 5 s before it is Running and 1 to 2 s of shutdown with the worker's slot held.

Two defaults differ from `prefect worker start`, both from the host's devices: the worker
takes at most as many runs at once as `ABLATE_DEVICES` has slots (a worker with a larger
`--limit` holds runs that wait for a device here while another host may be idle), and asks
for runs every second (`--query-seconds`; Prefect's default of 10 s is 5 s of waiting per
run on average).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from prefect.client.schemas.objects import FlowRun
from prefect.exceptions import InfrastructureNotFound
from prefect.workers.process import (
    ProcessJobConfiguration,
    ProcessWorker,
    ProcessWorkerResult,
)

from ablations.text.say import say

_PRELOAD = "flows.engine_fork"
_WAITERS = anyio.CapacityLimiter(1024)
"""Threads that wait for a run's process to end: one per run in flight, never the bound
(anyio's default limiter, 40 threads, is shared with the worker's own calls)."""


def fork_context() -> BaseContext:
    """The fork server the worker's flow runs are forked from, Prefect preloaded in it."""
    context = mp.get_context("forkserver")
    context.set_forkserver_preload([_PRELOAD])
    return context


class HostWorker(ProcessWorker):
    """Prefect's process worker, its flow runs forked from a warm server (`engine_fork`)."""

    _description = (
        "Runs each flow run as a process forked from a server with Prefect and ablate "
        "imported (ablate worker)."
    )
    _display_name = "ablate host"

    @classmethod
    def __dispatch_key__(cls) -> str:
        # Registered apart from Prefect's `process` worker, whose pools it still serves.
        return "ablate-host"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._context = fork_context()
        self._processes: dict[int, BaseProcess] = {}

    async def warm(self) -> None:
        """Start the fork server now: its imports are paid before the first run, not in it."""
        from multiprocessing import forkserver

        await anyio.to_thread.run_sync(forkserver.ensure_running)

    async def run(
        self,
        flow_run: FlowRun,
        configuration: ProcessJobConfiguration,
        task_status: anyio.abc.TaskStatus[int] | None = None,
    ) -> ProcessWorkerResult:
        from flows.engine_fork import run_engine  # the server's copy is the one that runs

        working_dir = str(configuration.working_dir) if configuration.working_dir else None
        process = self._context.Process(  # type: ignore[attr-defined]
            target=run_engine,
            args=(str(flow_run.id), dict(configuration.env), working_dir),
            name=f"flow-run-{flow_run.id}",
        )
        await anyio.to_thread.run_sync(process.start)
        pid = process.pid
        if pid is None:  # pragma: no cover - start() returns with a pid or raises
            raise RuntimeError(f"flow run {flow_run.id}: its process did not start")
        self._processes[pid] = process
        if task_status is not None:
            task_status.started(pid)
        # Abandoned, not awaited, when the worker stops: `stop_runs` then ends the process.
        await anyio.to_thread.run_sync(process.join, limiter=_WAITERS, abandon_on_cancel=True)
        self._processes.pop(pid, None)
        code = process.exitcode
        return ProcessWorkerResult(status_code=-1 if code is None else code, identifier=str(pid))

    def stop_runs(self, grace_s: float) -> int:
        """SIGTERM to every run still in flight as the worker stops, SIGKILL to those alive
        `grace_s` later; how many there were. The campaign sees their heartbeats stop and
        submits them again (to another host, or this one restarted), from their last
        checkpoint."""
        alive = [p for p in self._processes.values() if p.is_alive()]
        for process in alive:
            _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in alive:
            if process.is_alive():
                _signal(process, signal.SIGKILL)
                process.join(5)
        return len(alive)

    async def kill_infrastructure(
        self,
        infrastructure_pid: str,
        configuration: ProcessJobConfiguration,
        grace_seconds: int = 30,
    ) -> None:
        """SIGTERM to one of this worker's flow runs (its run saves and stops, see
        `checkpoint.on_terminate`), SIGKILL after `grace_seconds`."""
        pid = int(infrastructure_pid.rsplit(":", 1)[-1])
        process = self._processes.get(pid)
        if process is None or not process.is_alive():
            raise InfrastructureNotFound(f"flow run process {pid} is not this worker's")
        _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_seconds
        while process.is_alive() and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        if process.is_alive():
            _signal(process, signal.SIGKILL)


def _signal(process: BaseProcess, signum: int) -> None:
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)


STOP_GRACE_SECONDS = 30.0
"""How long the runs in flight have to save and stop once the worker is told to stop."""


def serve_pool(
    pool: str, *, queues: list[str], limit: int, name: str, query_seconds: float
) -> None:
    """Take the pool's runs until interrupted. Ctrl-C or SIGTERM end it the same way (the
    command's `interrupted`, exit 130): the runs in flight are told to stop (`stop_runs`)."""
    from prefect.settings import PREFECT_WORKER_QUERY_SECONDS, temporary_settings

    worker = HostWorker(work_pool_name=pool, work_queues=queues or None, name=name, limit=limit)

    async def serve() -> None:
        await worker.warm()
        await worker.start()

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with temporary_settings(updates={PREFECT_WORKER_QUERY_SECONDS: query_seconds}):
            anyio.run(serve)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stopped = worker.stop_runs(STOP_GRACE_SECONDS)
        if stopped:
            say(f"{name}: {stopped} run(s) in flight stopped; their campaigns submit them again")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the worker's stop, whether from a terminal or a service manager
