"""Results: trimmed-run records, the manifest, runs.csv and the report."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact


@task(name="results")
def write_results(out_dir: str) -> str:
    """Write the output folder from the completion records; return the manifest's path."""
    # Imported here: statistics, plots and the ledger (scipy, matplotlib, optuna) cost the
    # campaign process seconds it should not spend before the first run starts.
    from ablations.export import write_outputs

    manifest = write_outputs(Path(out_dir))
    report = Path(out_dir) / "REPORT.md"
    if report.exists():
        create_markdown_artifact(key="campaign-report", markdown=report.read_text())
    return str(manifest)
