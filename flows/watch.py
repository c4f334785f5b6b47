"""The states of a campaign's flow runs in flight on a work pool, read together.

Each run's wait (`flows/pool.PoolExecutor._wait`) holds its flow run in the watch
(`FlowRunWatch.watching`) and asks for its state at each reading (`next_state`); one thread
reads the state of every flow run held in one request each `period_s`. A run's end is then
seen within a fraction of a second whatever the number in flight, for one request per period
in all (each run's wait read its own flow run every 2 s before: 8 requests a second with 16
in flight, and a run's end seen 1 s late on average).

While the server's events of runs ending are heard (`flows.run_events.FlowRunEvents`), the reading
thread reads at once when a held run ends and every `heard_period_s` otherwise: an end is
seen within a few hundredths of a second, for a fraction of the readings.
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
from flows.run_events import FINAL_STATES, FlowRunEvents

HEARD_RETRY_S = 0.1
"""How soon a run whose end was heard is read again when a reading did not show it yet."""
GONE = "gone"
"""What a reading found of a flow run the server no longer has (deleted)."""


class FlowRunWatch:
    """The newest state read of each flow run held; one reading thread while any is."""

    def __init__(self, period_s: float = 0.5, heard_period_s: float | None = None) -> None:
        self.period_s = period_s
        self.heard_period_s = period_s if heard_period_s is None else heard_period_s
        """The period while the server's end events are heard (an end is read at once)."""
        self._woken = threading.Event()
        """Set when a held run's end was heard: the reading thread reads now."""
        self._heard: set[UUID] = set()
        """Held runs whose end was heard and not yet read (the reading was too early)."""
        self._ends: FlowRunEvents | None = None
        """The reading thread's subscription to the server's end events."""
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
                    self._heard.discard(run)

    @property
    def hears_ends(self) -> bool:
        """Whether runs' ends are heard from the server's events now (read at once)."""
        ends = self._ends
        return ends is not None and ends.live.is_set()

    def _heard_end(self, run: UUID) -> None:
        with self._changed:
            if run in self._held:
                self._heard.add(run)
                self._woken.set()

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
        ends = FlowRunEvents(FINAL_STATES, self._heard_end)  # this reading thread's
        self._ends = ends
        ends.start()
        try:
            # A failed reading is each wait's to retry (`ride_api` around `next_state`): with
            # Prefect's retries inside, one reading of a server gone took a minute.
            with no_client_retries():
                self._read_while_held(ends)
        except Exception as exc:
            with self._changed:
                self._error, self._reader = exc, None
                self._reads += 1
                self._changed.notify_all()
        finally:
            ends.stop(timeout=0)

    def _read_while_held(self, ends: FlowRunEvents) -> None:
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
                        self._heard = {r for r in self._heard if not _final(self._states.get(r))}
                    self._error = error
                    self._reads += 1
                    self._changed.notify_all()
                    period = self.heard_period_s if ends.live.is_set() else self.period_s
                    if self._heard:  # heard ended, read before its state was: soon again
                        period = min(period, HEARD_RETRY_S)
                self._woken.wait(max(0.0, period - (time.monotonic() - started)))
                self._woken.clear()


def _final(state: State | str | None) -> bool:
    return isinstance(state, State) and state.is_final()
