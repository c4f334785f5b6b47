"""The output folder's layout for `ablate verify`: nothing unexpected at the top, no links.

A folder that verifies must be self-contained: an unknown top-level file (a note, a hidden
file) is not part of the contract and may be anything, and a symbolic link (a model replaced
by a link to outside the folder) makes the folder's content depend on what lies elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from ablations.files.names import TOP_LEVEL
from ablations.verify.files import FolderProblem

EXPECTED_ENTRIES = TOP_LEVEL
"""Top-level names of the output folder (ARCHITECTURE.md, `ablations.files.names`); the
relative store's folder besides. `.lock` is the one-writer lock, `ledger.db.lock` the ledger's
former lock (older folders), `probe.json` and `PROBE.md` what `ablate probe --out` writes into
the campaign's folder."""


def store_entry(store: str) -> str | None:
    """The top-level folder of a relative `file://` store inside the output folder, or None."""
    scheme, _, path = store.partition("://")
    if scheme != "file" or os.path.isabs(path):
        return None
    first = os.path.normpath(path).split(os.sep)[0]
    return None if first in ("..", ".", "") else first


def scan_layout(out_dir: Path, store: str | None) -> list[FolderProblem]:
    """Unexpected top-level entries (hidden ones included) and symbolic links anywhere."""
    expected = EXPECTED_ENTRIES | ({store_entry(store)} - {None} if store else set())
    problems = [
        FolderProblem(entry.name, "is not part of an output folder (unexpected file)")
        for entry in sorted(out_dir.iterdir())
        if entry.name not in expected
    ]
    for root, folders, files in os.walk(out_dir):  # never follows links
        for name in sorted(folders + files):
            path = Path(root) / name
            if path.is_symlink():
                target = os.readlink(path)
                problems.append(
                    FolderProblem(
                        path.relative_to(out_dir).as_posix(),
                        f"is a symbolic link (to {target}): the folder must hold its own files",
                    )
                )
    return problems
