"""Scratch folders that a killed process does not leave behind for good.

A run's adapter stages its checkpoints in a local folder before the store gets them, and the
report draws its curves in one: gigabytes, for a fine-tune. `tempfile.TemporaryDirectory`
removes its folder when the block ends, but a campaign killed with -9 (or preempted past its
grace) never ends the block, and rented machines run out of disk long before /tmp is cleared.

So every scratch folder lives under one per-user root and holds a `.owner` file its process
keeps locked (`flock`) while the folder is in use. Opening a scratch folder first removes the
folders whose lock nobody holds: their owner died. A lock, not a process id, because the lock
dies with its process in every case (kill -9 included) and means the same across containers
sharing /tmp, where process ids do not.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OWNER = ".owner"
"""The lock file in each scratch folder, held by the process using the folder."""
CLAIMING = ".owner-claiming"
"""The lock file's name until its process holds the lock (never opened by a sweep)."""


def scratch_root() -> Path:
    """`$TMPDIR/ablate-scratch-<uid>`: one per user, so nobody removes another user's."""
    return Path(tempfile.gettempdir()) / f"ablate-scratch-{os.getuid()}"


@contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A new empty folder for this block, removed when it ends; the folders of dead processes
    are removed on the way in."""
    root = scratch_root()
    root.mkdir(mode=0o700, exist_ok=True)
    remove_abandoned(root)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    # Locked under another name, then renamed: a `.owner` that exists is always locked. Created
    # as `.owner` and locked after, another process's sweep could take the lock in between
    # and remove the new folder under its owner (seen with 6 pool hosts sharing one /tmp).
    owner = os.open(path / CLAIMING, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(owner, fcntl.LOCK_EX)
        os.rename(path / CLAIMING, path / OWNER)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(owner)  # after the removal: nobody else may take the folder while it goes


def remove_abandoned(root: Path) -> list[Path]:
    """Remove the scratch folders under `root` whose owner is gone; return them. A folder
    without its `.owner` yet is being created this instant: it is left alone."""
    removed = []
    for path in root.iterdir() if root.is_dir() else ():
        try:
            lock = os.open(path / OWNER, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:  # not a scratch folder, or one still being created
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its owner is alive
            os.close(lock)
            continue
        shutil.rmtree(path, ignore_errors=True)
        os.close(lock)
        removed.append(path)
    return removed
