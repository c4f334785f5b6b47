"""Results: the manifest, runs.csv and the report, written by the campaign's executor."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ablations.campaign.campaign import Campaign
from ablations.campaign.executor import Executor
from ablations.campaign.folder import REPORT
from ablations.campaign.manifest import Manifest
from ablations.report.artifact import report_artifact
from tasks.artifacts import markdown_artifact


# NO_CACHE: the executor and the campaign cannot be hashed into a cache key
@task(name="write-results", cache_policy=NO_CACHE)
def write_results(campaign: Campaign, executor: Executor) -> Manifest:
    """Write the output folder from the completion records; return the manifest written."""
    manifest = executor.write_results(campaign)
    if (campaign.out_dir / REPORT).exists():
        markdown_artifact("campaign-report", report_artifact(campaign.out_dir))
    return manifest
