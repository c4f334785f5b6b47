"""Preflight: the data check and the restart check, on the campaign's executor."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.campaign import steps
from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.run.records import PreflightReport


# NO_CACHE: the executor holds processes and locks, and the campaign is an in-process handle:
# Prefect cannot hash either into a cache key
@task(name="run-preflight", retries=0, cache_policy=NO_CACHE)
def run_preflight(campaign: Campaign, executor: Executor) -> PreflightReport:
    """Run the essential checks until they pass (a passed report is reused on restart)."""
    return steps.run_preflight(campaign, executor)
