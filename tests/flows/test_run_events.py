"""`flows.run_events.FlowRunEvents` on a real Prefect server: a pool's flow runs are heard as
they are scheduled, another pool's are not, and stopping ends the subscription."""

from __future__ import annotations

import threading
import time
from uuid import UUID

from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate

from flows.run_events import FlowRunEvents


@flow(name="events-probe")
def _placeholder() -> None:
    """Only its flow runs are used: scheduled, never run."""


def test_a_pools_scheduled_runs_are_heard_and_another_pools_are_not(prefect_server: None) -> None:
    heard: list[UUID] = []
    changed = threading.Condition()

    def hear(run: UUID) -> None:
        with changed:
            heard.append(run)
            changed.notify_all()

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow(_placeholder)
        deployments = {}
        for pool in ("gpus", "cpus"):
            client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
            deployments[pool] = client.create_deployment(
                flow_id=flow_id, name=f"probe-{pool}", work_pool_name=pool
            )
        events = FlowRunEvents(("Scheduled",), hear, pool="gpus")
        events.start()
        try:
            assert events.live.wait(20), "never subscribed to the server's events"
            other = client.create_flow_run_from_deployment(deployments["cpus"])
            ours = client.create_flow_run_from_deployment(deployments["gpus"])
            with changed:
                assert changed.wait_for(lambda: ours.id in heard, timeout=10)
            time.sleep(0.5)  # the other pool's event, had it passed, would be in by now
            assert other.id not in heard
        finally:
            events.stop()
    assert not events.live.is_set()
