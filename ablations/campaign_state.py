"""A campaign's state in its output folder: registration, completion records, gate decision.

Everything a restarted campaign needs to skip finished work is a small JSON file here, written
atomically, so a finished run is recognized without rereading its metrics or checkpoints:

    DIR/plan.yaml                 the registered plan, byte for byte
    DIR/registration.json         campaign id, plan hash, when
    DIR/preflight.json            the preflight report
    DIR/gate.json                 the gate decision (asked once, never again)
    DIR/records/<run_id>.json     one completion record per finished run
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ablations.errors import CampaignConflictError, InfrastructureError, InputError
from ablations.folder_lock import LOCK_NAME
from ablations.plan import Plan, parse_plan, plan_hash
from ablations.plan_io import parse_yaml
from ablations.records import RunRecord

RECORDS = "records"


class Registration(BaseModel):
    """A registered (frozen, hashed) campaign."""

    campaign_id: str
    plan_hash: str
    out_dir: str
    """Absolute path of the output folder."""
    registered_at: float


def atomic_write_text(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # name the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


WRITTEN_FOLDERS = ("", "metrics", "predictions", "records", "models")
"""Where the campaign writes files through temporaries (`.<name>.<random>.tmp`, `.part`)."""


def remove_leftover_temporaries(out_dir: Path) -> list[Path]:
    """Delete the temporaries an interrupted campaign left (a full disk, a kill): call it only
    while holding the folder's lock, when no write of this campaign can be in flight."""
    removed = []
    for folder in WRITTEN_FOLDERS:
        if not (out_dir / folder).is_dir():
            continue
        for path in (out_dir / folder).iterdir():
            name = path.name
            if name.startswith(".") and name.endswith((".tmp", ".part")) and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


def existing_registration(plan: Plan, out_dir: Path) -> Registration | None:
    """The folder's registration when it matches `plan`; refuses any mismatch. Writes nothing."""
    digest = plan_hash(plan)
    out_dir = out_dir.resolve()
    existing = out_dir / "registration.json"
    if existing.exists():
        known = Registration.model_validate_json(existing.read_text())
        if known.plan_hash != digest or known.campaign_id != plan.campaign.id:
            raise CampaignConflictError(
                f"{out_dir} already holds campaign {known.campaign_id!r} with plan hash "
                f"{known.plan_hash}; this plan ({plan.campaign.id!r}) hashes to {digest}. "
                "A corrected plan is a new campaign: use a new campaign id and output folder."
            )
        return known.model_copy(update={"out_dir": str(out_dir)})
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} exists and is not a folder; choose another --out")
    _check_creatable(out_dir)
    if out_dir.exists() and any(p.name != LOCK_NAME for p in out_dir.iterdir()):
        raise InputError(
            f"{out_dir} is not empty and holds no registered campaign; choose another --out"
        )
    return None


def _check_creatable(out_dir: Path) -> None:
    """Refuse a folder that cannot be created or written, before anything starts."""
    ancestor = out_dir
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(
            f"cannot create the output folder {out_dir}: {ancestor} is a file, not a folder"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"cannot create the output folder {out_dir}: {ancestor} is not writable")


def register(plan_text: str, out_dir: Path, source: str = "plan") -> Registration:
    """Freeze the plan in `out_dir`; refuse a known campaign whose plan hash differs."""
    plan = parse_plan(parse_yaml(plan_text, source), source)
    digest = plan_hash(plan)
    out_dir = out_dir.resolve()
    existing = out_dir / "registration.json"
    known = existing_registration(plan, out_dir)
    if known is not None:
        return known
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        registration = Registration(
            campaign_id=plan.campaign.id,
            plan_hash=digest,
            out_dir=str(out_dir),
            registered_at=time.time(),
        )
        atomic_write_text(out_dir / "plan.yaml", plan_text)
        atomic_write_text(existing, registration.model_dump_json(indent=2))
    except OSError as exc:
        raise InfrastructureError(f"cannot write the output folder {out_dir}: {exc}") from exc
    return registration


def registered_plan(out_dir: Path) -> Plan:
    """The plan frozen in the output folder (parsed once per process: every run task asks)."""
    path = out_dir / "plan.yaml"
    return _parsed_plan(path.read_text(encoding="utf-8"), str(path))


@functools.lru_cache(maxsize=8)
def _parsed_plan(text: str, source: str) -> Plan:
    return parse_plan(parse_yaml(text, source), source)


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
    atomic_write_text(out_dir / RECORDS / f"{record.run_id}.json", record.model_dump_json(indent=2))


def load_record(out_dir: Path, run_id: str) -> RunRecord | None:
    """A finished run's record, or None when the run has not finished. A run whose worker
    or host was lost (`RunRecord.lost`) has not finished: a rerun retries it."""
    path = out_dir / RECORDS / f"{run_id}.json"
    if not path.exists():
        return None
    record = RunRecord.model_validate_json(path.read_text())
    return None if record.lost else record


def load_records(out_dir: Path) -> dict[str, RunRecord]:
    """Every completion record in the folder, by run id."""
    folder = out_dir / RECORDS
    if not folder.is_dir():
        return {}
    records = (RunRecord.model_validate_json(p.read_text()) for p in sorted(folder.glob("*.json")))
    return {r.run_id: r for r in records}


def save_json(out_dir: Path, name: str, model: BaseModel) -> None:
    """Write a small state file (preflight.json, gate.json) atomically."""
    atomic_write_text(out_dir / name, model.model_dump_json(indent=2))


def load_json(out_dir: Path, name: str) -> dict[str, Any] | None:
    """A small state file's content, or None."""
    path = out_dir / name
    return json.loads(path.read_text()) if path.exists() else None


MANIFEST = "manifest.json"


class NotACampaignFolder(InputError):
    """The path is not an output folder of `ablate run` (no readable manifest)."""


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """The folder's manifest; `NotACampaignFolder` when there is none to read."""
    if not out_dir.is_dir():
        raise NotACampaignFolder(f"{out_dir} is not a folder")
    path = out_dir / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise NotACampaignFolder(
            f"{out_dir} has no {MANIFEST} ({path} does not exist): is it the output folder "
            "of `ablate run --out`?"
        ) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotACampaignFolder(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise NotACampaignFolder(f"{path} holds no 'runs' list: it is not a campaign manifest")
    return data
