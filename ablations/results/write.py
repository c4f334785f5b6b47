"""The output folder's index files: manifest.json and runs.csv, from the completion records.

Write order (so a reader never trusts a half-written folder): the runs' own files and
completion records exist first; then the ledger, runs.csv, the report and RELOAD.md; the
manifest, which hashes all of them, is written last and atomically. The manifest is built
once, from the loaded `Campaign` and the records read once; the report is built from that
manifest in memory (as `ablate report` builds it from manifest.json), after a first
manifest.json without the `files` list is written: a manifest without `files` is a results
step that did not finish (`ablate verify` says so).

What is hashed: every file that is final once the manifest is written (per run: its record,
metrics, predictions and final model; per campaign: plan.yaml, the state files, runs.csv,
REPORT.md, REPORT.html, its plots, RELOAD.md). Not hashed: the ledger (`ledger.db`), since
SQLite may rewrite pages whenever it is opened; `ablate verify` checks it by content instead.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

from ablations import __version__
from ablations.analysis.looks import Looks, unneeded_runs
from ablations.budget import (
    assess_plan,
    budget_markdown,
    planned_vs_realized,
    planned_vs_realized_markdown,
)
from ablations.campaign.campaign import Campaign
from ablations.campaign.code import WorkloadCode
from ablations.campaign.manifest import (
    MANIFEST_FORMAT,
    BudgetSummary,
    CheckpointStoreRef,
    CodeVersion,
    Environment,
    FileEntry,
    Manifest,
    ManifestRun,
    VerifySettings,
)
from ablations.files.names import (
    DEFAULT_TOLERANCE,
    GATE,
    LOOKS,
    PLAN,
    PLOTS,
    PREFLIGHT,
    PROJECTION,
    REEVALUATION_DEVICE,
    REFRAME_DRAFT,
    REGISTRATION,
    RELOAD,
    REPORT,
    REPORT_HTML,
    RUNS_CSV,
)
from ablations.report.build import build_report
from ablations.report.decision import decision_reached
from ablations.report.from_folder import manifest_inputs
from ablations.results.ledger import (
    LEDGER_FILE,
    LEDGER_URL,
    damage_named,
    open_ledger,
    record_runs,
)
from ablations.results.reload_doc import reload_markdown
from ablations.run.records import Rejection, RunRecord
from ablations.security.credentials import redact_url
from ablations.text.units import utc

STATE_FILES = (
    ("plan", PLAN),
    ("state", REGISTRATION),
    ("state", PROJECTION),
    ("state", PREFLIGHT),
    ("state", GATE),
    ("state", LOOKS),
    ("state", REFRAME_DRAFT),
)
"""Campaign files that are final before the results step starts (absent ones are skipped)."""

RUN_COLUMNS = [
    "run_id",
    "variant",
    "factor",
    "level",
    "seed",
    "category",
    "phase",
    "steps",
    "start_step",
    "status",
    "stop_rule",
    "stop_reason",
    "stop_step",
    "error",
    "rejection",
    "metric",
    "device",
    "slot",
    "started_at",
    "ended_at",
    "started_at_utc",
    "ended_at_utc",
    "seconds",
    "checkpoint_uri",
    "model",
]


def code_version(workload: WorkloadCode | None = None) -> CodeVersion:
    """The package version and, when run from a git checkout, its commit; and the user's
    code as registered (`workload`)."""
    commit = None
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        commit = result.stdout.strip() or None if result.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return CodeVersion(package=__version__, git_commit=commit, workload=workload)


def environment(records: list[RunRecord]) -> Environment:
    """Python and Prefect of the campaign process; torch, CUDA and the devices as the runs'
    own processes saw them (the campaign process never imports torch)."""
    seen = [r.environment for r in records if r.environment is not None]
    torch_versions = sorted({e.torch for e in seen})
    cuda_versions = sorted({e.cuda for e in seen if e.cuda})
    # The workloads' data digests (charlm's corpus), when they report one: another Python's
    # standard library is another corpus.
    data = sorted({e.data_sha256 for e in seen if e.data_sha256})
    return Environment(
        python=platform.python_version(),
        platform=platform.platform(),
        torch=", ".join(torch_versions) or _installed("torch"),
        prefect=_installed("prefect"),
        cuda=", ".join(cuda_versions) or None,
        devices=sorted({e.device_name for e in seen}) or ["cpu"],
        data_sha256=data or None,
    )


def _installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def file_entry(out_dir: Path, kind: str, relative: str) -> FileEntry:
    """{kind, path, sha256, bytes} of one file in the folder (sha256 None: it is missing)."""
    path = out_dir / relative
    digest, size = None, None
    if path.is_file():
        sha = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                sha.update(chunk)
        digest, size = sha.hexdigest(), path.stat().st_size
    return FileEntry(kind=kind, path=relative, sha256=digest, bytes=size)


def run_rows(campaign: Campaign, records: dict[str, RunRecord], looks: Looks) -> list[ManifestRun]:
    """One merged row per registered run: what was planned plus what happened (`records`,
    by run id; `looks`, which tell a pending run from an unneeded one).

    A finished run's `artifacts` are its completion record and the files the record names,
    each with its sha256 and size; its checkpoint URI is stored without any credentials."""
    folder, out_dir = campaign.folder, campaign.out_dir
    unneeded = unneeded_runs(looks, campaign.phase("main"), set(records))
    rows = []
    for planned in campaign.runs:
        record = records.get(planned.run_id)
        if record is None:
            status = "unneeded" if planned.run_id in unneeded else "pending"
            rows.append(ManifestRun(**dict(planned), status=status))
            continue
        checkpoint = record.checkpoint
        if checkpoint.uri is not None:
            checkpoint = checkpoint.model_copy(update={"uri": redact_url(checkpoint.uri)})
        named = [("record", folder.record_name(record.run_id)), *record.artifacts.items()]
        mine = {k: v for k, v in record if k not in PLANNED_IN_RECORD}
        row = ManifestRun(
            **{**dict(planned), **mine},
            checkpoint=checkpoint,
            artifacts=[file_entry(out_dir, kind, path) for kind, path in named],
        )
        rows.append(row)
    return rows


PLANNED_IN_RECORD = frozenset({"variant", "seed", "category", "phase", "checkpoint", "artifacts"})
"""Record fields a row takes from elsewhere: the plan's, or rewritten (redacted, hashed)."""


