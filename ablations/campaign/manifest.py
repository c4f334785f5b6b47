"""manifest.json as a typed model: what the results step writes and report, verify and
`ablate run` read.

    manifest = read_manifest(Path("DIR"))    # a `Manifest`, parsed at each call
    manifest.runs[0].status, manifest.gate.decision, manifest.files

The JSON is format 2 as it always was: a run row is its planned run's fields and its record's
side by side (a pending row only the planned fields and `status`); keys that the results step
writes only sometimes (`planned_vs_realized`, `decision_reached`, `files`, the environment's
`data_sha256`) are left out when unset, so a written manifest read and written again is
the same JSON, byte for byte.
Reading is lenient where `ablate verify` reports instead of refusing (a missing `files` is a
results step that did not finish), strict about types: a malformed manifest is one
`ManifestError` naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model, model_serializer

from ablations.analysis.looks import LookRecord
from ablations.budget import PlannedVsRealized
from ablations.campaign.code import WorkloadCode
from ablations.campaign.gate import GateDecision
from ablations.errors import ManifestError, NotACampaignFolder
from ablations.files.names import MANIFEST
from ablations.plan.variants import PlannedRun
from ablations.run.records import PreflightReport, RunRecord, RunStatus

MANIFEST_FORMAT = 2
"""2: per-run `artifacts` are lists of {kind, path, sha256, bytes}; campaign `files` likewise."""


RowStatus = Literal[RunStatus, "pending", "unneeded"]
"""A run's status, or `pending`: registered, not finished (no record); or `unneeded`: a main
run whose look never came for its variant (decided earlier, or the campaign ended there)."""


class FileEntry(BaseModel):
    """One hashed file of the folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    """What it is: record, steps, evals, predictions, model; plan, state, runs, report, ..."""
    path: str
    """Relative to the output folder (posix)."""
    sha256: str | None
    """None: the file was missing when the manifest was written."""
    bytes: int | None


class CodeVersion(BaseModel):
    """The code that ran the campaign."""

    model_config = ConfigDict(frozen=True)

    package: str
    git_commit: str | None
    """When run from a git checkout."""
    workload: WorkloadCode | None = None
    """The user's code the runs trained with, as registered (`ablations.campaign.code`);
    None for a built-in workload (the package above is its code)."""

    @model_serializer(mode="wrap")
    def _without_unset_workload(self, handler: Any) -> Any:
        """`workload` left out for a built-in workload: a manifest written before the field
        existed is written again byte for byte."""
        data = handler(self)
        if self.workload is None and isinstance(data, dict):
            data.pop("workload", None)
        return data


