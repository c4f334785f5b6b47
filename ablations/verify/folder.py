"""`ablate verify DIR`: the output folder checked in a fresh process, every artifact reloaded.

    verification = verify_folder(Path("DIR"))    # .problems: one FolderProblem(file, message) each

What holds when there is no problem:

- manifest.json is complete (campaign id, plan hash, code version, environment, ledger URL,
  gate, budget, runs, files) and plan.yaml is the registered plan (same hash);
- every registered run has a row; every finished run has its completion record
  (`records/<run_id>.json`, read first) and the record agrees with its row;
- every look of looks.json and the manifest is the look the campaign's own code judges again
  from the records (verdicts, intervals, alpha, looks: `ablations.verify.looks`);
- every file the manifest names is present, non-empty, of the recorded size and sha256, and
  parses or loads (CSV with pandas, weights with `torch.load(weights_only=True)`, ...); a
  pool run's exports are the files its host's signed result hashed (`export_sha256`);
- every derived file (runs.csv, REPORT.md, REPORT.html, the manifest's derived fields and
  `decision_reached`, preflight.json's verdict, gate.json's decision) is what the campaign's
  own code builds again from the records and the registered plan
  (`ablations.verify.derived`), so a derived file edited with the manifest rehashed fails;
- the ledger agrees with the manifest; each checkpoint URI names the run's own
  step folder and, in a `file://` or `s3://` store, verifies and loads weights-only;
- every accepted run's final model re-evaluates to its recorded metric within the tolerance;
- no file holds a credential, and the manifest no absolute path into the folder or a temp dir;
- the folder holds nothing unexpected at its top, no symbolic link, no leftover temporary.

Nothing here imports Prefect; torch, pandas and optuna are imported when first needed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ablations.campaign.folder import CampaignFolder, Registration
from ablations.campaign.manifest import Manifest, ManifestRun, read_manifest
from ablations.errors import AblationError
from ablations.files.names import (
    CROSS_DEVICE_TOLERANCE,
    DEFAULT_TOLERANCE,
    LEDGER,
    MANIFEST,
    PLAN,
    RECORDS,
    REEVALUATION_DEVICE,
    REGISTRATION,
    RELOAD,
    REPORT,
    RUN_FOLDERS,
    RUNS_CSV,
)
from ablations.verify.files import (
    FolderProblem,
    check_entry,
    folder_files,
    scan_credentials,
    scan_leftovers,
    scan_paths,
)
from ablations.verify.layout import scan_layout

REQUIRED = (
    *("campaign_id", "plan_hash", "code_version", "environment", "ledger_url", "gate"),
    *("budget", "runs", "files"),
)
REQUIRED_FILES = (PLAN, RUNS_CSV, REPORT, RELOAD)
RECORD_FIELDS = (
    *("status", "stop", "error", "steps_done", "metrics", "device", "started_at"),
    "export_sha256",
)


@dataclass
class Verification:
    """What `verify_folder` found."""

    out_dir: Path
    problems: list[FolderProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What was not checked, and why (never a problem)."""
    runs: int = 0
    files: int = 0
    models: int = 0
    checkpoints: int = 0


