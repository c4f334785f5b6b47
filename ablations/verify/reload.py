"""The reload checks of `ablate verify`: the ledger, the checkpoints, the final models.

- ledger.db opens with optuna (a copy is opened: SQLite may rewrite a file it opens) and holds
  one trial per run that ran, in the state and with the value the manifest says;
- each checkpoint URI names this run's step folder (a pilot's: its main run's, not reopened:
  that run may have pruned it), and in a `file://` or `s3://` store its commit record
  verifies (identity, sizes, sha256) and both objects load weights-only;
- each accepted run's final model, loaded weights-only into the workload rebuilt from the
  registered plan with the run's parameters and seed, re-evaluates on the CPU to its recorded
  metric within the tolerance.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

from ablations.campaign.manifest import Manifest, ManifestRun
from ablations.files.names import LEDGER, MANIFEST, PLAN
from ablations.plan.model import Plan
from ablations.process.scratch import scratch_folder
from ablations.security.credentials import USERINFO
from ablations.verify.files import FolderProblem, load_weights

STEP_FOLDER = re.compile(
    r"^(?P<prefix>.+?)/(?P<campaign>[^/]+)/(?P<run>[^/]+)(?:/attempts/(?P<attempt>[^/]+))?"
    r"/step-(?P<step>\d{8})$"
)


def check_ledger(out_dir: Path, manifest: Manifest, ledger_file: str) -> list[FolderProblem]:
    """One trial per run that ran, with the manifest's state and (accepted) value."""
    path = out_dir / ledger_file
    if not path.is_file():
        return [FolderProblem(ledger_file, "missing")]
    if path.stat().st_size == 0:
        return [FolderProblem(ledger_file, "is empty")]
    import optuna

    from ablations.results.ledger import STATES, damage, damage_words

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with scratch_folder("verify-") as scratch:
        copy = Path(scratch) / LEDGER
        shutil.copyfile(path, copy)
        words = damage(copy)
        if words is not None:
            return [_damaged(ledger_file, words)]
        try:
            study = optuna.load_study(
                study_name=str(manifest.campaign_id), storage=f"sqlite:///{copy}"
            )
            trials = study.get_trials(deepcopy=False)
            metric = study.user_attrs.get("metric")
        except Exception as exc:  # SQLAlchemy's message runs on with the SQL: one line
            words = damage_words(exc)
            if words is not None:
                return [_damaged(ledger_file, words)]
            first = str(exc).splitlines()[0] if str(exc) else ""
            return [
                FolderProblem(
                    ledger_file, f"does not open with optuna: {type(exc).__name__}: {first}"
                )
            ]
    latest = {t.user_attrs.get("run_id"): t for t in trials}  # oldest first: retries win
    problems = []
    ran = {r.planned.run_id: r for r in manifest.runs if r.status in STATES}
    for run_id, row in ran.items():
        trial = latest.get(run_id)
        if trial is None:
            problems.append(
                FolderProblem(ledger_file, f"has no trial for run {run_id} ({row.status})")
            )
            continue
        expected = STATES[row.status]  # type: ignore[index]  # in STATES (so not pending)
        if trial.state != expected:
            problems.append(
                FolderProblem(
                    ledger_file,
                    f"trial {trial.number} (run {run_id}) is {trial.state.name}, the run is "
                    f"{row.status} (expected {expected.name})",
                )
            )
        record = row.record()  # in STATES: finished, so it has one
        metrics = record.metrics if record is not None else {}
        recorded = metrics.get(metric) if isinstance(metric, str) else None
        if row.status == "accepted" and trial.value != recorded:
            problems.append(
                FolderProblem(
                    ledger_file,
                    f"trial {trial.number} (run {run_id}) has value {trial.value!r}, "
                    f"the manifest's {metric} is {recorded!r}",
                )
            )
    for stray in sorted(set(latest) - set(ran), key=str):
        problems.append(
            FolderProblem(ledger_file, f"has a trial for run {stray}, which did not run")
        )
    return problems


def _damaged(ledger_file: str, words: str) -> FolderProblem:
    return FolderProblem(
        ledger_file,
        f"is damaged ({words}): SQLite cannot read it back; move it aside and rerun "
        "`ablate run` with the same plan and folder, which writes it again from the records",
    )


