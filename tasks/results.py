"""Results: the manifest, runs.csv and the report, written by the campaign's executor."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from ablations.campaign.executor import Executor
from ablations.campaign.folder import REPORT
from ablations.report.artifact import report_artifact


@task(name="results", cache_policy=NO_CACHE)  # the executor cannot be hashed into a cache key
def write_results(out_dir: str, executor: Executor) -> str:
    """Write the output folder from the completion records; return the manifest's path."""
    manifest = executor.write_results(Path(out_dir))
    report = Path(out_dir) / REPORT
    if report.exists():
        create_markdown_artifact(key="campaign-report", markdown=report_artifact(Path(out_dir)))
    return str(manifest)
