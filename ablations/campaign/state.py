"""A campaign's state in its output folder: completion records and leftover temporaries.

Everything a restarted campaign needs to skip finished work is a small JSON file of the folder
(`CampaignFolder` names and writes them atomically), so a finished run is recognized without
rereading its metrics or checkpoints: the registered plan and its registration (written by
`ablations.campaign.opening`), one completion record per finished run, the preflight report and
the gate decision. Here: saving a completion record (its checkpoint's URI relative to the
folder) and removing an interrupted campaign's temporaries.
"""

from __future__ import annotations

import os
from pathlib import Path

from ablations.campaign.folder import CampaignFolder
from ablations.checkpoint.store import CHECK_PREFIX
from ablations.files.names import WRITTEN_FOLDERS
from ablations.plan.infrastructure import folder_store_path
from ablations.run.records import RunRecord


def remove_leftover_temporaries(out_dir: Path, store: str | None = None) -> list[Path]:
    """Delete the temporaries an interrupted campaign left (a full disk, a kill): call it only
    while holding the folder's lock, when no write of this campaign can be in flight. With
    the plan's checkpoint `store`, also what a kill during the store's check left at the root
    of a relative `file://` store: that store is this folder's alone. (Its step folders clean
    themselves: a save that died is a partial step, deleted by the next save.)"""
    removed = []
    for folder in WRITTEN_FOLDERS:
        if not (out_dir / folder).is_dir():
            continue
        for path in (out_dir / folder).iterdir():
            if _temporary(path.name) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    inside = folder_store_path(store, str(out_dir)) if store else None
    root = Path(inside) if inside is not None else None  # only the folder's own store
    if root is not None and root.is_dir():
        for path in root.iterdir():
            # `.store-check-<id>` itself, or `..store-check-<id>.<random>.tmp` (its write)
            if path.name.lstrip(".").startswith(CHECK_PREFIX.lstrip(".")) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def _temporary(name: str) -> bool:
    return name.startswith(".") and name.endswith((".tmp", ".part"))


def folder_uri(uri: str, out_dir: Path) -> str:
    """A `file://` URI into the output folder written relative to it (`file://checkpoints/
    <campaign>/<run>/step-N`, as the plan writes a store inside the folder), so a moved or
    copied folder names its own store. Any other URI is returned unchanged."""
    scheme, sep, path = uri.partition("://")
    if scheme != "file" or not sep or not os.path.isabs(path):
        return uri
    try:
        inside = Path(path).relative_to(out_dir.resolve())
    except ValueError:  # a store outside the folder keeps its absolute URI
        return uri
    return f"file://{inside.as_posix()}"


def save_record(out_dir: Path, record: RunRecord) -> None:
    """Write a run's completion record (after its artifacts, so it marks them complete)."""
    uri = record.checkpoint.uri
    if uri is not None and folder_uri(uri, out_dir) != uri:
        checkpoint = record.checkpoint.model_copy(update={"uri": folder_uri(uri, out_dir)})
        record = record.model_copy(update={"checkpoint": checkpoint})
    CampaignFolder(out_dir).write_record(record)
