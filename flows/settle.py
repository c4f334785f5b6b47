"""Final states for the flow runs whose result the campaign took from the store.

A run that ended while the Prefect server was down committed its result to the store, but its
flow run's final state never reached the server (its process gave up reporting it and
exited): the UI showed that run Running for good, although the campaign had accepted its
result (`flows/pool.PoolExecutor._wait`, "result committed"). Each such flow run is set
Completed here, its message saying where the result came from, once the server answers again.
Best-effort: a state the server never takes is logged, never a campaign's failure.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.states import Completed

from flows.api_outage import no_client_retries, server_failed

log = logging.getLogger(__name__)

FROM_THE_STORE = (
    "result taken from the store by campaign {campaign}: this flow run's own final state "
    "never reached the Prefect server (down as the run ended)"
)
"""The message of the Completed state set here: why the campaign, not the run, set it."""


class Unsettled:
    """Flow runs left unfinished on the server whose result the campaign took: each set
    Completed at the first `settle` that finds the server answering."""

    def __init__(self) -> None:
        self._pending: dict[UUID, str] = {}
        """Flow run id -> the message of its Completed state."""
        self._settling = threading.Lock()
        """Held by the one thread settling now: the others go on at once, not queue up."""

    def __bool__(self) -> bool:
        return bool(self._pending)

    def add(self, flow_run_id: Any, campaign_id: str) -> None:
        """Keep the flow run to settle; `settle` sets it."""
        self._pending[UUID(str(flow_run_id))] = FROM_THE_STORE.format(campaign=campaign_id)

    def settle(self) -> int:
        """Try each flow run kept, once, now: one already final on the server is left as it
        is, the others set Completed. How many are still kept (the server did not answer).
        Never raises: a campaign never fails for the UI's view of a run it has accepted."""
        if not self._pending or not self._settling.acquire(blocking=False):
            return len(self._pending)
        try:
            # One refused request is the answer: the next state read that succeeds tries again.
            with no_client_retries(), get_client(sync_client=True) as client:
                for run, message in list(self._pending.items()):
                    try:
                        state = client.read_flow_run(run).state
                        if state is None or not state.is_final():
                            # Forced, as the campaign's Crashed for a lost attempt is: the
                            # state is the campaign's finding, its run's process has ended.
                            client.set_flow_run_state(run, Completed(message=message), force=True)
                    except Exception as exc:
                        if server_failed(exc):
                            break  # still down: kept for the next try
                        log.warning("flow run %s not set Completed: %s", run, exc)
                    del self._pending[run]
        except Exception as exc:  # the client's first request (its version check) refused
            if not server_failed(exc):  # given up: the same would come back at every try
                log.warning("flow runs %s not set Completed: %s", list(self._pending), exc)
                self._pending.clear()
        finally:
            self._settling.release()
        return len(self._pending)