def verify_folder(
    out_dir: Path,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    cross_device_tolerance: float = CROSS_DEVICE_TOLERANCE,
    check_store: bool = True,
) -> Verification:
    """Check everything the module docstring lists; problems are gathered, never raised."""
    out_dir = Path(out_dir).resolve()
    manifest = read_manifest(out_dir)
    found = Verification(out_dir)
    add = found.problems.extend
    for key in REQUIRED:
        if key not in manifest.model_fields_set:
            add([FolderProblem(MANIFEST, f"has no {key!r}: the results step did not finish")])
    plan, plan_hash = _registered_plan(out_dir, manifest, found)
    rows = _rows(manifest, found)
    found.runs = len(rows)
    # An edited plan.yaml registers other runs (a run's id hashes the plan): the runs, their
    # checkpoints and models are checked against the registered plan only (the edit itself is
    # a problem already, naming plan.yaml).
    registered = plan if plan is not None and plan_hash == manifest.plan_hash else None
    if registered is not None:
        _check_registered(registered, plan_hash, manifest, rows, found)
        from ablations.verify.looks import check_looks

        add(check_looks(out_dir, registered, plan_hash, manifest))
    _check_records(out_dir, rows, found)
    from ablations.byo import KEPT_MODEL, adapter_field, external_entry

    # Code that runs its own loop keeps its model to itself: no final weights to re-evaluate.
    weights = plan is None or not external_entry(plan.workload.entry)
    if plan is not None and not weights:  # say why the summary counts no model
        adapter = adapter_field(plan.workload)
        why = KEPT_MODEL[adapter] if adapter else "the workload's own loop keeps its model"
        found.notes.append(f"no final model is re-evaluated: {why}")
    models = _check_artifacts(out_dir, manifest, rows, found, weights=weights)
    if registered is not None:
        from ablations.verify.derived import check_derived

        derived = check_derived(out_dir, registered, plan_hash, manifest)
        add(derived)
        release = _release(manifest) if derived else ""
        if release:
            found.notes.append(f"the derived files were built again{release}")
    else:  # no plan to derive from: runs.csv against the manifest alone
        _check_runs_csv(out_dir, rows, found)
    from ablations.verify.reload import check_checkpoint, check_ledger, reevaluate

    add(check_ledger(out_dir, manifest, manifest.ledger_file or LEDGER))
    if registered is not None:
        stores: dict[str, object] | None = {} if check_store else None
        for row in rows.values():
            problems, note = check_checkpoint(
                row,
                registered,
                str(manifest.campaign_id),
                plan_hash,
                stores=stores,
                out_dir=out_dir,
            )
            add(problems)
            record = row.record()
            found.checkpoints += bool(record is not None and record.checkpoint.uri)
            if note and note not in found.notes:
                found.notes.append(note)
        tolerances = {"cpu": tolerance, "other": max(tolerance, cross_device_tolerance)}
        add(reevaluate(out_dir, models, registered, tolerances))
        found.models = len(models)
    if not check_store:
        found.notes.append("checkpoint stores not opened (--skip-store)")
    add(scan_credentials(out_dir))
    add(scan_leftovers(out_dir))
    add(scan_layout(out_dir, plan.checkpoint.store if plan is not None else None))
    folders = [str(out_dir)]
    registration = _registration(out_dir)
    if registration is not None:
        folders.append(registration.out_dir)
    add(scan_paths(manifest.model_dump(mode="json"), folders))
    return found


def _registration(out_dir: Path) -> Registration | None:
    """registration.json, or None when it is missing or unreadable (the plan check says so)."""
    try:
        return CampaignFolder(out_dir).registration()
    except (OSError, ValueError):
        return None


def _registered_plan(out_dir: Path, manifest: Manifest, found: Verification) -> Any:
    """(plan, its hash) from plan.yaml, checked against the manifest and the registration."""
    from ablations.plan.io import plan_from_text
    from ablations.plan.model import plan_hash

    path = out_dir / PLAN
    if not path.is_file():
        found.problems.append(FolderProblem(PLAN, "missing: the registered plan is needed"))
        return None, str(manifest.plan_hash)
    try:
        plan = plan_from_text(path.read_text(encoding="utf-8"), PLAN)
    except (AblationError, OSError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0]
        found.problems.append(FolderProblem(PLAN, f"is not a valid plan: {first}"))
        return None, str(manifest.plan_hash)
    digest = plan_hash(plan)
    registration = _registration(out_dir)
    release: str | None = None  # asked of git once, and only for a mismatch
    for source, data in ((MANIFEST, manifest), (REGISTRATION, registration)):
        hashed, campaign_id = (data.plan_hash, data.campaign_id) if data else (None, None)
        if hashed != digest:
            release = _release(manifest) if release is None else release
            found.problems.append(
                FolderProblem(PLAN, f"hashes to {digest[:12]}, {source} says {hashed}{release}")
            )
        if campaign_id != plan.campaign.id:
            found.problems.append(
                FolderProblem(
                    source,
                    f"campaign id {campaign_id!r}, plan.yaml says {plan.campaign.id!r}",
                )
            )
    return plan, digest


def _release(manifest: Manifest) -> str:
    """When another release wrote the folder, a hint: a release whose plan model has other
    fields or defaults hashes the same plan.yaml otherwise (verify with the one that wrote it)."""
    from ablations.results.write import code_version

    written, here = manifest.code_version, code_version()
    if written is None or (written.package, written.git_commit) == (here.package, here.git_commit):
        return ""
    commit = f" at commit {written.git_commit[:12]}" if written.git_commit else ""
    return (
        f" (written by ablate {written.package}{commit}, another release than this one: "
        "if plan.yaml is unchanged, verify the folder with the release that wrote it)"
    )


def _rows(manifest: Manifest, found: Verification) -> dict[str, ManifestRun]:
    rows: dict[str, ManifestRun] = {}
    for row in manifest.runs:
        run_id = row.planned.run_id
        if run_id in rows:
            found.problems.append(FolderProblem(MANIFEST, f"run {run_id} has two rows"))
        else:
            rows[run_id] = row
    return rows


