"""Results: trimmed-run records, the manifest, runs.csv and the report."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact

from ablations.campaign.folder import REPORT
from ablations.campaign.steps import export_outputs


@task(name="results")
def write_results(out_dir: str) -> str:
    """Write the output folder from the completion records; return the manifest's path."""
    manifest = export_outputs(Path(out_dir))
    report = Path(out_dir) / REPORT
    if report.exists():
        create_markdown_artifact(key="campaign-report", markdown=report.read_text())
    return str(manifest)
