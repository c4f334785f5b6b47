"""The output folder's one file mode, for tests: a known umask while a block runs, and every
file of a folder checked against what a plain `open()` gives under it (0o666 less the umask)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

UMASKS = (0o022, 0o077, 0o002)
"""The usual one (0644), a private one (0600), and a group-writable one (0664): the last tells
a hard-coded 0o644 (SQLite's, an `os.open(..., 0o644)`) from the folder's mode."""


@contextmanager
def umask(mask: int) -> Iterator[int]:
    """The process's umask set to `mask` inside the block, restored after; yields the mode
    every file of the folder must have under it."""
    before = os.umask(mask)
    try:
        yield 0o666 & ~mask
    finally:
        os.umask(before)


def modes(folder: Path) -> dict[str, int]:
    """Every file under `folder` (recursively, links not followed) -> its permission bits."""
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode):
            continue
        found[str(path.relative_to(folder))] = stat.S_IMODE(info.st_mode)
    return found


def other_modes(folder: Path, expected: int) -> dict[str, str]:
    """The files under `folder` whose mode is not `expected`, as octal strings (empty: all
    agree); asserting it is `{}` names every offender at once."""
    return {name: oct(mode) for name, mode in modes(folder).items() if mode != expected}
