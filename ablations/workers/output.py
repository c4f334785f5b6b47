"""A job's own output, into a log file of the campaign's folder instead of the terminal.

The frameworks a run trains with talk: Lightning's tips and "GPU available", deprecation
warnings, the Trainer's loss dicts, a command's own lines. In a slot's worker they would go to
the campaign's terminal between its progress lines (one line per run). While a job that names a
log runs (`Job.log_name`: `logs/<run_id>.log` for a run, `logs/preflight.log` for the
preflight), the worker's standard output and error go to that file, appended to: at the level
of the file descriptors, so a framework's C code, its logging handlers and the processes it
starts are caught too. Nothing reaches the file as it was printed: the descriptors point at a
pipe, and a thread of the worker copies it into the log line by line through the one redaction
(`ablations.security.credentials.redact`), so a token a library echoes, a URL's password or a
secret variable's value never lands in the folder. A log is for reading when something went
wrong: it is not part of the verified record (never hashed, never written through the atomic
writer, which is for files written whole), though created with the same mode as every file of
the folder (`FILE_MODE` less the umask).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ablations.files.atomic import open_below
from ablations.security.credentials import redact

LINE_LIMIT = 1 << 16
"""A line longer than this is redacted and written in pieces: a program that never prints a
newline still has its output in the log while it runs."""
DRAIN_SECONDS = 2.0
"""After the job, how long what is still in the pipe is copied: a process the job started
and left running keeps the pipe open, and its later output is not the job's."""
_POLL_MS = 50


@contextlib.contextmanager
def output_to(root: Path, name: str) -> Iterator[None]:
    """File descriptors 1 and 2 appended, redacted, to `root/name` while the block runs (left
    as they are when the file cannot be opened: a log is never worth failing a run for). No
    link below `root` is followed (`files.atomic.open_below`): a planted one is not written
    through."""
    try:
        log = open_below(root, name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError:
        yield
        return
    _flush()
    read_end, write_end = os.pipe()
    done = threading.Event()
    copier = threading.Thread(
        target=_copy_redacted, args=(read_end, log, done), name="ablate-log", daemon=True
    )
    copier.start()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        yield
    finally:
        _flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(write_end)
        done.set()
        copier.join()
        for fd in (*saved, read_end, log):
            os.close(fd)


def _copy_redacted(read_end: int, log: int, done: threading.Event) -> None:
    """Copy the pipe into the log, each complete line (or `LINE_LIMIT` bytes) redacted;
    after `done`, until the pipe is empty or closed, for at most `DRAIN_SECONDS`."""
    pending = b""
    deadline: float | None = None
    poller = select.poll()
    poller.register(read_end, select.POLLIN)
    while True:
        if done.is_set() and deadline is None:
            deadline = time.monotonic() + DRAIN_SECONDS
        if deadline is not None and time.monotonic() > deadline:
            break
        if not poller.poll(_POLL_MS):
            if deadline is not None:  # nothing more after the job: what is left is written
                break
            continue
        chunk = os.read(read_end, 1 << 16)
        if not chunk:  # every writer closed its end
            break
        pending += chunk
        cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1  # a progress bar's \r too
        if not cut and len(pending) >= LINE_LIMIT:
            cut = len(pending)
        if cut:
            _write(log, pending[:cut])
            pending = pending[cut:]
    _write(log, pending)


def _write(log: int, data: bytes) -> None:
    if not data:
        return
    shown = redact(data.decode("utf-8", errors="replace")).encode("utf-8")
    with contextlib.suppress(OSError):  # a full disk: the run goes on, its log is short
        while shown:
            shown = shown[os.write(log, shown) :]


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a stream closed or replaced by the job
            stream.flush()
