"""The states of a campaign's flow runs in flight on a work pool, read together.

Each run's wait (`flows/pool.PoolExecutor._wait`) asks `FlowRunWatch.next_state(id)`; one
thread reads the state of every flow run waited on in one request each `period_s`. A run's
end is then seen within a fraction of a second whatever the number in flight, for one request
per period in all (each run's wait read its own flow run every 2 s before: 8 requests a second
with 16 in flight, and a run's end seen 1 s late on average).
"""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.client.schemas.objects import State


class FlowRunWatch:
    """The newest state read of each flow run waited on; one reading thread while any is."""

    def __init__(self, period_s: float = 0.5) -> None:
        self.period_s = period_s
        self._changed = threading.Condition()
        self._waiters: dict[UUID, int] = {}
        """Flow run id -> how many waits are on it now."""
        self._states: dict[UUID, State | None] = {}
        self._reads = 0
        """Readings done so far: a wait returns after the next one."""
        self._error: Exception | None = None
        """What the last reading raised (None: it succeeded)."""
        self._reader: threading.Thread | None = None

    def next_state(self, flow_run_id: Any) -> State | None:
        """The flow run's state at the next reading (within `period_s`, and the request's
        time); what that reading raised, if it failed, as the run's own read raised it."""
        run = UUID(str(flow_run_id))
        with self._changed:
            self._waiters[run] = self._waiters.get(run, 0) + 1
            try:
                if self._reader is None:
                    self._reader = threading.Thread(
                        target=self._read, name="flow-run-watch", daemon=True
                    )
                    self._reader.start()
                target = self._reads + 1
                while self._reads < target:
                    self._changed.wait()
                if self._error is not None:
                    raise self._error
                return self._states.get(run)
            finally:
                self._waiters[run] -= 1
                if not self._waiters[run]:
                    del self._waiters[run]
                    self._states.pop(run, None)

    def _read(self) -> None:
        """Read every waited-on flow run's state, one request a period, until none is; a
        failure outside a request (the client's start) ends the waits with it, not hangs them."""
        try:
            self._read_while_waited_on()
        except Exception as exc:
            with self._changed:
                self._error, self._reader = exc, None
                self._reads += 1
                self._changed.notify_all()

    def _read_while_waited_on(self) -> None:
        with get_client(sync_client=True) as client:
            while True:
                with self._changed:
                    runs = list(self._waiters)
                    if not runs:
                        self._reader = None
                        return
                started = time.monotonic()
                states: dict[UUID, State | None] = {}
                error: Exception | None = None
                try:
                    found = client.read_flow_runs(
                        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=runs)),
                        limit=len(runs),
                    )
                    states = {flow_run.id: flow_run.state for flow_run in found}
                except Exception as exc:  # each wait raises it, as its own read would have
                    error = exc
                with self._changed:
                    self._states.update(states)
                    self._error = error
                    self._reads += 1
                    self._changed.notify_all()
                time.sleep(max(0.0, self.period_s - (time.monotonic() - started)))
