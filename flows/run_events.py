"""The server's word that a flow run changed state, as it happens: its events, subscribed to.

A campaign on a work pool learns that a run ended by reading the states of its flow runs
(`flows.watch.FlowRunWatch`), and a host that a run waits for it by asking the server
(`flows.host_worker`). Read every quarter second, an end was still seen 0.13 s late on
average, and at 16 hosts the readings were a large share of the server's work (each one
returns every flow run out). `FlowRunEvents` listens to the server's events of flow runs
entering the states named (one websocket, `/events/out`) and calls `on_event` with each one's
id: the watch reads at once when one of its runs ends (`FINAL_STATES`) and seldom otherwise;
a host with a free slot asks for runs as one is `Scheduled`.

An event is only a reason to read: the state read from the API is what a run's wait acts on,
and what the server hands a worker is what it runs. Where the stream is not there (a server
with it turned off, a proxy that drops websockets, the server restarting), `live` is clear and
each reads at its own period, as before; the listener subscribes again `RETRY_SECONDS` later.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from uuid import UUID

from prefect.events.clients import get_events_subscriber
from prefect.events.filters import EventFilter, EventNameFilter
from prefect.events.schemas.events import Event

FINAL_STATES = ("Completed", "Failed", "Crashed", "Cancelled", "TimedOut")
"""The names of the final states a `run` flow run ends in (an end by another name is seen by
the watch's next reading)."""
RETRY_SECONDS = 5.0
"""How long after a lost or refused subscription the listener subscribes again."""
_PREFIX = "prefect.flow-run."


class FlowRunEvents:
    """One thread subscribed to the server's events of flow runs entering `states` (names)
    while started, of work pool `pool`'s flow runs only if given; `on_event` is called in that
    thread."""

    def __init__(
        self, states: tuple[str, ...], on_event: Callable[[UUID], None], pool: str | None = None
    ) -> None:
        self._names = [f"{_PREFIX}{state}" for state in states]
        self._on_event = on_event
        self._pool = pool
        self.live = threading.Event()
        """Set while subscribed: the changes are heard as they happen."""
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen from now on, in a thread that runs in the caller's context (its Prefect
        settings: the server to subscribe to)."""
        self._stopping.clear()
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="flow-run-events", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Unsubscribe and end the thread (within `timeout`: it is a daemon otherwise)."""
        self._stopping.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: the thread is ending
                loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(timeout)
        self.live.clear()

    def _run(self) -> None:
        while not self._stopping.is_set():
            # Any failure (cancelled by `stop` included) means: the watch reads at its period.
            with contextlib.suppress(BaseException):
                asyncio.run(self._subscribed())
            self.live.clear()
            self._loop = self._task = None
            self._stopping.wait(RETRY_SECONDS)

    async def _subscribed(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        if self._stopping.is_set():  # stopped before the task could be cancelled
            return
        only_these = EventFilter(event=EventNameFilter(name=self._names))
        # A few reconnections before the listener's own retry (each one a second apart).
        async with get_events_subscriber(filter=only_these, reconnection_attempts=2) as events:
            self.live.set()
            async for event in events:
                if self._pool is not None and not _in_pool(event, self._pool):
                    continue  # another pool's (a team's server has several)
                try:
                    run = UUID(event.resource.id.removeprefix(_PREFIX))
                except ValueError:  # not a flow run's id: not ours
                    continue
                self._on_event(run)


def _in_pool(event: Event, pool: str) -> bool:
    return any(related.role == "work-pool" and related.name == pool for related in event.related)
