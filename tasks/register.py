"""Register (freeze and hash) the plan in the output folder."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from ablations.budget import Projection
from ablations.campaign.state import Registration, register
from ablations.campaign.steps import registered_projection


@task(name="register", retries=0)
def register_campaign(plan_text: str, out_dir: str, source: str) -> Registration:
    """Freeze the plan; a known campaign with another plan hash is refused."""
    return register(plan_text, Path(out_dir), source)


@task(name="projection")
def project_campaign(out_dir: str, slots: int) -> Projection:
    """The registered projection of every run from the plan's estimates (kept as it was)."""
    return registered_projection(Path(out_dir), slots)