def check_checkpoint(
    row: ManifestRun,
    plan: Plan,
    campaign_id: str,
    plan_hash: str,
    *,
    stores: dict[str, Any] | None,
    out_dir: Path | None = None,
) -> tuple[list[FolderProblem], str | None]:
    """The run's checkpoint URI names its own step folder; in a reachable store, it loads.

    `stores` caches the opened store per prefix (None: never open one); a store that cannot
    be listed is reported once, not once per run. Returns (problems, note); the note says
    why a store was not opened (memory://). A relative `file://` URI is inside `out_dir`."""
    run, record = row.planned, row.record()
    uri = record.checkpoint.uri if record is not None else None
    run_id = run.run_id
    owner = run.continues or run_id  # a pilot saves in its main run's folder
    if uri is None:
        return [], None
    if USERINFO.search(uri.encode()):
        return [
            FolderProblem(MANIFEST, f"checkpoint URI of run {run_id} carries credentials")
        ], None
    match = STEP_FOLDER.match(uri)
    if match is None or (match["campaign"], match["run"]) != (campaign_id, owner):
        return [
            FolderProblem(
                MANIFEST,
                f"checkpoint URI of run {run_id} points elsewhere: {uri} is not "
                f"<store>/{campaign_id}/{owner}/step-NNNNNNNN",
            )
        ], None
    scheme = uri.partition("://")[0]
    planned = plan.checkpoint.store.rstrip("/")
    if scheme != planned.partition("://")[0] or (scheme != "file" and match["prefix"] != planned):
        return [
            FolderProblem(
                MANIFEST,
                f"checkpoint URI of run {run_id} is outside the plan's store {planned}: {uri}",
            )
        ], None
    if scheme == "memory":
        return [], "memory:// checkpoints live only in the campaign's process: not reopened"
    if stores is None:
        return [], None
    if owner != run_id:  # the main run resumed from it and may have pruned it since (keep_last)
        return [], None
    from ablations.byo.session import FOLDER, check_folder
    from ablations.checkpoint import commit
    from ablations.checkpoint.state import MODEL, STATE, loads
    from ablations.errors import StoreError

    prefix = match["prefix"]
    if prefix not in stores:
        stores[prefix] = _open(plan, prefix, campaign_id, out_dir)
        if isinstance(stores[prefix], FolderProblem):
            return [stores[prefix]], None
    store = stores[prefix]
    if isinstance(store, FolderProblem):
        return [], None  # reported once, with the first run of this store
    identity = commit.Identity(campaign_id, run_id, plan_hash, match["attempt"])
    try:
        payload = commit.read(store, identity, int(match["step"]))
        if FOLDER in payload:  # a framework's own folder (ablations.byo): it must unpack
            check_folder(payload)
        else:
            loads(payload[MODEL], MODEL)
            loads(payload[STATE], STATE)
    except (StoreError, KeyError) as exc:
        return [FolderProblem(uri, f"{type(exc).__name__}: {exc}")], None
    return [], None


def _open(plan: Plan, prefix: str, campaign_id: str, out_dir: Path | None) -> Any:
    """The store at `prefix`, listed once (read-only) to know it answers; else a FolderProblem."""
    from ablations.checkpoint import open_store
    from ablations.errors import StoreError

    section = plan.checkpoint.model_copy(update={"store": prefix})
    if out_dir is not None:  # the folder's own store, wherever the folder is now
        section = section.in_folder(str(out_dir))
        scheme, _, path = section.store.partition("://")
        if scheme == "file" and not os.path.isdir(path):
            return FolderProblem(
                prefix, f"checkpoint store {path} does not exist (--skip-store skips it)"
            )
    try:
        store = open_store(section, check=False, sdk_retries=1)
        store.keys(campaign_id)
    except StoreError as exc:
        return FolderProblem(
            prefix, f"checkpoint store cannot be listed: {exc} (--skip-store skips it)"
        )
    return store


def reevaluate(
    out_dir: Path, rows: list[tuple[ManifestRun, str]], plan: Plan, tolerances: dict[str, float]
) -> list[FolderProblem]:
    """Each (row, model path): rebuild, load the weights, evaluate on the CPU, compare.

    `tolerances` maps "cpu" (the run trained on the CPU) and "other" (it trained elsewhere,
    a GPU: the same weights give float-noise-different logits on the CPU) to the allowed
    absolute difference of the plan's metric."""
    if not rows:
        return []
    import torch

    from ablations.run.workload import load_workload
    from ablations.training.driver import seed_everything

    try:
        factory = load_workload(plan.workload.entry)
    except Exception as exc:
        return [FolderProblem(PLAN, f"cannot re-evaluate any model: {exc}")]
    metric, problems = plan.metric.name, []
    for row, model in rows:
        planned, record = row.planned, row.record()
        assert record is not None  # an accepted run's row
        try:
            weights = load_weights(out_dir / model)
            seed_everything(planned.seed)
            workload = factory.build(
                planned.params, seed=planned.seed, device=torch.device("cpu"), steps=planned.steps
            )
            workload.model.load_state_dict(weights)
            got = float(workload.evaluate().metrics[metric])
        except Exception as exc:  # a model that cannot be rebuilt or evaluated is the finding
            problems.append(
                FolderProblem(model, f"cannot be re-evaluated: {type(exc).__name__}: {exc}")
            )
            continue
        recorded = record.metrics.get(metric)
        trained_on = "cpu" if record.device.startswith("cpu") else "other"
        tolerance = tolerances[trained_on]
        if not isinstance(recorded, (int, float)) or not math.isfinite(recorded):
            problems.append(
                FolderProblem(model, f"run {planned.run_id} records no finite {metric}")
            )
        elif not abs(got - recorded) <= tolerance:
            problems.append(
                FolderProblem(
                    model,
                    f"re-evaluates to {metric} {got!r}, recorded {recorded!r} "
                    f"(|difference| {abs(got - recorded):.3g} > tolerance {tolerance:g})",
                )
            )
    return problems
