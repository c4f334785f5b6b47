"""The output folder of a campaign: the name of every file of the contract, read and written typed.

    folder = CampaignFolder(Path("DIR"))
    folder.write_gate(decision)           # DIR/gate.json, atomically
    folder.records()                      # every DIR/records/<run_id>.json, as RunRecords
    folder.manifest()                     # DIR/manifest.json as a `Manifest`

The names of the output contract (ARCHITECTURE.md) live in `ablations.files.names`, re-exported
here. Every write goes through a temporary file and a rename (`ablations.files.atomic`), so a
reader never sees half a file, and the rename is made durable. Reads return pydantic models,
or None where the file does not exist (yet).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from ablations.campaign.code import WorkloadCode
from ablations.campaign.manifest import Manifest, read_manifest
from ablations.files.atomic import atomic_write_bytes, atomic_write_text
from ablations.run.records import PreflightReport, RunRecord

if TYPE_CHECKING:
    from ablations.analysis.looks import Looks
    from ablations.budget import Projection
    from ablations.campaign.gate import GateDecision
    from ablations.plan.model import Plan

# The output contract's names live at the bottom (`ablations.files.names`); re-exported here so
# `from ablations.campaign.folder import GATE` keeps working.
from ablations.errors import OutsideFolder
from ablations.files.names import (  # noqa: F401
    CURVES_PNG,
    EFFECTS_PNG,
    GATE,
    LEDGER,
    LEDGER_LOCK,
    LOCK,
    LOOKS,
    MANIFEST,
    METRICS,
    MODELS,
    PER_CLASS_PNG,
    PLAN,
    PLOTS,
    PREDICTIONS,
    PREFLIGHT,
    PROBE_JSON,
    PROBE_MD,
    PROJECTION,
    RECORDS,
    REFRAME_DRAFT,
    REGISTRATION,
    RELOAD,
    REPORT,
    REPORT_HTML,
    RUN_FOLDERS,
    RUNS_CSV,
    TIMELINE_PNG,
    TOP_LEVEL,
    WRITTEN_FOLDERS,
    record_name,
)


def inside(root: Path, relative: str) -> Path:
    """`root/relative` resolved, once it is inside `root`: the one guard every write of the
    folder goes through. `..`, an absolute name or a symbolic link leading out is refused
    (`OutsideFolder`): names such as run ids and artifact paths may come from a shared store."""
    base = root.resolve()
    target = (base / relative).resolve()
    if base not in target.parents:
        raise OutsideFolder(f"{relative!r} is outside the campaign folder {base}: not written")
    return target


class Registration(BaseModel):
    """A registered (frozen, hashed) campaign."""

    campaign_id: str
    plan_hash: str
    out_dir: str
    """Absolute path of the output folder."""
    registered_at: float
    code: WorkloadCode | None = None
    """The user's code the runs train with, hashed (`ablations.campaign.code`); None for a
    built-in workload, and in folders registered before it was recorded."""


class CampaignFolder:
    """One output folder: typed reads and atomic writes of the contract's files."""

    def __init__(self, out_dir: Path | str) -> None:
        self.out_dir = Path(out_dir)
        """The output folder's path."""

    def __repr__(self) -> str:
        return f"CampaignFolder({str(self.out_dir)!r})"

    def path(self, relative: str) -> Path:
        """Where `relative` is in the folder; `OutsideFolder` when it leads out (`inside`)."""
        return inside(self.out_dir, relative)

    def record_path(self, run_id: str) -> Path:
        """`records/<run_id>.json`: the run's completion record."""
        return self.path(self.record_name(run_id))

    record_name = staticmethod(record_name)

    # -- the registered plan and registration ------------------------------------------------

    def write_plan(self, text: str) -> None:
        atomic_write_text(self.path(PLAN), text)

    def plan_text(self) -> str:
        return (self.out_dir / PLAN).read_text(encoding="utf-8")

    def plan(self) -> Plan:
        """The registered plan, parsed from plan.yaml at each call: a campaign's process reads
        it once (`Campaign.load`) and passes the campaign on."""
        from ablations.plan.io import plan_from_text

        source = str(self.out_dir / PLAN)
        return plan_from_text(self.plan_text(), source)

    def write_registration(self, registration: Registration) -> None:
        atomic_write_text(self.path(REGISTRATION), registration.model_dump_json(indent=2))

    def registration(self) -> Registration | None:
        """The registration as written (its `out_dir` is where the folder was registered)."""
        path = self.out_dir / REGISTRATION
        return Registration.model_validate_json(path.read_text()) if path.exists() else None

    # -- runs ----------------------------------------------------------------------------------

    def write_record(self, record: RunRecord) -> None:
        atomic_write_text(self.record_path(record.run_id), record.model_dump_json(indent=2))

    def record(self, run_id: str) -> RunRecord | None:
        """The run's completion record, or None when there is none."""
        path = self.record_path(run_id)
        return RunRecord.model_validate_json(path.read_text()) if path.exists() else None

    def records(self) -> dict[str, RunRecord]:
        """Every completion record in the folder, by run id."""
        folder = self.out_dir / RECORDS
        if not folder.is_dir():
            return {}
        paths = sorted(folder.glob("*.json"))
        records = (RunRecord.model_validate_json(p.read_text()) for p in paths)
        return {r.run_id: r for r in records}

    # -- campaign state files ----------------------------------------------------------------

    def write_preflight(self, report: PreflightReport) -> None:
        atomic_write_text(self.path(PREFLIGHT), report.model_dump_json(indent=2))

    def preflight(self) -> PreflightReport | None:
        path = self.out_dir / PREFLIGHT
        return PreflightReport.model_validate_json(path.read_text()) if path.exists() else None

    def write_gate(self, decision: GateDecision) -> None:
        atomic_write_text(self.path(GATE), decision.model_dump_json(indent=2))

    def gate(self) -> GateDecision | None:
        """The recorded gate decision (a `fix` included), or None."""
        from ablations.campaign.gate import GateDecision

        path = self.out_dir / GATE
        return GateDecision.model_validate_json(path.read_text()) if path.exists() else None

    def write_looks(self, looks: Looks) -> None:
        atomic_write_text(self.path(LOOKS), looks.model_dump_json(indent=2))

    def looks(self) -> Looks | None:
        """The looks recorded so far, or None before the first."""
        from ablations.analysis.looks import Looks

        path = self.out_dir / LOOKS
        return Looks.model_validate_json(path.read_text()) if path.exists() else None

    def write_projection(self, projection: Projection) -> None:
        atomic_write_text(self.path(PROJECTION), projection.model_dump_json(indent=2))

    def projection(self) -> Projection | None:
        from ablations.budget import Projection

        path = self.out_dir / PROJECTION
        return Projection.model_validate_json(path.read_text()) if path.exists() else None

    def write_reframe_draft(self, text: str) -> Path:
        atomic_write_text(self.path(REFRAME_DRAFT), text)
        return self.out_dir / REFRAME_DRAFT

    # -- the index files -----------------------------------------------------------------------

    def write_manifest(self, manifest: Manifest) -> Path:
        """Write manifest.json (atomically); return its path."""
        path = self.path(MANIFEST)
        atomic_write_text(path, manifest.to_json())
        return path

    def manifest(self) -> Manifest:
        """manifest.json as a `Manifest`, parsed at each call; `NotACampaignFolder` (or its
        `ManifestError`, naming the field) when it cannot be."""
        return read_manifest(self.out_dir)

    def write_text(self, name: str, text: str) -> Path:
        """Write one of the folder's text files (runs.csv, REPORT.md, RELOAD.md) atomically."""
        path = self.path(name)
        atomic_write_text(path, text)
        return path

    def write_bytes(self, relative: str, data: bytes) -> Path:
        """Write a run's artifact (`metrics/...`, `models/...`) atomically; its path."""
        path = self.path(relative)
        atomic_write_bytes(path, data)
        return path
