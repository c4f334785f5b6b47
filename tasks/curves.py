"""The learning curves so far, as a Prefect artifact after the pilot and after each look."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact

from ablations.report.artifact import curves_so_far


@task(name="curves", task_run_name="curves: {title}")
def show_curves(out_dir: str, title: str) -> None:
    """Draw the finished runs' curves and show them in the UI (key `learning-curves`)."""
    markdown = curves_so_far(Path(out_dir), title)
    if markdown is not None:
        create_markdown_artifact(key="learning-curves", markdown=markdown, description=title)
