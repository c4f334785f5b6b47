"""Flow run names the UI lists: the campaign id, or a name that says the input is invalid.

A run launched from the UI is created by the server with a random name (`plucky-owl`). The
flow names itself once it has admitted its plan (`name_this_run`, from the plan it parsed: a
name costs no parse of its own), or after the refusal when its input is bad; `ablate serve`
names each new run of its deployment as soon as the server has it (`RunNamer`), so the list
and the deployment's *Next run* show the campaign id from the start. `ablate run` names its
run when it starts it, after the plan it admitted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from prefect.runtime import flow_run

from ablations.campaign.opening import run_name
from flows.boundary import Boundary

log = logging.getLogger(__name__)

NAME_POLL_S = 0.5
"""How often `ablate serve` looks for new runs of its deployment: one small query to the
server; the runner picks a run up every 2 s (PREFECT_RUNNER_POLL_FREQUENCY) and the UI
refreshes its lists about as often."""
OUTSIDE = "invalid: plan_path outside the roots"


def name_for(parameters: Mapping[str, Any]) -> str:
    """The run's name from its parameters: the plan's campaign id, or why it is invalid. A
    served run's `plan_path` outside the roots is never read, not even for a name."""
    plan_yaml = str(parameters.get("plan_yaml") or "")
    plan_path = str(parameters.get("plan_path") or "")
    boundary = Boundary.from_env()
    read_from_disk = bool(plan_path) and not plan_yaml.strip()
    if boundary is not None and read_from_disk and not boundary.contains(plan_path):
        return OUTSIDE
    return run_name(plan_yaml, plan_path)


def name_this_run(name: str) -> None:
    """Give the flow run this process runs `name`, unless it has it already (`RunNamer` named
    a served run before it started). A server that cannot be reached leaves the name as it
    was: it is only a name, and the campaign goes on."""
    from prefect.client.orchestration import get_client

    if flow_run.id is None or flow_run.name == name:
        return
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(UUID(flow_run.id), name=name)
    except Exception as exc:
        log.debug("naming flow run %s: %s", flow_run.id, exc)


class RunNamer:
    """`ablate serve`'s helper thread: each new run of the deployment named after its
    campaign as soon as the server lists it (scheduled or pending, before the runner picks it
    up), instead of keeping the server's random name until its process starts."""

    def __init__(self, deployment: str) -> None:
        self.deployment = deployment
        """`flow/deployment`, as `serve` registers it."""
        self._named: set[UUID] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-namer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            while not self._stop.wait(NAME_POLL_S):
                try:
                    self.name_new_runs(client)
                except Exception as exc:  # a server restarting: the flow names itself anyway
                    log.debug("naming new runs: %s", exc)

    def name_new_runs(self, client: Any) -> list[str]:
        """Rename the deployment's runs not yet started; the names given."""
        from prefect.client.schemas.filters import (
            DeploymentFilter,
            DeploymentFilterName,
            FlowFilter,
            FlowFilterName,
            FlowRunFilter,
            FlowRunFilterState,
            FlowRunFilterStateType,
        )
        from prefect.client.schemas.objects import StateType

        flow_name, _, name = self.deployment.partition("/")
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=[flow_name])),
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[name])),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.SCHEDULED, StateType.PENDING])
                )
            ),
            limit=50,
        )
        given = []
        for run in runs:
            if run.id in self._named:
                continue
            self._named.add(run.id)
            wanted = name_for(run.parameters)
            if wanted != run.name:
                client.update_flow_run(run.id, name=wanted)
                given.append(wanted)
        return given
