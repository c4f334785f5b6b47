"""Whole files or none: the one writer every file of an output folder goes through.

    atomic_write_bytes(path, data)     # .<name>.<random>.tmp, fsync, rename, fsync the folder
    atomic_write_text(path, text)      # the same, of the text as UTF-8

A reader never sees half a file, and a file the caller was told is written survives a power
loss: the data is synced before the rename, and the folder after it (a rename lives in the
folder's entry, which the kernel may otherwise still hold in memory when the machine dies).
The temporaries' names (`.<name>.<random>.tmp`) are what a restart removes as leftovers.

Every file gets the mode a plain `open(path, "w")` would give it: `FILE_MODE` (0o666) less the
process's umask, applied by the kernel as it creates the temporary (0644 under the usual umask
022; 0600 under 077, for a user who keeps their files private). `tempfile.mkstemp` would create
it 0600 whatever the umask says, and a results folder shared with colleagues would be half
unreadable to them. The umask is never read nor changed here: changing it (the only way to read
it portably) is process-wide, and a thread creating a file meanwhile would get the wrong mode.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_MODE = 0o666
"""The mode every file of the output folder is created with, before the umask: a plain
`open()`'s. A file that must stay private lives outside the folder (`process/scratch.py`)."""
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_NAME_TRIES = 100


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` through a temporary file beside `path`, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_folder(path.parent)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # name the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """`atomic_write_bytes` of the text as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _create_temporary(path: Path) -> tuple[int, Path]:
    """A new, empty `.<name>.<random>.tmp` beside `path`, open for writing, created with
    `FILE_MODE` (the kernel applies the umask). O_EXCL: never a file or link already there."""
    for _ in range(_NAME_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, _CREATE, FILE_MODE), tmp
        except FileExistsError:
            continue
        except OSError as exc:  # a full disk, a read-only folder: name the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
    raise FileExistsError(f"no free temporary name beside {path} after {_NAME_TRIES} tries")


def fsync_folder(folder: Path) -> None:
    """Make a rename or a new file in `folder` durable (a no-op where folders cannot be
    opened, as on Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (PermissionError, IsADirectoryError):
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
