"""`ablate serve`: the campaign flow as a deployment the Prefect UI launches."""

from __future__ import annotations

from pathlib import Path

from prefect import serve
from prefect.deployments.runner import RunnerDeployment

import flows.campaign
from flows.boundary import Boundary
from flows.campaign import ablation_campaign
from flows.run_names import RunNamer


def campaign_deployment(name: str) -> RunnerDeployment:
    """The deployment, its entrypoint an absolute path to this installed flow.

    Prefect would record the flow file relative to the serving directory (`../../...`), which
    reads as nonsense in the UI and breaks when the serving directory changes."""
    deployment = ablation_campaign.to_deployment(name=name)
    assert isinstance(deployment, RunnerDeployment)  # called synchronously: no coroutine
    source = Path(flows.campaign.__file__).resolve()
    deployment.entrypoint = f"{source}:{ablation_campaign.fn.__name__}"
    return deployment


def serve_campaign(name: str, boundary: Boundary) -> None:
    """Serve the deployment until interrupted: one campaign at a time, never left paused,
    each flow run inside `boundary` (its roots and allowed workload modules)."""
    boundary.install()  # the flow runs are this process's children: they inherit it
    namer = RunNamer(f"{ablation_campaign.name}/{name}")  # named at once, not when picked up
    namer.start()
    try:
        serve(campaign_deployment(name), limit=1, pause_on_shutdown=False)
    finally:
        namer.stop()