def _check_registered(
    plan: Any,
    digest: str,
    manifest: Manifest,
    rows: dict[str, ManifestRun],
    found: Verification,
) -> None:
    """Every registered run has its row with the planned fields; only expected runs pend."""
    from ablations.plan.runs import planned_runs

    planned = {r.run_id: r for r in planned_runs(plan, digest)}
    problems = found.problems
    for run_id, run in planned.items():
        row = rows.get(run_id)
        if row is None:
            problems.append(FolderProblem(MANIFEST, f"registered run {run_id} has no row"))
            continue
        for key in ("variant", "seed", "category", "phase", "steps", "start_step", "params"):
            expected, got = getattr(run, key), getattr(row, key)
            if got != expected:
                problems.append(
                    FolderProblem(
                        MANIFEST,
                        f"run {run_id}: {key} is {got!r}, the plan registers {expected!r}",
                    )
                )
    for run_id in rows.keys() - planned.keys():
        problems.append(FolderProblem(MANIFEST, f"run {run_id} is not registered by plan.yaml"))
    _check_unneeded(manifest, planned, rows, found)
    ended = manifest.gate is not None and manifest.gate.decision in ("reframe", "fix")
    passed = manifest.preflight is not None and manifest.preflight.passed
    for run_id, row in rows.items():
        if row.status != "pending":
            continue
        phase = row.planned.phase
        expected = (phase == "main" and ended) or (phase == "pilot" and not passed)
        if not expected:
            problems.append(
                FolderProblem(MANIFEST, f"run {run_id} is pending: the campaign did not finish")
            )


def _check_unneeded(
    manifest: Manifest, planned: dict[str, Any], rows: dict[str, ManifestRun], found: Verification
) -> None:
    """`unneeded` rows are exactly the main runs the recorded looks never needed."""
    from ablations.analysis.looks import Looks, unneeded_runs

    finished = {r for r, row in rows.items() if row.status not in ("pending", "unneeded")}
    main = [run for run in planned.values() if run.phase == "main"]
    expected = unneeded_runs(Looks(looks=manifest.looks), main, finished)
    marked = {r for r, row in rows.items() if row.status == "unneeded"}
    for run_id in sorted(marked - expected):
        found.problems.append(
            FolderProblem(
                MANIFEST, f"run {run_id} is unneeded, but the looks in it needed that run"
            )
        )
    for run_id in sorted(expected - marked):
        found.problems.append(
            FolderProblem(
                MANIFEST, f"run {run_id} is {_status(rows, run_id)}; the looks never needed it"
            )
        )


def _status(rows: dict[str, ManifestRun], run_id: str) -> str:
    row = rows.get(run_id)
    return row.status if row is not None else "without a row"


def _check_records(out_dir: Path, rows: dict[str, ManifestRun], found: Verification) -> None:
    """Each finished run's completion record exists and agrees with its manifest row."""
    from pydantic import ValidationError

    from ablations.run.causes import failed_for_the_machine, infrastructure_phrase
    from ablations.run.records import RunRecord
    from ablations.security.credentials import redact_url

    for run_id, row in rows.items():
        name = CampaignFolder.record_name(run_id)
        path = out_dir / name
        if row.status in ("pending", "unneeded"):
            if path.exists():
                found.problems.append(
                    FolderProblem(name, f"exists, but manifest.json says {row.status}")
                )
            continue
        if not path.is_file():
            found.problems.append(FolderProblem(name, f"missing: manifest.json says {row.status}"))
            continue
        try:
            record = RunRecord.model_validate_json(path.read_bytes())
        except (ValidationError, OSError) as exc:
            first = str(exc).splitlines()[0]
            found.problems.append(FolderProblem(name, f"is not a valid completion record: {first}"))
            continue
        error = record.error
        if error is not None and failed_for_the_machine(error.type, error.message, error.cause):
            what = infrastructure_phrase(error.type, error.message)
            found.problems.append(
                FolderProblem(
                    name,
                    f"failed for the infrastructure's cause ({what}): the campaign was decided "
                    "on a run that never finished; rerun `ablate run` to retrain it",
                )
            )
        mine, theirs = record.model_dump(mode="json"), row.model_dump(mode="json")
        for key in RECORD_FIELDS:
            if mine.get(key) != theirs.get(key):
                found.problems.append(
                    FolderProblem(
                        name, f"{key} is {mine.get(key)!r}, manifest.json says {theirs.get(key)!r}"
                    )
                )
        uri = record.checkpoint.uri
        row_record = row.record()
        assert row_record is not None  # a finished run's row
        if (redact_url(uri) if uri else None) != row_record.checkpoint.uri:
            found.problems.append(
                FolderProblem(name, f"checkpoint URI {uri} differs from manifest.json's")
            )
        listed = row.run_file_paths
        if isinstance(row.artifacts, list) and listed != record.artifacts:
            found.problems.append(
                FolderProblem(
                    name, f"artifacts {record.artifacts} differ from manifest.json's {listed}"
                )
            )
    folder = out_dir / RECORDS
    known = {f"{run_id}.json" for run_id in rows}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name not in known:
            found.problems.append(
                FolderProblem(f"{RECORDS}/{path.name}", "is the record of no run in manifest.json")
            )


