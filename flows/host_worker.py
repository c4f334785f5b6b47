"""`ablate worker`: one long-lived process per GPU host taking the pool's runs.

It is Prefect's process worker (the same pool type, deployment and job variables; the UI
shows it among the pool's workers), with one change: a flow run is not a new interpreter but
a process forked from a fork server that has Prefect, the `run` flow and the store's client
imported (`flows.engine_fork`). What a run no longer pays on its host: 1.3 to 2.4 CPU s of
imports, 2 to 5 s before it is Running and 1 to 2 s of shutdown with the worker's slot held.

It takes at most as many runs at once as `ABLATE_DEVICES` has slots (a worker with a larger
`--limit` holds runs that wait for a device here while another host may be idle), and asks for
runs when it could take one (`HostWorker.get_and_submit_flow_runs`): never while every slot is
busy (Prefect's worker asks every interval regardless: with 16 busy hosts polling every
second, 30 requests per 30 s run), every `--query-seconds` (1 s) while a slot is idle, and
every `TICK_SECONDS` for `EAGER_SECONDS` after a run ends, when its campaign is about to submit
the next one (it does as soon as it sees the end: the slot is taken again within a fraction
of a second, not half a query interval later). With a slot free it also asks the moment the
server schedules a flow run (its events, `flows.run_events`; `hear_scheduled_runs`).
"""

from __future__ import annotations

import contextlib
import datetime
import math
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any
from uuid import UUID

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
from flows.run_events import FlowRunEvents

_PRELOAD = "flows.engine_fork"
TICK_SECONDS = 0.1
"""How often the worker considers asking for runs (a tick asks nothing unless a slot is free)."""
CANCEL_CHECK_SECONDS = 5.0
"""How often a host with runs in flight asks whether one was cancelled (one request)."""
EAGER_SECONDS = 2.0
"""After a run ends: ask at every tick for this long (its campaign submits its next run as it
sees the end, which its flow run reaches before its process has exited: 0.3 s after the end,
`bench/pool_scale.py`'s `end_to_next_submit_s`)."""
_WAITERS = anyio.CapacityLimiter(1024)
"""Threads that wait for a run's process to end: one per run in flight, never the bound
(anyio's default limiter, 40 threads, is shared with the worker's own calls)."""


def fork_context() -> BaseContext:
    """The fork server the worker's flow runs are forked from, Prefect preloaded in it (where
    there is no fork server, Windows, each run is spawned: it imports Prefect itself)."""
    if "forkserver" not in mp.get_all_start_methods():  # pragma: no cover - Linux and macOS have it
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload([_PRELOAD])
    return context


