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
from ablations.errors import OutsideFolder
from ablations.files.names import COMMITS, LEDGER, LOGS, RUN_FOLDERS, WRITTEN_FOLDERS
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


def refuse_planted_links(out_dir: Path, store: str, campaign_id: str) -> None:
    """`OutsideFolder` naming the first symbolic link where the campaign writes: a folder of
    its files (`records/`, `metrics/`, `logs/`...), the ledger (SQLite follows a link, a
    dangling one included, and creates its target), and the folder's own `file://` store and
    its campaign prefix (`checkpoints/<campaign>`). The folder itself may be a link (the user
    names it); a link inside it was planted, and would take the campaign's writes elsewhere."""
    inside = folder_store_path(store, str(out_dir))
    store_root = Path(inside).relative_to(out_dir) if inside is not None else None
    names = [*RUN_FOLDERS, COMMITS, LEDGER, LOGS]
    if store_root is not None:
        names += [part.as_posix() for part in (store_root, store_root / campaign_id)]
    for name in names:
        if (out_dir / name).is_symlink():
            raise OutsideFolder(
                f"{name} in the output folder {out_dir} is a symbolic link: refused (a campaign "
                "writes only inside its folder; remove the link)"
            )


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


def folder_text(text: str, out_dir: Path) -> str:
    """A message with every absolute path into the output folder written relative to it (a
    store's error naming `file:///abs/DIR/checkpoints/...`): a moved folder still verifies."""
    for root in dict.fromkeys((str(out_dir.resolve()), str(out_dir.absolute()))):
        text = text.replace(f"file://{root}/", "file://").replace(f"{root}/", "")
    return text


def save_record(out_dir: Path, record: RunRecord) -> None:
    """Write a run's completion record (after its artifacts, so it marks them complete), its
    checkpoint's URI and its messages naming the folder's files relative to it."""
    summary = record.checkpoint
    checkpoint = summary.model_copy(
        update={
            "uri": None if summary.uri is None else folder_uri(summary.uri, out_dir),
            "last_error": summary.last_error and folder_text(summary.last_error, out_dir),
            "note": summary.note and folder_text(summary.note, out_dir),
        }
    )
    update: dict[str, object] = {"checkpoint": checkpoint}
    if record.error is not None:
        message = folder_text(record.error.message, out_dir)
        update["error"] = record.error.model_copy(update={"message": message})
    CampaignFolder(out_dir).write_record(record.model_copy(update=update))