def campaign_files(out_dir: Path) -> list[FileEntry]:
    """The hashed campaign-level files that exist (see the module docstring)."""
    named = [
        *STATE_FILES,
        ("runs", RUNS_CSV),
        ("report", REPORT),
        ("report", REPORT_HTML),
        *(("plot", name) for name in PLOTS),
        ("reload", RELOAD),
    ]
    return [file_entry(out_dir, kind, path) for kind, path in named if (out_dir / path).is_file()]


def _flat(row: dict[str, Any], metric: str) -> dict[str, Any]:
    stop = row.get("stop") or {}
    error = row.get("error") or {}
    started, ended = row.get("started_at"), row.get("ended_at")
    return {
        **{k: row.get(k) for k in RUN_COLUMNS if k in row},
        "stop_rule": stop.get("rule"),
        "stop_reason": stop.get("message"),
        "stop_step": stop.get("step"),
        "error": f"{error['type']}: {error['message']}" if error else None,
        "rejection": _rejection(row.get("rejection")),
        "metric": (row.get("metrics") or {}).get(metric),
        "started_at_utc": utc(started),
        "ended_at_utc": utc(ended),
        "seconds": round(ended - started, 3) if started and ended else None,
        "checkpoint_uri": (row.get("checkpoint") or {}).get("uri"),
        "model": next(
            (a["path"] for a in row.get("artifacts") or [] if a["kind"] == "model"), None
        ),
    }


def _rejection(fields: dict[str, Any] | None) -> str | None:
    """A rejected run's reason, as the report prints it."""
    return None if not fields else Rejection.model_validate(fields).message


def write_results_at(out_dir: Path) -> Manifest:
    """The results step in a process of its own (a slot's worker): the campaign is loaded
    once here (this process's one parse of the plan), then `write_results`."""
    return write_results(Campaign.load(out_dir))


