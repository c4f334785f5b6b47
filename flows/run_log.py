"""Progress lines in the Prefect UI: `say` lines become the current flow or task run's logs.

`ablations.progress.say` prints to the terminal and logs to `ablate.progress` (no handler,
no propagation); the handler below sends those records to the Prefect API, and only from
inside a flow or task run, so nothing reaches the terminal twice and lines said outside a run
(e.g. by a helper thread without a run context) are left out instead of warned about.
"""

from __future__ import annotations

import logging

from prefect.context import FlowRunContext, TaskRunContext
from prefect.logging.handlers import APILogHandler

from ablations.progress import PROGRESS_LOG


class _RunLogHandler(APILogHandler):
    """Prefect's API log handler, for records made inside a flow or task run only."""

    def emit(self, record: logging.LogRecord) -> None:
        if TaskRunContext.get() is None and FlowRunContext.get() is None:
            return
        super().emit(record)


def run_logger() -> logging.Logger:
    """The `ablate.progress` logger, with records sent to the current Prefect run's logs."""
    if not any(isinstance(h, _RunLogHandler) for h in PROGRESS_LOG.handlers):
        PROGRESS_LOG.addHandler(_RunLogHandler())
    return PROGRESS_LOG
