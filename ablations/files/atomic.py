"""Whole files or none: the one writer every file of an output folder goes through.

    atomic_write_bytes(path, data)     # .<name>.<random>.tmp, fsync, rename, fsync the folder
    atomic_write_text(path, text)      # the same, of the text as UTF-8
    atomic_write_below(root, relative, data)   # the same, no link below `root` followed

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

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

FILE_MODE = 0o666
"""The mode every file of the output folder is created with, before the umask: a plain
`open()`'s. A file that must stay private lives outside the folder (`process/scratch.py`)."""
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_NAME_TRIES = 100
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
LINK_REFUSED = "a symbolic link inside the output folder, where a file is written: refused"
"""The text of the `OSError` (ELOOP) a write below a folder raises at a planted link."""


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


def atomic_write_below(root: Path, relative: str, data: bytes) -> None:
    """`atomic_write_bytes` of `root/relative` without following a symbolic link anywhere
    below `root`: the folders are opened (made when missing) each relative to the last with
    `O_NOFOLLOW` (`folder_below`), and the temporary is created, synced and renamed inside the
    last one, so a link planted in the folder (`checkpoints/<campaign>` pointing elsewhere) is
    refused with `OSError(ELOOP, LINK_REFUSED)`, with no window between a check and the write.
    A link at the file's own name is replaced, never written through. `root` itself may be a
    link: the user names it."""
    parts = PurePosixPath(relative)
    folder = folder_below(root, str(parts.parent))
    path = root / relative
    try:
        for _ in range(_NAME_TRIES):
            tmp = f".{parts.name}.{secrets.token_hex(4)}.tmp"
            try:
                fd = os.open(tmp, _CREATE, FILE_MODE, dir_fd=folder)
                break
            except FileExistsError:
                continue
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
        else:
            raise FileExistsError(f"no free temporary name beside {path}")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, parts.name, src_dir_fd=folder, dst_dir_fd=folder)
            os.fsync(folder)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            if isinstance(exc, OSError) and exc.filename is None:
                raise OSError(exc.errno, exc.strerror, str(path)) from exc
            raise
    finally:
        os.close(folder)


def folder_below(root: Path, relative: str) -> int:
    """A descriptor of the folder `root/relative` (made where missing), reached without
    following a link below `root`; `OSError(ELOOP, LINK_REFUSED)` naming the link otherwise.
    The caller closes it."""
    root.mkdir(parents=True, exist_ok=True)
    folder = os.open(root, _FOLDER)
    reached = root
    try:
        for part in PurePosixPath(relative).parts:
            reached = reached / part
            if part in ("/", "..") or part.startswith("/"):
                raise OSError(errno.EINVAL, "leads out of the folder", str(root / relative))
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=folder)
            try:
                inner = os.open(part, _FOLDER | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as exc:
                raise _refused(exc, folder, part, reached) from None
            os.close(folder)
            folder = inner
    except BaseException:
        os.close(folder)
        raise
    return folder


def open_below(root: Path, relative: str, flags: int) -> int:
    """`os.open` of `root/relative` (created with `FILE_MODE` under `O_CREAT`) without
    following a link below `root`, the file's own name included (`O_NOFOLLOW`)."""
    parts = PurePosixPath(relative)
    folder = folder_below(root, str(parts.parent))
    try:
        return os.open(parts.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE, dir_fd=folder)
    except OSError as exc:
        raise _refused(exc, folder, parts.name, root / relative) from None
    finally:
        os.close(folder)


def refuse_link(path: Path) -> None:
    """`OSError(ELOOP, LINK_REFUSED)` when `path` is a symbolic link (dangling or not): for
    a file another library opens by name (SQLite's ledger), which would follow it."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise OSError(errno.ELOOP, LINK_REFUSED, str(path))


def _refused(exc: OSError, folder: int, name: str, path: Path) -> OSError:
    """ELOOP naming the link when `name` in `folder` is one; `exc` itself otherwise."""
    try:
        link = stat.S_ISLNK(os.lstat(name, dir_fd=folder).st_mode)
    except OSError:
        link = False
    if link or exc.errno == errno.ELOOP:
        return OSError(errno.ELOOP, LINK_REFUSED, str(path))
    return exc


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