class Environment(BaseModel):
    """Python and Prefect of the campaign process; torch, CUDA, devices as the runs saw them."""

    model_config = ConfigDict(frozen=True)

    python: str
    platform: str
    torch: str | None
    prefect: str | None
    cuda: str | None
    devices: list[str]
    data_sha256: list[str] | None = None
    """The workloads' data digests, when they report one (left out of the JSON otherwise)."""

    @model_serializer(mode="wrap")
    def _without_absent_digest(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("data_sha256") is None:
            data.pop("data_sha256", None)
        return data


class CheckpointStoreRef(BaseModel):
    """The plan's checkpoint store, without credentials."""

    model_config = ConfigDict(frozen=True)

    url: str
    endpoint_url: str | None


class VerifySettings(BaseModel):
    """How `ablate verify` re-evaluates the final models."""

    model_config = ConfigDict(frozen=True)

    command: str
    device: str
    tolerance: float


class BudgetSummary(BaseModel):
    """The budget section: its markdown, then `BudgetAssessment.summary()` as it is (window,
    fit, price, cost per accepted result, suggestions: typed and documented there)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    markdown: str | None = None
    """The budget section of REPORT.md."""


def row_fields() -> dict[str, Any]:
    """A row's fields as `create_model` takes them: `PlannedRun`'s in their order, then
    `RunRecord`'s that it does not share (run id, variant, seed, category and phase are the
    plan's), in theirs. A field added to either record reaches the manifest's rows as it is."""
    fields: dict[str, Any] = {}
    for record in (PlannedRun, RunRecord):
        for name, info in record.model_fields.items():
            fields.setdefault(name, (info.annotation, info))
    return fields


if TYPE_CHECKING:  # the checker sees the fields `ManifestRun` declares; the rest are read
    _RowFields = BaseModel  # through `planned` and `record()`, typed as their records
else:
    _RowFields = create_model("_RowFields", __module__=__name__, **row_fields())


class ManifestRun(_RowFields):
    """One registered run: its `PlannedRun` fields, then its `RunRecord` fields (a pending run:
    the planned fields and `status` only).

    The fields are the two records' own (`row_fields`), not a copy of them; two are declared
    here, where a row differs from a record, and keep the record's place in the JSON. Code
    reads a row through `planned` and `record()` (the row's fields as their records, typed),
    `status` and the artifact helpers; the flat attributes are the JSON's keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: RowStatus
    """The record's status, or `pending` / `unneeded` for a run without a record."""
    artifacts: list[FileEntry] | dict[str, str] = []
    """The record and the files it names, hashed (format 2); kind -> path in format 1."""

    @model_serializer(mode="wrap")
    def _pending_rows_hold_the_plan(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.status in ("pending", "unneeded"):
            return {k: v for k, v in data.items() if k in PENDING_KEYS}
        if not data.get("export_sha256"):  # a run on this machine's slots: as it always was
            data.pop("export_sha256", None)
        return data

    @property
    def planned(self) -> PlannedRun:
        """The run as registered: the row's `PlannedRun` fields."""
        return PlannedRun.model_validate({k: getattr(self, k) for k in PlannedRun.model_fields})

    @property
    def run_file_entries(self) -> list[FileEntry]:
        """The hashed entries of the run's files, its record's included (none in a format 1
        row; the field keeps the format's name, `artifacts`)."""
        return self.artifacts if isinstance(self.artifacts, list) else []

    @property
    def run_file_paths(self) -> dict[str, str]:
        """Kind -> path of the run files the run wrote (its record left out), as the record
        names them."""
        if isinstance(self.artifacts, dict):
            return dict(self.artifacts)
        return {a.kind: a.path for a in self.artifacts if a.kind != "record"}

    def run_file(self, kind: str) -> str | None:
        """The path of the run's file of this kind (its `model`, `predictions`...), or None."""
        return self.run_file_paths.get(kind)

    def record(self) -> RunRecord | None:
        """The run's completion record as the row holds it; None while it is pending."""
        if self.status in ("pending", "unneeded"):
            return None
        fields = {k: getattr(self, k) for k in RunRecord.model_fields if k != "artifacts"}
        return RunRecord.model_validate({**fields, "artifacts": self.run_file_paths})


PENDING_KEYS = frozenset({*PlannedRun.model_fields, "status"})
"""What a pending (or unneeded) row holds."""

OMITTED_WHEN_UNSET = ("planned_vs_realized", "planned_vs_realized_markdown", "decision_reached")
"""Keys the results step writes only sometimes (with a projection; after the report)."""


class Manifest(BaseModel):
    """manifest.json. Fields other than `runs` may be missing in a folder whose results step did not
    finish (`ablate verify` says which); unknown top-level keys are kept as they are."""

    model_config = ConfigDict(frozen=True, extra="allow")

    manifest_format: int | None = None
    """`MANIFEST_FORMAT` of the results step that wrote it."""
    campaign_id: str | None = None
    plan_hash: str | None = None
    """The sha256 of the registered plan's canonical JSON."""
    ledger_url: str | None = None
    """`sqlite:///ledger.db`, relative to the output folder."""
    ledger_study: str | None = None
    """The Optuna study's name in the ledger (the campaign id)."""
    ledger_file: str | None = None
    """The ledger's file in the folder (not hashed: SQLite rewrites pages when opened)."""
    question: str | None = None
    """The plan's question."""
    code_version: CodeVersion | None = None
    environment: Environment | None = None
    checkpoint_store: CheckpointStoreRef | None = None
    verify: VerifySettings | None = None
    preflight: PreflightReport | None = None
    """preflight.json as it was at the results step; None when preflight never ran."""
    gate: GateDecision | None = None
    """gate.json as it was at the results step; None when no gate was reached."""
    looks: list[LookRecord] = []
    """looks.json as it was at the results step: each look of the main phase and its decisions."""
    budget: BudgetSummary | None = None
    planned_vs_realized: PlannedVsRealized | None = None
    """The registered projection beside what happened (absent without a projection)."""
    planned_vs_realized_markdown: str | None = None
    runs: list[ManifestRun]
    """One row per registered run, in registration order."""
    decision_reached: str | None = None
    """The report's decision sentence, which `ablate run` ends with."""
    files: list[FileEntry] | None = None
    """The hashed campaign-level files; None (absent) until the results step's last write."""

    @model_serializer(mode="wrap")
    def _without_unset_parts(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in (*OMITTED_WHEN_UNSET, "files"):
            if data.get(key) is None:
                data.pop(key, None)
        return data

    def to_json(self) -> str:
        """The file's text (format 2, as the results step has always written it)."""
        return json.dumps(self.model_dump(mode="json"), indent=2)

    def run(self, run_id: str) -> ManifestRun | None:
        return next((r for r in self.runs if r.planned.run_id == run_id), None)


def read_manifest(out_dir: Path) -> Manifest:
    """The folder's manifest, parsed at each call (its readers read it once: `ablate report`,
    `ablate verify`; `ablate run` is handed the one the results step wrote);
    `NotACampaignFolder` when there is none to read, `ManifestError` naming the file and the
    field when it is malformed."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise NotACampaignFolder(f"{out_dir} is not a folder")
    path = (out_dir / MANIFEST).resolve()
    if not path.is_file():
        raise NotACampaignFolder(
            f"{out_dir} has no {MANIFEST} ({path} does not exist): is it the output folder "
            "of `ablate run --out`?"
        )
    return parse_manifest(path)


def parse_manifest(path: Path) -> Manifest:
    """manifest.json at `path`, validated."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotACampaignFolder(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise NotACampaignFolder(f"{path} holds no 'runs' list: it is not a campaign manifest")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(f"{path}: {describe(exc)}") from exc


def describe(exc: ValidationError) -> str:
    """The first problem as `field: message (got value)`, and how many more there are."""
    errors = exc.errors()
    first = errors[0]
    where = field_path(first["loc"])
    got = f" (got {first['input']!r:.80})" if first["type"] != "missing" else ""
    paths = {field_path(e["loc"]) for e in errors}
    # A union fails once per member: keep the deepest field a member names.
    deepest = {p for p in paths if not any(q.startswith((f"{p}.", f"{p}[")) for q in paths)}
    others = deepest - {where}
    more = f"; and {len(others)} more field(s): {', '.join(sorted(others)[:3])}" if others else ""
    return f"field {where}: {first['msg']}{got}{more}"


def field_path(loc: tuple[int | str, ...]) -> str:
    """`runs[3].status` from pydantic's ('runs', 3, 'status'); union branch names dropped."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif "[" in part or part.startswith(("function-", "literal[")):
            continue  # a union member's tag, e.g. list[FileEntry]
        else:
            path += f".{part}" if path else part
    return path
