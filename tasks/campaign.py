"""Opening the campaign (registered and loaded from the admitted plan), and its projection."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.budget import Projection
from ablations.campaign import opening, steps
from ablations.campaign.campaign import Campaign
from ablations.campaign.opening import Admission


# NO_CACHE: the campaign is an in-process handle, which Prefect cannot hash into a cache key
@task(name="open-campaign", retries=0, cache_policy=NO_CACHE)
def open_campaign(admission: Admission) -> Campaign:
    """Register the admitted plan in its folder (a known campaign with another plan hash is
    refused) and load the campaign from it, without reading the plan back."""
    return opening.open_campaign(admission)


@task(name="project-campaign", cache_policy=NO_CACHE)
def project_campaign(campaign: Campaign, slots: int) -> Projection:
    """The registered projection of every run from the plan's estimates (kept as it was)."""
    return steps.project_campaign(campaign, slots)
