"""One writer per output folder: an exclusive lock on `DIR/.lock` for a campaign's life.

Two campaigns writing one folder corrupt each other's state (their preflight restart checks
collide, a gate decision of one is replayed by the other forever), so `ablate run` and the
campaign flow hold `fcntl.flock` on `DIR/.lock` while they run. The kernel releases a flock
when its holder dies, kill -9 included, so a crashed campaign never leaves its folder stuck;
the file itself stays (it only names the last holder) and `ablate verify` expects it.

Reentrant within one process: `ablate run` takes the lock before anything is written, and the
flow it runs in the same process takes it again (a no-op) so a deployment's flow run, which
has no CLI around it, is covered too.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ablations.errors import FolderBusyError, InputError
from ablations.files.atomic import FILE_MODE
from ablations.files.names import LOCK

LOCK_NAME = LOCK
"""The lock file's name inside the output folder."""

_held: dict[Path, tuple[int, int]] = {}
"""Folders this process holds: resolved path -> (file descriptor, nesting depth)."""
_created: set[Path] = set()
"""Held folders this process created: removed again at release when only the lock is in them
(a campaign refused before it wrote anything leaves nothing behind)."""
_guard = threading.Lock()


def _holder(fd: int) -> str:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096) or b"{}")
        return f"pid {info.get('pid', '?')} on host {info.get('host', '?')}"
    except (OSError, ValueError):
        return "a process that has not yet written its pid"


def _acquire(out_dir: Path) -> int:
    if not out_dir.exists():
        out_dir.mkdir(parents=True)
        _created.add(out_dir)
    # O_NOFOLLOW: a planted `.lock` symlink would have us truncate and write its target.
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(out_dir / LOCK_NAME, flags, FILE_MODE)  # the folder's one mode
    except OSError as exc:
        _created.discard(out_dir)
        if exc.errno == errno.ELOOP:
            raise InputError(
                f"{out_dir / LOCK_NAME} is a symbolic link: refused (a campaign folder's lock "
                "is a plain file; remove the link)"
            ) from None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        _created.discard(out_dir)
        raise FolderBusyError(
            f"{out_dir} is in use by another campaign ({holder}); wait for it to finish, "
            "or choose another --out"
        ) from None
    except BaseException:
        os.close(fd)
        _created.discard(out_dir)
        raise
    me = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, me, 0)
    return fd


@contextmanager
def hold_folder(out_dir: Path) -> Iterator[None]:
    """Hold the output folder's lock for the block; `FolderBusyError` when another holds it.

    Creates the folder (and only `.lock` in it) when missing."""
    key = out_dir.resolve()
    with _guard:
        fd, depth = _held.get(key, (-1, 0))
        if depth == 0:
            fd = _acquire(key)
        _held[key] = (fd, depth + 1)
    try:
        yield
    finally:
        with _guard:
            fd, depth = _held[key]
            if depth == 1:
                del _held[key]
                _release(key, fd)
            else:
                _held[key] = (fd, depth - 1)


def _release(out_dir: Path, fd: int) -> None:
    if out_dir in _created:
        _created.discard(out_dir)
        try:
            if [p.name for p in out_dir.iterdir()] == [LOCK_NAME]:
                (out_dir / LOCK_NAME).unlink()
                out_dir.rmdir()
        except OSError:  # something else appeared meanwhile: keep the folder as it is
            pass
    os.close(fd)  # releases the flock; the file stays, naming the last holder
