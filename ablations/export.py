"""The output folder's index files: manifest.json and runs.csv, from the completion records.

Write order (so a reader never trusts a half-written folder): the runs' own files and
completion records exist first; then the ledger, runs.csv, the report and RELOAD.md; the
manifest, which hashes all of them, is written last and atomically. The report is rebuilt
from the manifest, so a first manifest without the `files` list is written before it; a
manifest without `files` is an export that did not finish (`ablate verify` says so).

What is hashed: every file that is final once the manifest is written (per run: its record,
metrics, predictions and final model; per campaign: plan.yaml, the state files, runs.csv,
REPORT.md, its plots, RELOAD.md). Not hashed: the ledger (`ledger.db`), since SQLite may
rewrite pages whenever it is opened; `ablate verify` checks it by content instead.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from ablations import __version__
from ablations.budget import (
    Projection,
    assess_plan,
    budget_markdown,
    planned_vs_realized,
    planned_vs_realized_markdown,
)
from ablations.campaign_phases import (
    GATE,
    PREFLIGHT,
    PROJECTION,
    REFRAME_DRAFT,
    registered_runs,
    registration_of,
)
from ablations.campaign_state import RECORDS, atomic_write_text, load_json, load_records
from ablations.credentials import redact_url
from ablations.ledger import LEDGER_FILE, LEDGER_URL, open_ledger, record_runs
from ablations.records import Rejection, RunRecord
from ablations.reload_doc import RELOAD_FILE, reload_markdown
from ablations.report.build import REPORT_FILE, build_report
from ablations.report.decision import decision_reached
from ablations.report.from_folder import report_inputs
from ablations.report.plots import EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG
from ablations.units import utc
from ablations.verify import DEFAULT_TOLERANCE, REEVALUATION_DEVICE

MANIFEST_FORMAT = 2
"""2: per-run `artifacts` are lists of {kind, path, sha256, bytes}; campaign `files` likewise."""
STATE_FILES = (
    ("plan", "plan.yaml"),
    ("state", "registration.json"),
    ("state", "projection.json"),
    ("state", PREFLIGHT),
    ("state", GATE),
    ("state", REFRAME_DRAFT),
)
"""Campaign files that are final before the export starts (absent ones are skipped)."""

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


def code_version() -> dict[str, str | None]:
    """The package version and, when run from a git checkout, its commit."""
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
    return {"package": __version__, "git_commit": commit}


def environment(records: list[RunRecord]) -> dict[str, Any]:
    """Python and Prefect of the campaign process; torch, CUDA and the devices as the runs'
    own processes saw them (the campaign process never imports torch)."""
    seen = [r.environment for r in records if r.environment is not None]
    torch_versions = sorted({e.torch for e in seen})
    cuda_versions = sorted({e.cuda for e in seen if e.cuda})
    # The workloads' data digests (charlm's corpus), when they report one: another Python's
    # standard library is another corpus.
    data = sorted({e.data_sha256 for e in seen if e.data_sha256})
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": ", ".join(torch_versions) or _installed("torch"),
        "prefect": _installed("prefect"),
        "cuda": ", ".join(cuda_versions) or None,
        "devices": sorted({e.device_name for e in seen}) or ["cpu"],
        **({"data_sha256": data} if data else {}),
    }


def _installed(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def file_entry(out_dir: Path, kind: str, relative: str) -> dict[str, Any]:
    """{kind, path, sha256, bytes} of one file in the folder (sha256 None: it is missing)."""
    path = out_dir / relative
    digest, size = None, None
    if path.is_file():
        sha = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                sha.update(chunk)
        digest, size = sha.hexdigest(), path.stat().st_size
    return {"kind": kind, "path": relative, "sha256": digest, "bytes": size}


def run_rows(out_dir: Path) -> list[dict[str, Any]]:
    """One merged row per registered run: what was planned plus what happened.

    A finished run's `artifacts` are its completion record and the files the record names,
    each with its sha256 and size; its checkpoint URI is stored without any credentials."""
    records = load_records(out_dir)
    rows = []
    for planned in registered_runs(out_dir):
        record = records.get(planned.run_id)
        row: dict[str, Any] = planned.model_dump(mode="json")
        if record is None:
            row.update(status="pending")
        else:
            row.update(
                record.model_dump(mode="json", exclude={"variant", "seed", "category", "phase"})
            )
            if row["checkpoint"]["uri"] is not None:
                row["checkpoint"]["uri"] = redact_url(row["checkpoint"]["uri"])
            named = [("record", f"{RECORDS}/{record.run_id}.json"), *record.artifacts.items()]
            row["artifacts"] = [file_entry(out_dir, kind, path) for kind, path in named]
        rows.append(row)
    return rows


def campaign_files(out_dir: Path) -> list[dict[str, Any]]:
    """The hashed campaign-level files that exist (see the module docstring)."""
    named = [
        *STATE_FILES,
        ("runs", "runs.csv"),
        ("report", REPORT_FILE),
        *(("plot", name) for name in (EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG)),
        ("reload", RELOAD_FILE),
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


def write_outputs(out_dir: Path, extra: dict[str, Any] | None = None) -> Path:
    """Write manifest.json and runs.csv; return the manifest's path."""
    import pandas as pd

    from ablations.campaign_state import registered_plan

    plan = registered_plan(out_dir)
    registration = registration_of(out_dir)
    rows = run_rows(out_dir)
    record_ledger(out_dir)
    records = list(load_records(out_dir).values())
    gate = load_json(out_dir, GATE)
    assessment = assess_plan(plan, records=records)
    budget = {"markdown": budget_markdown(assessment), **assessment.summary()}
    projection = load_json(out_dir, PROJECTION)
    realized: dict[str, Any] = {}
    if projection is not None:
        pvr = planned_vs_realized(
            Projection.model_validate(projection),
            records,
            decisions=[f"gate: {gate['decision']}: {gate['reason']}"] if gate else [],
            trimmed=gate["drop"] if gate else [],
        )
        realized = {
            "planned_vs_realized": pvr.model_dump(mode="json"),
            "planned_vs_realized_markdown": planned_vs_realized_markdown(pvr),
        }
    store = plan.checkpoint
    manifest = {
        "manifest_format": MANIFEST_FORMAT,
        "campaign_id": registration.campaign_id,
        "plan_hash": registration.plan_hash,
        "ledger_url": LEDGER_URL,
        "ledger_study": registration.campaign_id,
        "ledger_file": LEDGER_FILE,
        "question": plan.campaign.question,
        "code_version": code_version(),
        "environment": environment(records),
        "checkpoint_store": {
            "url": redact_url(store.store),
            "endpoint_url": redact_url(store.endpoint_url) if store.endpoint_url else None,
        },
        "verify": {
            "command": "ablate verify DIR",
            "device": REEVALUATION_DEVICE,
            "tolerance": DEFAULT_TOLERANCE,
        },
        "preflight": load_json(out_dir, PREFLIGHT),
        "gate": gate,
        "budget": budget,
        **realized,
        **(extra or {}),
        "runs": rows,
    }
    frame = pd.DataFrame([_flat(r, plan.metric.name) for r in rows], columns=RUN_COLUMNS)
    atomic_write_text(out_dir / "runs.csv", frame.to_csv(index=False))
    path = out_dir / "manifest.json"
    # First without `files`: the report is rebuilt from the manifest (it ignores `files`).
    atomic_write_text(path, json.dumps(manifest, indent=2, default=str))
    inputs = report_inputs(out_dir)
    build_report(out_dir, inputs)
    manifest["decision_reached"] = decision_reached(inputs)  # what `ablate run` ends with
    atomic_write_text(out_dir / RELOAD_FILE, reload_markdown(manifest, plan))
    manifest["files"] = campaign_files(out_dir)
    atomic_write_text(path, json.dumps(manifest, indent=2, default=str))
    return path


def record_ledger(out_dir: Path) -> None:
    """Every finished run as a trial of the campaign's Optuna study (idempotent per run id)."""
    from ablations.campaign_state import registered_plan

    plan = registered_plan(out_dir)
    registration = registration_of(out_dir)
    records = load_records(out_dir)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the campaign prints its own progress
    study = open_ledger(out_dir, registration.campaign_id, plan=plan)
    finished = [(p, records[p.run_id]) for p in registered_runs(out_dir) if p.run_id in records]
    record_runs(study, finished)
