"""The campaign's Prefect artifacts, with nothing secret in them: every artifact is created here.

An artifact's text comes from records, the plan and exceptions' messages; whoever reads the
Prefect UI (or its API) reads it. `ablations.security.credentials.redact` runs over each (URLs
without user info or query, known key shapes masked) as it leaves the process.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from ablations.security.credentials import redact


def markdown_artifact(key: str, markdown: str, description: str | None = None) -> None:
    """A markdown artifact of the current run."""
    create_markdown_artifact(
        key=key,
        markdown=redact(markdown),
        description=None if description is None else redact(description),
    )


def table_artifact(key: str, rows: list[dict[str, Any]], description: str) -> None:
    """A table artifact of the current run: one dict per row, cells redacted."""
    table = [{k: redact(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]
    create_table_artifact(key=key, table=table, description=redact(description))


def progress_artifact(key: str, percent: float, description: str) -> UUID:
    """A progress artifact (the UI draws a bar of `percent`, 0-100); its id, to update."""
    created = create_progress_artifact(progress=percent, key=key, description=redact(description))
    assert isinstance(created, UUID)  # called synchronously: no coroutine
    return created


def update_progress(artifact: UUID, percent: float, description: str) -> None:
    """Move the progress artifact's bar and replace its description."""
    update_progress_artifact(artifact, percent, description=redact(description))