def write_results(campaign: Campaign) -> Manifest:
    """The results step: the ledger, runs.csv, the report, RELOAD.md and manifest.json, from
    the completion records (read once); return the final manifest, as written."""
    folder, out_dir, plan = campaign.folder, campaign.out_dir, campaign.plan
    by_id = campaign.records()
    record_ledger(campaign, by_id)
    manifest = derive_manifest(campaign, by_id, campaign.looks())
    folder.write_text(RUNS_CSV, runs_csv(manifest.runs, plan.metric.name))
    # First without `files` (a results step that did not finish); the report is built from
    # this manifest as it is, as `ablate report` builds it from the file (`files` ignored).
    # Its gate names who decided, as manifest.json does: the file always holds `source`.
    folder.write_manifest(manifest)
    gate = manifest.gate
    inputs = manifest_inputs(out_dir, plan, manifest, gate_source=gate.source if gate else None)
    build_report(out_dir, inputs)
    # What `ablate run` ends with
    manifest = manifest.model_copy(update={"decision_reached": decision_reached(inputs)})
    folder.write_text(RELOAD, reload_markdown(manifest, plan))
    manifest = manifest.model_copy(update={"files": campaign_files(out_dir)})
    folder.write_manifest(manifest)
    return manifest


def derive_manifest(campaign: Campaign, by_id: dict[str, RunRecord], looks: Looks) -> Manifest:
    """The manifest as the completion records (`by_id`), the `looks`, the registered plan and
    the campaign's state files give it, without `decision_reached` and `files` (the results
    step adds them once the report is written). Writes nothing: `ablate verify` derives it
    again and compares."""
    plan, registration = campaign.plan, campaign.registration
    rows = run_rows(campaign, by_id, looks)
    records = list(by_id.values())
    gate = campaign.gate()
    assessment = assess_plan(plan, records=records, runs=campaign.runs)
    projection = campaign.projection()
    realized: dict[str, Any] = {}
    if projection is not None:
        pvr = planned_vs_realized(
            projection,
            records,
            decisions=[f"gate: {gate.decision}: {gate.reason}"] if gate else [],
            trimmed=gate.drop if gate else [],
            unneeded=[r.planned.run_id for r in rows if r.status == "unneeded"],
            gate_decided_at=gate.decided_at if gate else None,
        )
        realized = {
            "planned_vs_realized": pvr,
            "planned_vs_realized_markdown": planned_vs_realized_markdown(pvr),
        }
    store = plan.checkpoint
    return Manifest(
        manifest_format=MANIFEST_FORMAT,
        campaign_id=registration.campaign_id,
        plan_hash=registration.plan_hash,
        ledger_url=LEDGER_URL,
        ledger_study=registration.campaign_id,
        ledger_file=LEDGER_FILE,
        question=plan.campaign.question,
        code_version=code_version(registration.code),
        environment=environment(records),
        checkpoint_store=CheckpointStoreRef(
            url=redact_url(store.store),
            endpoint_url=redact_url(store.endpoint_url) if store.endpoint_url else None,
        ),
        verify=VerifySettings(
            command="ablate verify DIR", device=REEVALUATION_DEVICE, tolerance=DEFAULT_TOLERANCE
        ),
        preflight=campaign.preflight(),
        gate=gate,
        looks=looks.looks,
        budget=BudgetSummary(markdown=budget_markdown(assessment), **assessment.summary()),
        **realized,
        runs=rows,
    )


def runs_csv(rows: list[ManifestRun], metric: str) -> str:
    """runs.csv's text: one flat row per manifest row, the plan's `metric` as its column."""
    import pandas as pd

    data = [_flat(r.model_dump(mode="json"), metric) for r in rows]
    return str(pd.DataFrame(data, columns=RUN_COLUMNS).to_csv(index=False))


def record_ledger(campaign: Campaign, records: dict[str, RunRecord]) -> None:
    """Every finished run (`records`, by run id) as a trial of the campaign's Optuna study
    (idempotent per run id)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the campaign prints its own progress
    study = open_ledger(campaign.out_dir, campaign.registration.campaign_id, plan=campaign.plan)
    finished = [(p, records[p.run_id]) for p in campaign.runs if p.run_id in records]
    with damage_named(campaign.out_dir / LEDGER_FILE):  # a page SQLite reads only now
        record_runs(study, finished)
