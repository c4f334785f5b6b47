"""The states of a campaign's flow runs in flight on a work pool, read together.

Each run's wait (`flows/pool.PoolExecutor._wait`) holds its flow run in the watch
(`FlowRunWatch.watching`) and asks for its state at each reading (`next_state`); one thread
reads the state of every flow run held in one request each `period_s`. A run's end is then
seen within a fraction of a second whatever the number in flight, for one request per period
in all (each run's wait read its own flow run every 2 s before: 8 requests a second with 16
in flight, and a run's end seen 1 s late on average).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.client.schemas.objects import State

from flows.api_outage import no_client_retries

GONE = "gone"
"""What a reading found of a flow run the server no longer has (deleted)."""


class FlowRunWatch:
    """The newest state read of each flow run held; one reading thread while any is."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self._changed = threading.Condition()
        self._held: dict[UUID, int] = {}
        """Flow run id -> how many waits hold it now."""
        self._states: dict[UUID, State | str | None] = {}
        """Flow run id -> its state at the newest reading that asked for it (None: it has
        none yet; `GONE`: the server has no such flow run)."""
        self._reads = 0
        """Readings done so far."""
        self._error: Exception | None = None
        """What the last reading raised (None: it succeeded)."""
        self._reader: threading.Thread | None = None

    @contextmanager
    def watching(self, flow_run_id: Any) -> Iterator[UUID]:
        """Hold the flow run in the readings while the block runs; its id, for `next_state`."""
        run = UUID(str(flow_run_id))
        with self._changed:
            self._held[run] = self._held.get(run, 0) + 1
            if self._reader is None:
                # In the first holder's context: its Prefect settings (the server, the
                # campaign's own retries), which a new thread would not see.
                context = contextvars.copy_context()
                self._reader = threading.Thread(
                    target=context.run, args=(self._read,), name="flow-run-watch", daemon=True
                )
                self._reader.start()
        try:
            yield run
        finally:
            with self._changed:
                self._held[run] -= 1
                if not self._held[run]:
                    del self._held[run]
                    self._states.pop(run, None)

    def next_state(self, run: UUID) -> State | str | None:
        """The held flow run's state at the next reading that asks for it (within about
        `period_s`): a `State`, None before it has one, or `GONE`; what that reading raised,
        if it failed, as a read of the run's own would have raised it."""
        with self._changed:
            target = self._reads + 1
            while self._reads < target or (run not in self._states and self._error is None):
                self._changed.wait()
            if self._error is not None:
                raise self._error
            return self._states[run]

    def _read(self) -> None:
        """Read every held flow run's state, one request a period, until none is held; a
        failure outside a request (the client's start) ends the waits with it, not hangs them."""
        try:
            # A failed reading is each wait's to retry (`ride_api` around `next_state`): with
            # Prefect's retries inside, one reading of a server gone took a minute.
            with no_client_retries():
                self._read_while_held()
        except Exception as exc:
            with self._changed:
                self._error, self._reader = exc, None
                self._reads += 1
                self._changed.notify_all()

    def _read_while_held(self) -> None:
        with get_client(sync_client=True) as client:
            while True:
                with self._changed:
                    runs = list(self._held)
                    if not runs:
                        self._reader = None
                        return
                started = time.monotonic()
                states: dict[UUID, State | str | None] = dict.fromkeys(runs, GONE)
                error: Exception | None = None
                try:
                    found = client.read_flow_runs(
                        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=runs)),
                        limit=len(runs),
                    )
                    states.update({flow_run.id: flow_run.state for flow_run in found})
                except Exception as exc:  # each wait raises it, as its own read would have
                    error = exc
                with self._changed:
                    if error is None:  # the held ones only: a wait may have ended meanwhile
                        self._states.update((r, s) for r, s in states.items() if r in self._held)
                    self._error = error
                    self._reads += 1
                    self._changed.notify_all()
                time.sleep(max(0.0, self.period_s - (time.monotonic() - started)))
