"""A progress line for `ablate run`: to the terminal and the `ablate.progress` logger
(flows/run_log.py sends it to the Prefect run's logs; this package never imports Prefect)."""

from __future__ import annotations

import logging
import sys
import time

from ablations.security.credentials import redact

_START = time.monotonic()

PROGRESS_LOG = logging.getLogger("ablate.progress")
PROGRESS_LOG.setLevel(logging.INFO)
PROGRESS_LOG.propagate = False  # the root logger's console handler would print it again
PROGRESS_LOG.addHandler(logging.NullHandler())  # no "no handlers" fallback to stderr either


def say(text: str, *, level: int = logging.INFO, about: dict[str, object] | None = None) -> None:
    """Print one progress line with the seconds since the campaign process started (and log
    it at `level`: ERROR for the one line that ends a campaign on bad input). `about`: the log
    record's extra attributes, e.g. the task run a run's line belongs to."""
    text = redact(text)  # the terminal and the run's logs in the UI: nothing secret in either
    print(f"[{time.monotonic() - _START:7.1f}s] {text}", file=sys.stdout, flush=True)
    PROGRESS_LOG.log(level, text, extra=about)
