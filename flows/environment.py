"""Prefect settings for quiet local runs; applied before prefect is first imported.

Without network the server logs telemetry errors, and ephemeral shutdown prints event-flush
tracebacks from a run that succeeded: a user must never see those (see PREFECT_NOTES.md).
"""

from __future__ import annotations

import logging
import os
import queue

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


class _ErrorsReportedByTheCommand(logging.Filter):
    """Prefect's ERROR records of task and flow runs (a traceback each, once per task and
    again for the flow) about the error `ablate run` itself reports in one line."""

    def __init__(self, *, keep_lines: bool) -> None:
        super().__init__()
        self.keep_lines = keep_lines

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        if not self.keep_lines or _SILENCED:
            return False
        record.exc_info, record.exc_text = None, None  # the line for the UI, no traceback
        return True


_SILENCED = False


def silence_run_failures() -> None:
    """From now on drop those lines entirely, even for a configured server: after a Ctrl-C
    every run that stops fails its task, and the command's one line says why (a signal
    handler calls this: it only sets a flag)."""
    global _SILENCED
    _SILENCED = True


class _DroppedItems(logging.Filter):
    """Prefect's line when its events or logs worker drops an item (the server down or
    restarting): the item's whole repr (an artifact's markdown with an embedded image, a
    few kilobytes) at ERROR. The campaign loses nothing of its own (the UI misses an event
    or a log line): one short warning instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == DROPPED and len(record.args or ()) == 2:
            service = (record.args or ())[0]  # type: ignore[index]
            record.msg = "%s: an item for the Prefect UI was dropped (the server did not answer)"
            record.args = (service,)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info, record.exc_text = None, None
        return True


DROPPED = "Service %r failed to process item %r"
"""The message of `prefect._internal.concurrency.services` for a dropped item (prefect 3.9)."""


def quiet_dropped_items() -> None:
    """Shorten Prefect's lines about events and logs it could not send (`_DroppedItems`), and
    drop its log worker's own: for each batch of log lines it cannot send (the server down),
    it writes "--- Error logging to API ---" and the error to stderr unless
    `logging.raiseExceptions` is off, the error without a newline, so the next line (the
    command's one `error:` line, when the server is gone) was glued to it (prefect 3.9,
    `APILogWorker._handle_batch`). The campaign's own warnings say the server is down."""
    logging.getLogger("prefect._internal.concurrency").addFilter(_DroppedItems())
    logging.raiseExceptions = False


def quiet_run_failures(*, keep_lines: bool) -> None:
    """Keep Prefect's tracebacks of a failed campaign off the terminal (the command prints
    the cause in one line; ABLATE_DEBUG=1 shows everything). `keep_lines`: still send each
    failure's one-line message (to a configured server's UI); else drop them entirely."""
    if os.environ.get("ABLATE_DEBUG"):
        return
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        logging.getLogger(name).addFilter(_ErrorsReportedByTheCommand(keep_lines=keep_lines))


def forget_the_server() -> int:
    """What Prefect still holds for a server known gone (the command's one line says so):
    its queued events and log lines dropped, not tried one by one at exit (an event is 11
    websocket connections over 7 s, prefect 3.9's `PrefectEventsClient._emit`: the bench's
    server gone for good ended 57 s after the line), and its complaints about the server,
    which would come after the line, silenced. How many items were dropped."""
    # Private in prefect 3.9: nothing public empties a service's queue (`drain` sends it all).
    from prefect._internal.concurrency.services import QueueService

    # Every logger off, not only by level: Prefect's concurrency loggers ignore
    # `logging.disable` (prefect 3.9's `SafeLogger.isEnabledFor` reads its own setting).
    logging.disable(logging.CRITICAL)
    for logger in [logging.root, *logging.root.manager.loggerDict.values()]:
        if isinstance(logger, logging.Logger):
            logger.disabled = True
    dropped = 0
    for service in list(QueueService._instances.values()):  # type: ignore[misc]
        while True:
            try:
                item = service._queue.get_nowait()
            except queue.Empty:
                break
            service._queue.task_done()
            if item is None:  # the service's own stop: kept for it
                service._queue.put_nowait(None)
                break
            dropped += 1
    return dropped
