"""The learning curves so far, as a Prefect artifact after the pilot and after each look."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.campaign.campaign import Campaign
from ablations.report.artifact import curves_so_far
from tasks.artifacts import markdown_artifact


# NO_CACHE: the campaign is an in-process handle, which Prefect cannot hash into a cache key
@task(name="show-curves", task_run_name="curves: {title}", cache_policy=NO_CACHE)
def show_curves(campaign: Campaign, title: str) -> None:
    """Draw the finished runs' curves and show them in the UI (key `learning-curves`)."""
    markdown = curves_so_far(campaign, title)
    if markdown is not None:
        markdown_artifact("learning-curves", markdown, description=title)
