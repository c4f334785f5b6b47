"""Prefect settings for quiet local runs; applied before prefect is first imported.

Without network the server logs telemetry errors, and ephemeral shutdown prints event-flush
tracebacks from a run that succeeded: a user must never see those (see PREFECT_NOTES.md).
"""

from __future__ import annotations

import os

QUIET = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
}


def quiet_prefect() -> None:
    """Set the quiet defaults unless the user set them already."""
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