def _check_artifacts(
    out_dir: Path,
    manifest: Manifest,
    rows: dict[str, ManifestRun],
    found: Verification,
    *,
    weights: bool = True,
) -> list[tuple[ManifestRun, str]]:
    """Every listed file checked; returns the accepted runs' intact models to re-evaluate."""
    problems, models = found.problems, []
    named = {CampaignFolder.record_name(run_id) for run_id in rows}
    for run_id, row in rows.items():
        if row.status in ("pending", "unneeded"):
            continue
        if "artifacts" not in row.model_fields_set or not isinstance(row.artifacts, list):
            problems.append(
                FolderProblem(MANIFEST, f"run {run_id} has no artifacts list (format 2)")
            )
            continue
        model = None
        record = row.record()
        signed = record.export_sha256 if record is not None else {}
        for entry in row.run_file_entries:
            named.add(entry.path)
            trouble = check_entry(out_dir, entry, f"run {run_id}")
            if entry.kind != "record" and signed and signed.get(entry.path) != entry.sha256:
                # a pool host's file: the folder's copy must be the one its signed result hashed
                given = str(signed.get(entry.path))[:12]
                trouble.append(
                    FolderProblem(
                        entry.path,
                        f"sha256 {str(entry.sha256)[:12]}... is not the {given}... the run's "
                        "signed result gives it",
                    )
                )
            problems.extend(trouble)
            found.files += 1
            if entry.kind == "model" and not trouble:
                model = entry.path
        has_model = any(e.kind == "model" for e in row.run_file_entries)
        if row.status == "accepted":
            if not has_model and weights:
                problems.append(
                    FolderProblem(MANIFEST, f"accepted run {run_id} has no final model")
                )
            elif model is not None:
                models.append((row, model))
    if manifest.files is not None:
        listed = {e.path for e in manifest.files}
        for name in REQUIRED_FILES:
            if name not in listed:
                problems.append(FolderProblem(MANIFEST, f"files does not list {name}"))
        for entry in manifest.files:
            named.add(entry.path)
            problems.extend(check_entry(out_dir, entry, "the campaign"))
            found.files += 1
    for path in folder_files(out_dir):
        relative = path.relative_to(out_dir).as_posix()
        ours = relative.split("/")[0] in RUN_FOLDERS
        if ours and relative not in named and not path.name.startswith("."):
            problems.append(FolderProblem(relative, "is not in manifest.json"))
    return models


def _check_runs_csv(out_dir: Path, rows: dict[str, ManifestRun], found: Verification) -> None:
    path = out_dir / RUNS_CSV
    if not path.is_file() or path.stat().st_size == 0:
        return  # reported by the file checks
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype={"run_id": str, "status": str})
    except Exception:
        return  # reported by the file checks
    if "run_id" not in frame or "status" not in frame:
        return
    csv_status = dict(zip(frame["run_id"], frame["status"], strict=True))
    for run_id in rows.keys() - csv_status.keys():
        found.problems.append(FolderProblem(RUNS_CSV, f"has no row for run {run_id}"))
    for run_id in csv_status.keys() - rows.keys():
        found.problems.append(
            FolderProblem(RUNS_CSV, f"has run {run_id}, which manifest.json lacks")
        )
    for run_id in rows.keys() & csv_status.keys():
        if csv_status[run_id] != rows[run_id].status:
            found.problems.append(
                FolderProblem(
                    RUNS_CSV,
                    f"run {run_id} is {csv_status[run_id]}, manifest.json says "
                    f"{rows[run_id].status}",
                )
            )


def verify_command(args: argparse.Namespace) -> bool:
    """CLI handler: problems one per line on stdout (False), or a summary (True)."""
    found = verify_folder(
        args.out_dir,
        tolerance=args.tolerance,
        cross_device_tolerance=max(args.tolerance, CROSS_DEVICE_TOLERANCE),
        check_store=not args.skip_store,
    )
    from ablations.security.credentials import redact

    for note in found.notes:
        print(redact(f"note: {note}"), file=sys.stderr)
    if found.problems:
        for problem in found.problems:  # a problem may quote what it found (a URI, a value)
            print(redact(str(problem)))
        print(
            f"ablate verify: {len(found.problems)} problem(s) in {found.out_dir}", file=sys.stderr
        )
        return False
    print(
        f"{found.out_dir}: verified {found.runs} runs, {found.files} files, "
        f"{found.checkpoints} checkpoint URIs; {found.models} final models re-evaluated on "
        f"the {REEVALUATION_DEVICE} within {args.tolerance:g}"
    )
    return True