@dataclass
class PollPolicy:
    """When a host asks the server for runs: only with a slot free; then every
    `query_seconds`, or at every tick for `EAGER_SECONDS` after one of its runs ended."""

    query_seconds: float
    asked_at: float = -math.inf
    run_ended_at: float = -math.inf
    cancel_checked_at: float = -math.inf

    scheduled_at: float = -math.inf
    """When the server's events last said a flow run was scheduled."""

    def due(self, now: float, slot_free: bool) -> bool:
        """Whether to ask now (and if so, the ask is counted as made at `now`)."""
        if not slot_free:
            return False
        eager = now - self.run_ended_at < EAGER_SECONDS or self.scheduled_at >= self.asked_at
        if not eager and now - self.asked_at < self.query_seconds:
            return False
        self.asked_at = now
        return True

    def run_ended(self, now: float) -> None:
        self.run_ended_at = now

    def scheduled(self, now: float) -> None:
        """A flow run was scheduled: ask at the next chance (once), whatever the period."""
        self.scheduled_at = now

    def cancel_check_due(self, now: float) -> bool:
        """Whether to read the states of the runs in flight for a cancellation now: every
        `CANCEL_CHECK_SECONDS`, and only while runs are in flight (the caller's test)."""
        if now - self.cancel_checked_at < CANCEL_CHECK_SECONDS:
            return False
        self.cancel_checked_at = now
        return True


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

    def __init__(self, *args: Any, query_seconds: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._context = fork_context()
        self._processes: dict[int, BaseProcess] = {}
        self._by_flow_run: dict[UUID, BaseProcess] = {}
        self.polls = PollPolicy(query_seconds)
        self._asking = anyio.Lock()
        """One ask at a time: the ticks' and the scheduled events'."""

    async def get_and_submit_flow_runs(self) -> list[FlowRun]:
        """Ask for runs (Prefect's poll) only when `PollPolicy` says so; called every
        `TICK_SECONDS` (`serve_pool` sets Prefect's query interval to it) and as a flow run
        is scheduled (`hear_scheduled_runs`)."""
        async with self._asking:
            if self._by_flow_run and self.polls.cancel_check_due(time.monotonic()):
                self._runs_task_group.start_soon(self._cancel_those_cancelling)  # type: ignore[union-attr]
            limiter = self._limiter
            free = limiter is None or limiter.available_tokens >= 1
            if not self.polls.due(time.monotonic(), free):
                # Alive and deciding, for Prefect's healthcheck (it reads when it polled).
                self._last_polled_time = datetime.datetime.now(datetime.timezone.utc)
                return []
            return await super().get_and_submit_flow_runs()

    async def hear_scheduled_runs(self) -> None:
        """Ask for runs as the server schedules one (its events), not at the next tick: a
        campaign submits a run as it sees another end, and the host that ran it is the one
        free. A host with every slot busy does not ask (`PollPolicy`); without the events
        (`FlowRunEvents.live` clear) the ticks ask as before. Runs until cancelled."""
        import asyncio

        loop = asyncio.get_running_loop()
        heard = asyncio.Event()

        def hear(_: UUID) -> None:  # in the listener's thread
            loop.call_soon_threadsafe(heard.set)

        events = FlowRunEvents(("Scheduled",), hear, pool=self._work_pool_name)
        events.start()
        try:
            while True:
                await heard.wait()
                heard.clear()
                if self._runs_task_group is None:  # not started yet: its first tick asks
                    continue
                self.polls.scheduled(time.monotonic())
                with contextlib.suppress(Exception):  # a failed ask: the next tick's is as good
                    await self.get_and_submit_flow_runs()
                # A burst of runs scheduled at once (a campaign's first round) is one ask a
                # tick at most, as after a run's end.
                await anyio.sleep(TICK_SECONDS)
        finally:
            events.stop(timeout=0)

    async def warm(self) -> None:
        """Start the fork server now: its imports are paid before the first run, not in it;
        and import `run_engine` here (the target each run's process is given by name) off the
        event loop, not in the loop at the first run."""
        import importlib
        from multiprocessing import forkserver

        if self._context.get_start_method() == "forkserver":
            await anyio.to_thread.run_sync(forkserver.ensure_running)
        await anyio.to_thread.run_sync(importlib.import_module, _PRELOAD)

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
        self._by_flow_run[flow_run.id] = process
        if task_status is not None:
            task_status.started(pid)
        # Abandoned, not awaited, when the worker stops: `stop_runs` then ends the process.
        await anyio.to_thread.run_sync(process.join, limiter=_WAITERS, abandon_on_cancel=True)
        self._processes.pop(pid, None)
        self._by_flow_run.pop(flow_run.id, None)
        self.polls.run_ended(time.monotonic())
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

    async def _cancel_those_cancelling(self) -> None:
        """Stop this host's runs that were cancelled (in the UI): one request for all. Prefect's
        worker watches only the runs it has not started yet (a started one is its engine's, over
        a control channel a forked run has not)."""
        from prefect.client.schemas.filters import (
            FlowRunFilter,
            FlowRunFilterId,
            FlowRunFilterState,
            FlowRunFilterStateName,
        )

        ids = list(self._by_flow_run)
        if not ids:
            return
        try:
            cancelling = await self.client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    id=FlowRunFilterId(any_=ids),
                    state=FlowRunFilterState(name=FlowRunFilterStateName(any_=["Cancelling"])),
                )
            )
        except Exception:  # the server is away: the next check asks again
            return
        for flow_run in cancelling:
            await self._cancel_run(flow_run.id)

    async def _cancel_run(self, flow_run_id: UUID) -> None:
        """A flow run cancelled (in the UI) while its process runs here: stop the process,
        then mark the run Cancelled. Prefect's own worker leaves a started run to its
        engine's control channel, which a forked run has not; a run not started here is
        Prefect's case."""
        process = self._by_flow_run.get(flow_run_id)
        if process is None or not process.is_alive():
            await super()._cancel_run(flow_run_id)
            return
        await self._stop(process, STOP_GRACE_SECONDS)
        flow_run = await self.client.read_flow_run(flow_run_id)
        await self._mark_flow_run_as_cancelled(
            flow_run, state_updates={"message": f"Cancelled: {self.name} stopped its process."}
        )

    async def _stop(self, process: BaseProcess, grace_s: float) -> None:
        _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while process.is_alive() and time.monotonic() < deadline:
            await anyio.sleep(0.1)
        if process.is_alive():
            _signal(process, signal.SIGKILL)

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
        await self._stop(process, grace_seconds)


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

    worker = HostWorker(
        work_pool_name=pool,
        work_queues=queues or None,
        name=name,
        limit=limit,
        query_seconds=query_seconds,
    )

    async def serve() -> None:
        await worker.warm()
        async with anyio.create_task_group() as aside:
            aside.start_soon(worker.hear_scheduled_runs)
            try:
                await worker.start()
            finally:
                aside.cancel_scope.cancel()

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with temporary_settings(updates={PREFECT_WORKER_QUERY_SECONDS: TICK_SECONDS}):
            anyio.run(serve)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stopped = worker.stop_runs(STOP_GRACE_SECONDS)
        if stopped:
            say(f"{name}: {stopped} run(s) in flight stopped; their campaigns submit them again")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # the worker's stop, whether from a terminal or a service manager
