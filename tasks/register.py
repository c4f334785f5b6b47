"""Register (freeze and hash) the plan in the output folder."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.budget import Projection
from ablations.campaign.campaign import Campaign
from ablations.campaign.state import Registration, register
from ablations.campaign.steps import registered_projection


@task(name="register", retries=0)
def register_campaign(plan_text: str, out_dir: str, source: str) -> Registration:
    """Freeze the plan; a known campaign with another plan hash is refused."""
    return register(plan_text, Path(out_dir), source)


# NO_CACHE: the campaign is an in-process handle, which Prefect cannot hash into a cache key
@task(name="projection", cache_policy=NO_CACHE)
def project_campaign(campaign: Campaign, slots: int) -> Projection:
    """The registered projection of every run from the plan's estimates (kept as it was)."""
    return registered_projection(campaign, slots)
