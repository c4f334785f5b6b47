"""A job's own output, into a log file of the campaign's folder instead of the terminal.

The frameworks a run trains with talk: Lightning's tips and "GPU available", deprecation
warnings, the Trainer's loss dicts, a command's own lines. In a slot's worker they would go to
the campaign's terminal between its progress lines (one line per run). While a job that names
a log runs (`Job.log_name`: `logs/<run_id>.log` for a run, `logs/preflight.log` for the
preflight), the worker's standard output and error go to that file, appended to: at the level
of the file descriptors, so a framework's C code, its logging handlers and the processes it
starts are caught too. A log is for reading when something went wrong: it is not part of the
verified record (never hashed, never written through the atomic writer, which is for files
written whole), though created with the same mode as every file of the folder (`FILE_MODE`
less the umask).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from ablations.files.atomic import FILE_MODE


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
    """File descriptors 1 and 2 appended to `path` while the block runs (left as they are
    when the file cannot be opened: a log is never worth failing a run for)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
    except OSError:
        yield
        return
    _flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        _flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream closed or replaced by the job
            stream.flush()
