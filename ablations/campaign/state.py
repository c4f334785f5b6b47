"""A campaign's state in its output folder: registration, completion records, leftovers.

Everything a restarted campaign needs to skip finished work is a small JSON file of the folder
(`CampaignFolder` names and writes them atomically), so a finished run is recognized without
rereading its metrics or checkpoints: the registered plan and its registration, one
completion record per finished run, the preflight report and the gate decision. Here: the
registration (which writes the first two), removing an interrupted campaign's temporaries,
and saving a completion record; a registered campaign is read back as a whole
(`ablations.campaign.campaign.Campaign.load`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Literal

from ablations.campaign.code import WorkloadCode, workload_code
from ablations.campaign.folder import CampaignFolder, Registration
from ablations.errors import CampaignConflictError, InfrastructureError, InputError
from ablations.files.atomic import atomic_write_text
from ablations.files.names import LOCK, PLAN, RECORDS, REGISTRATION, WRITTEN_FOLDERS
from ablations.plan.io import plan_from_text
from ablations.plan.model import Plan, plan_hash
from ablations.process.crash_points import AFTER_PLAN, crash_point
from ablations.run.records import RunRecord

__all__ = [
    "Registration",
    "atomic_write_text",
    "existing_registration",
    "folder_uri",
    "register",
    "remove_leftover_temporaries",
    "save_record",
]


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


def existing_registration(
    plan: Plan, out_dir: Path, code: WorkloadCode | Literal["hash"] | None = "hash"
) -> Registration | None:
    """The folder's registration when it matches `plan` and the user's `code` (hashed here by
    default: `workload_code`); refuses any mismatch. Writes nothing; the registration given
    back holds `code` (a changed code that no run trained with yet replaces the old: see
    `changed_code`)."""
    digest = plan_hash(plan)
    out_dir = out_dir.resolve()
    if code == "hash":
        code = workload_code(plan)
    known = CampaignFolder(out_dir).registration()
    if known is not None:
        if known.plan_hash != digest or known.campaign_id != plan.campaign.id:
            raise CampaignConflictError(
                f"{out_dir} already holds campaign {known.campaign_id!r} with plan hash "
                f"{known.plan_hash}; this plan ({plan.campaign.id!r}) hashes to {digest}. "
                "A corrected plan is a new campaign: use a new campaign id and output folder."
            )
        if changed_code(known, code) and _trained(out_dir):
            before, now = known.code, code
            assert before is not None
            raise CampaignConflictError(
                f"{out_dir} holds campaign {known.campaign_id!r}, whose runs trained with other "
                f"code ({before.line()}; now {now.line() if now else 'none found'}): a rerun "
                "would mix two versions of it. Changed code is a new campaign: use a new "
                "campaign id and output folder (or restore the code)."
            )
        return known.model_copy(update={"out_dir": str(out_dir), "code": code})
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} exists and is not a folder; choose another --out")
    _check_creatable(out_dir)
    if out_dir.exists() and any(not _registering(p) for p in out_dir.iterdir()):
        raise InputError(
            f"{out_dir} is not empty and holds no registered campaign; choose another --out"
        )
    _check_unregistered_plan(out_dir, plan, digest)
    return None


def changed_code(known: Registration, code: WorkloadCode | None) -> bool:
    """Whether `code` differs from the registered code. A folder registered before the code
    was recorded (no `code`) takes any."""
    if known.code is None:
        return False
    return code is None or code.sha256 != known.code.sha256


def _trained(out_dir: Path) -> bool:
    """Whether any run of the folder has a completion record (before one, changed code mixes
    nothing: a preflight's `fix` is corrected in the code and rerun in the same folder)."""
    records = out_dir / RECORDS
    return records.is_dir() and any(p.suffix == ".json" for p in records.iterdir())


def _registering(path: Path) -> bool:
    """What a registration killed half way leaves (or the lock of the run about to start):
    the plan's copy, the temporaries of it and of registration.json."""
    name = path.name
    temporary = name.startswith((f".{PLAN}.", f".{REGISTRATION}.")) and name.endswith(".tmp")
    return name in (LOCK, PLAN) or temporary


def _check_unregistered_plan(out_dir: Path, plan: Plan, digest: str) -> None:
    """A plan.yaml without registration.json is a registration killed between its two writes:
    this campaign's (same hash) registers again over it, any other plan is refused."""
    path = out_dir / PLAN
    if not path.is_file():
        return
    try:
        text = path.read_text(encoding="utf-8")
        found = plan_hash(plan_from_text(text, str(path)))
    except (OSError, UnicodeDecodeError, InputError):
        found = "unreadable"
    if found != digest:
        raise CampaignConflictError(
            f"{out_dir} holds an unregistered plan.yaml hashing to {found}; this plan "
            f"({plan.campaign.id!r}) hashes to {digest}. Choose another --out."
        )


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
    plan = plan_from_text(plan_text, source)
    digest = plan_hash(plan)
    out_dir = out_dir.resolve()
    code = workload_code(plan)
    on_disk = CampaignFolder(out_dir).registration()
    known = existing_registration(plan, out_dir, code)
    if known is not None:
        if on_disk is not None and on_disk.code != code:
            # no run trained with the old code (else refused above), or a folder from before
            # the code was recorded: the registration takes this code from now on
            recoded = on_disk.model_copy(update={"code": code})
            try:
                CampaignFolder(out_dir).write_registration(recoded)
            except OSError as exc:
                raise InfrastructureError(f"cannot write {out_dir / REGISTRATION}: {exc}") from exc
        return known
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        registration = Registration(
            campaign_id=plan.campaign.id,
            plan_hash=digest,
            out_dir=str(out_dir),
            registered_at=time.time(),
            code=code,
        )
        folder = CampaignFolder(out_dir)
        remove_leftover_temporaries(out_dir)  # a killed registration's (we hold the lock)
        # The plan first: registration.json marks a complete registration, and a plan.yaml
        # without one (killed in between) is recognized by its hash on the next attempt.
        folder.write_plan(plan_text)
        crash_point(AFTER_PLAN)
        folder.write_registration(registration)
    except OSError as exc:
        raise InfrastructureError(f"cannot write the output folder {out_dir}: {exc}") from exc
    return registration


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
