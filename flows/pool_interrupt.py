"""A Ctrl-C or SIGTERM to a campaign on a work pool: it ends at once and submits nothing more.

A pool campaign's runs are flow runs of their own on their hosts: nothing in the campaign's
process trains, so nothing there needs saving, and every write to its folder is atomic (a kill
of the process leaves the folder as a rerun expects). So on the signal the campaign submits
nothing more (`PoolExecutor.terminate`), sets its own flow run Cancelled on the server (best
effort, for a few seconds at most, so the UI does not show it running for good), says so in
one line and exits: 130 after a Ctrl-C, 1 after a SIGTERM. Its runs out on the pool go on; a
rerun of the same command takes the results of those that finished from the store and submits
the rest. Before this the process waited for every run out, then its task threads submitted
the runs they held (a Ctrl-C left a campaign going for minutes).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType
from typing import Any
from uuid import UUID

from flows.pool import PoolExecutor

CANCEL_SECONDS = 3.0
"""How long the campaign waits for the server to take its flow run's Cancelled state."""
EXIT_ON_SIGTERM = (
    1  # as a local campaign's SIGTERM (`CampaignInterrupted`, an infrastructure cause)
)
EXIT_ON_CTRL_C = 128 + signal.SIGINT


class CampaignFlowRun:
    """The campaign's own flow run, once it is running (`remember`, a Prefect state hook)."""

    def __init__(self) -> None:
        self.id: UUID | None = None

    def remember(self, flow: Any, flow_run: Any, state: Any) -> None:
        self.id = flow_run.id

    def cancel(self, message: str) -> None:
        """Set it Cancelled with `message`, giving up after `CANCEL_SECONDS` (a server down
        leaves it as a killed process would)."""
        flow_run_id = self.id
        if flow_run_id is None:
            return

        def cancel() -> None:
            from prefect.client.orchestration import get_client
            from prefect.states import Cancelled

            try:
                with get_client(sync_client=True) as client:
                    client.set_flow_run_state(flow_run_id, Cancelled(message=message), force=True)
            except Exception:  # best effort: the campaign's line says what matters
                pass

        aside = threading.Thread(target=cancel, name="cancel-campaign", daemon=True)
        aside.start()
        aside.join(CANCEL_SECONDS)


def leave_on_signal(pool: PoolExecutor, campaign: CampaignFlowRun, rerun: str) -> None:
    """From now on, a Ctrl-C or SIGTERM ends this pool campaign at once (the module's why);
    `rerun` is the command that goes on from its folder."""

    handling = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if handling.is_set():  # a second signal while the first is handled: at once
            os._exit(EXIT_ON_CTRL_C if signum == signal.SIGINT else EXIT_ON_SIGTERM)
        handling.set()
        pool.terminate()
        reason = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        line = (
            f"interrupted ({reason}): nothing more is submitted; the runs out on pool "
            f"{pool.settings.pool} go on on their hosts, and `{rerun}` takes their results"
        )
        # os.write: a signal handler must not re-enter a buffered stream the main thread uses.
        os.write(sys.stderr.fileno(), f"\n{line}\n".encode())
        campaign.cancel(line)
        os._exit(EXIT_ON_CTRL_C if signum == signal.SIGINT else EXIT_ON_SIGTERM)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
