"""Progress lines in the Prefect UI: `say` lines become the current flow or task run's logs.

`ablations.text.say.say` prints to the terminal and logs to `ablate.progress` (no handler,
no propagation); the handler below sends those records to the Prefect API, and only from
inside a flow or task run, so nothing reaches the terminal twice and lines said outside a run
(e.g. by a helper thread without a run context) are left out instead of warned about.
"""

from __future__ import annotations

import logging

from prefect.context import FlowRunContext, TaskRunContext
from prefect.logging.handlers import APILogHandler

from ablations.errors import InputError
from ablations.security.credentials import redact
from ablations.text.say import PROGRESS_LOG


class _RunLogHandler(APILogHandler):
    """Prefect's API log handler, for records made inside a flow or task run only."""

    def emit(self, record: logging.LogRecord) -> None:
        if TaskRunContext.get() is None and FlowRunContext.get() is None:
            return
        super().emit(record)


class _FindingsAreNotErrors(logging.Filter):
    """Prefect logs a task that ends in a non-Completed state at ERROR: for a stopped or
    rejected run (a finding of the campaign) "Finished in state Stopped(...)", and for any
    returned Failed-type state also "Task run failed with state: <repr>", the whole run record
    included. The flow's progress line and the task's state message already say it: drop them.
    A crashed run's "Finished in state Failed(...)" stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Task run failed with state:") and "result=RunRecord(" in message:
            return False
        return not message.startswith(("Finished in state Stopped(", "Finished in state Rejected("))


class _InputErrorSaidOnce(logging.Filter):
    """A flow run ended by bad input returns a Failed state with the InputError as data; a
    deployment's engine then raises it again and logs "Engine execution exited with unexpected
    exception" with a traceback. The flow already logged its one line: drop that record."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, InputError)


class _Redacted(logging.Filter):
    """Prefect's own lines about a flow or task run (a task that raised, with its traceback)
    go to the run's logs in the UI: redacted like every message that leaves the process
    (`ablations.security.credentials.redact`). Rewrites the record, never drops it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = redact(message)
        if shown != message:
            record.msg, record.args = shown, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FINDINGS = _FindingsAreNotErrors()
_INPUT_ERRORS = _InputErrorSaidOnce()
_REDACTED = _Redacted()


def run_logger() -> logging.Logger:
    """The `ablate.progress` logger, with records sent to the current Prefect run's logs (and
    Prefect's task logs rid of the error lines about stopped and rejected runs)."""
    if not any(isinstance(h, _RunLogHandler) for h in PROGRESS_LOG.handlers):
        PROGRESS_LOG.addHandler(_RunLogHandler())
    logging.getLogger("prefect.task_runs").addFilter(_FINDINGS)  # a set: added once
    logging.getLogger("prefect.flow_runs").addFilter(_INPUT_ERRORS)
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logging.getLogger(name).addFilter(_REDACTED)
    return PROGRESS_LOG
