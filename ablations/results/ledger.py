"""The Optuna ledger: one study per campaign, one trial per finished run.

Storage: SQLite (`DIR/ledger.db`), not the journal file. Why:

- `optuna.load_study(storage=URL)` and `optuna-dashboard URL` accept a *string* and read it
  as an SQLAlchemy URL. A journal file needs `JournalStorage(JournalFileBackend(path))` built
  in Python, so its location would not open "as it is" from the manifest.
- One writer: the results step records every finished run in one batch (`record_runs`),
  once per `ablate run`, while that run holds the folder's one-writer lock (`.lock`). It is
  idempotent per run id, so a restarted campaign never duplicates a trial; the busy timeout
  below makes it wait for a reader (`ablate verify`) instead of failing.

The manifest holds `sqlite:///ledger.db`, relative to the output folder, so the folder can be
moved or copied. Open it from inside the folder:

    cd DIR && optuna-dashboard sqlite:///ledger.db
    cd DIR && python -c "import optuna; print(optuna.load_study(study_name='<campaign id>',
        storage='sqlite:///ledger.db').trials_dataframe())"

or, from anywhere, `open_ledger(DIR, campaign_id)` / `absolute_ledger_url(DIR)`.

Run status -> trial state: accepted -> COMPLETE (value: the final metric); stopped -> PRUNED
(value: the last evaluation, as Optuna's own pruned trials do); failed and rejected -> FAIL;
trimmed and pending runs never ran and get no trial.

For optuna-dashboard: a trial's params are only the parameters whose values differ among the
accepted (COMPLETE) runs recorded together, because the dashboard ranks the importance of
every param over complete trials, and a factor that was trimmed, stopped or never varied
there has nothing to rank; the full configuration is the `params` user attribute, and
`variant`, `seed` and `run_id` name the run. The objective stays unnamed ("Objective 0"; the
study's `metric` user attribute names it): a named one would rename the `value` column of
`trials_dataframe()` that RELOAD.md and users' scripts read.
"""

from __future__ import annotations

import datetime
import math
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
    distribution_to_json,
    json_to_distribution,
)
from optuna.trial import FrozenTrial, TrialState, create_trial

from ablations.errors import LedgerDamaged, LedgerError
from ablations.files.atomic import FILE_MODE, fsync_folder, refuse_link
from ablations.files.names import LEDGER
from ablations.plan.runs import variants
from ablations.plan.section import ParamValue
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunRecord, RunStatus

if TYPE_CHECKING:
    from ablations.plan.model import Plan

LEDGER_FILE = LEDGER
LEDGER_URL = f"sqlite:///{LEDGER_FILE}"
"""The manifest's `ledger_url`: relative to the output folder (open it from inside it)."""
BUSY_TIMEOUT_S = 120
"""How long a writer waits for SQLite's lock; a slot never fails because another is writing."""
SPACE_ATTR = "search_space"

STATES: dict[RunStatus, TrialState] = {
    "accepted": TrialState.COMPLETE,
    "stopped": TrialState.PRUNED,
    "failed": TrialState.FAIL,
    "rejected": TrialState.FAIL,
}
"""Trial state per run status; statuses absent here (trimmed) record no trial."""


def absolute_ledger_url(out_dir: Path) -> str:
    """`sqlite:////abs/DIR/ledger.db`: the ledger's URL from any working directory."""
    return f"sqlite:///{(Path(out_dir).resolve() / LEDGER_FILE).as_posix()}"


DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
"""SQLite's error names for a damaged file (`SQLITE_CORRUPT_INDEX`... too): not a lock, not a
full disk, which a rerun rides through."""


def damage(path: Path) -> str | None:
    """What is damaged in the SQLite file at `path`, in SQLite's words, or None when SQLite
    reads every page and every value back: `PRAGMA integrity_check`, then every row of every
    table read as text (a value's bytes overwritten may leave the pages well-formed).
    Opened read-only: nothing is written, a journal left beside it included."""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            db.text_factory = bytes  # SQLite's own report may quote the damaged bytes
            report = [row[0] for row in db.execute("PRAGMA integrity_check")]
            if report != [b"ok"]:
                first = next(line for line in report[0].splitlines() if not line.startswith(b"***"))
                return f"integrity check: {first.decode(errors='replace')}"
            db.text_factory = str
            tables = [
                row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                quoted = table.replace('"', '""')  # a name from the file itself
                for _ in db.execute(f'SELECT * FROM "{quoted}"'):
                    pass
    except sqlite3.DatabaseError as exc:
        return damage_words(exc) or f"{type(exc).__name__}: {exc}"
    except UnicodeDecodeError:
        return "a text value is not UTF-8"
    return None


def damage_words(exc: BaseException) -> str | None:
    """SQLite's words when `exc`, or an exception it was raised from (SQLAlchemy's and Optuna's
    wrap it), says the database file is damaged; None for any other failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlite3.DatabaseError):
            name = getattr(current, "sqlite_errorname", None) or ""
            if name.startswith(DAMAGED) or type(current) is sqlite3.DatabaseError:
                return str(current).splitlines()[0] if str(current) else name
        orig = getattr(current, "orig", None)  # SQLAlchemy's DBAPIError keeps the driver's
        current = (
            orig if isinstance(orig, BaseException) else current.__cause__ or current.__context__
        )
    return None


def damaged(path: Path, words: str) -> LedgerDamaged:
    """The one line a damaged ledger gets, naming the file and what to do."""
    return LedgerDamaged(
        f"the ledger {path} is damaged ({words}): SQLite cannot read it back. It holds "
        "nothing the run records do not: move it aside and rerun `ablate run` with the same "
        "plan and folder, which writes it again"
    )


@contextmanager
def damage_named(path: Path | None) -> Iterator[None]:
    """Inside it, an Optuna or SQLAlchemy failure that SQLite raised for a damaged file is
    `LedgerDamaged` naming `path`; any other failure passes as it is."""
    try:
        yield
    except LedgerError:
        raise
    except Exception as exc:
        words = damage_words(exc) if path is not None else None
        if words is None:
            raise
        raise damaged(path, words) from exc  # type: ignore[arg-type]  # path set when words


def _storage(url: str) -> optuna.storages.RDBStorage:
    kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        kwargs = {"connect_args": {"timeout": BUSY_TIMEOUT_S}}
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
    except Exception as exc:  # SQLAlchemy raises many kinds; name the URL either way
        raise LedgerError(f"cannot open the ledger at {url!r}: {exc}") from exc


def create_database_file(path: Path) -> None:
    """An empty SQLite file at `path` (and its folder) unless one is there: created with the
    output folder's file mode (`files/atomic.FILE_MODE` less the umask), as every other file of
    the folder, where SQLite would create it 0644 whatever the umask allows. Empty is whole:
    SQLite reads a file of no bytes as an empty database, and writes it in transactions of its
    own (journaled and synced), so the ledger needs no temporary and rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    refuse_link(path)  # SQLite would follow it, a dangling one included, and create its target
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE))
    except FileExistsError:
        return
    fsync_folder(path.parent)


def search_space(plan: Plan) -> dict[str, BaseDistribution]:
    """Every parameter's distribution over all variants, so every trial's params are compatible.

    Numbers get an int or float range spanning the plan's values; booleans, strings and mixed
    types a categorical of the values in plan order (Optuna refuses differing choices).
    """
    values: dict[str, list[ParamValue]] = {}
    for variant in variants(plan):
        for name, value in variant.params.items():
            seen = values.setdefault(name, [])
            if not any(type(v) is type(value) and v == value for v in seen):
                seen.append(value)
    return {name: _distribution(seen) for name, seen in values.items()}


def _distribution(values: list[ParamValue]) -> BaseDistribution:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        ints = [int(v) for v in values]
        return IntDistribution(min(ints), max(ints))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        floats = [float(v) for v in values]
        if all(math.isfinite(f) for f in floats):
            return FloatDistribution(min(floats), max(floats))
    return CategoricalDistribution(values)


def open_ledger(
    location: Path | str,
    study_name: str,
    *,
    plan: Plan | None = None,
    direction: Literal["maximize", "minimize"] | None = None,
) -> optuna.Study:
    """The campaign's study, created on first use.

    `location` is the output folder (the ledger is `DIR/ledger.db`) or a storage URL. Give
    `plan` when creating it: it sets the direction and records the search space, so string
    and boolean parameters get the same categorical choices in every trial.
    """
    url = absolute_ledger_url(Path(location)) if isinstance(location, Path) else location
    if direction is None:
        direction = plan.metric.direction if plan is not None else "maximize"
    prefix = "sqlite:///"
    path: Path | None = None
    if url.startswith(prefix) and url != f"{prefix}:memory:":
        path = Path(url[len(prefix) :])
        create_database_file(path)
        words = damage(path)
        if words is not None:  # Optuna's own error would be StorageInternalError, unnamed
            raise damaged(path, words)
    with damage_named(path):
        storage = _storage(url)
        study = optuna.create_study(
            storage=storage, study_name=study_name, direction=direction, load_if_exists=True
        )
        if plan is not None and SPACE_ATTR not in study.user_attrs:
            space = {k: distribution_to_json(d) for k, d in search_space(plan).items()}
            study.set_user_attr(SPACE_ATTR, space)
            study.set_user_attr("metric", plan.metric.name)
            study.set_user_attr("question", plan.campaign.question)
    return study


def _distributions(study: optuna.Study, params: dict[str, ParamValue]) -> dict[str, Any]:
    known = {
        k: json_to_distribution(v) for k, v in (study.user_attrs.get(SPACE_ATTR) or {}).items()
    }
    out: dict[str, BaseDistribution] = {}
    for name, value in params.items():
        dist = known.get(name)
        if dist is None or not _contains(dist, value):
            dist = _distribution([value])  # no plan given: a one-point space
        out[name] = dist
    return out


def _contains(dist: BaseDistribution, value: ParamValue) -> bool:
    if isinstance(dist, CategoricalDistribution):
        return any(type(c) is type(value) and c == value for c in dist.choices)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(dist, IntDistribution) and not isinstance(value, int):
        return False
    assert isinstance(dist, (IntDistribution, FloatDistribution))
    return dist.low <= value <= dist.high


def run_attrs(planned: PlannedRun, record: RunRecord) -> dict[str, Any]:
    """The trial's user attributes: who the run is and why it ended as it did."""
    return {
        "variant": planned.variant,
        "seed": planned.seed,
        "run_id": record.run_id,
        "factor": planned.factor,
        "level": planned.level,
        "params": dict(planned.params),
        "category": planned.category,
        "phase": planned.phase,
        "steps": planned.steps,
        "start_step": planned.start_step,
        "status": record.status,
        "steps_done": record.steps_done,
        "stop_rule": record.stop.rule if record.stop else None,
        "stop_reason": record.stop.message if record.stop else None,
        "stop_step": record.stop.step if record.stop else None,
        "error": f"{record.error.type}: {record.error.message}" if record.error else None,
        "metrics": {k: v for k, v in record.metrics.items() if math.isfinite(v)},
        "slot": record.slot,
        "device": record.device,
    }


def _metric_name(study: optuna.Study, record: RunRecord) -> str | None:
    name = study.user_attrs.get("metric")
    if isinstance(name, str):
        return name
    return next(iter(record.metrics), None)


def varied_params(runs: list[tuple[PlannedRun, RunRecord]]) -> set[str]:
    """The parameters whose values differ among the accepted runs: the ones worth ranking."""
    values: dict[str, set[str]] = {}
    for planned, record in runs:
        if STATES.get(record.status) == TrialState.COMPLETE:
            for name, value in planned.params.items():
                values.setdefault(name, set()).add(repr(value))
    return {name for name, seen in values.items() if len(seen) > 1}


def _trial(
    study: optuna.Study, planned: PlannedRun, record: RunRecord, varied: set[str] | None
) -> FrozenTrial:
    state = STATES[record.status]
    metric = _metric_name(study, record)
    intermediate: dict[int, float] = {}
    for evaluation in record.evaluations:
        seen = evaluation.get(metric) if metric else None
        if seen is not None and math.isfinite(seen) and "step" in evaluation:
            intermediate[int(evaluation["step"])] = float(seen)
    value: float | None = None
    if state == TrialState.COMPLETE:
        value = record.metrics.get(metric) if metric else None
        if value is None or not math.isfinite(value):
            raise LedgerError(
                f"run {record.run_id} is accepted but has no finite {metric!r} metric "
                f"(metrics: {record.metrics}); an accepted run needs its value"
            )
    elif state == TrialState.PRUNED and intermediate:
        value = intermediate[max(intermediate)]
    params = {k: v for k, v in planned.params.items() if varied is None or k in varied}
    trial = create_trial(
        state=state,
        value=value,
        params=params,
        distributions=_distributions(study, params),
        user_attrs=run_attrs(planned, record),
        intermediate_values=intermediate,
    )
    if record.started_at is not None:
        trial.datetime_start = datetime.datetime.fromtimestamp(record.started_at)
    if record.ended_at is not None:
        trial.datetime_complete = datetime.datetime.fromtimestamp(record.ended_at)
    return trial


def trials_of(study: optuna.Study, run_id: str) -> list[FrozenTrial]:
    """The trials recorded for one run id, oldest first."""
    return [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("run_id") == run_id]


def record_runs(study: optuna.Study, runs: list[tuple[PlannedRun, RunRecord]]) -> None:
    """Record finished runs as trials, idempotent per run id: one read of the study, one write.

    Each trial's params are the parameters that vary among the accepted runs given. A run
    already recorded with the same status and steps gets no new trial. A run retried to a
    different outcome (a failed run rerun to completion) gets a new trial with `attempt` =
    2, 3... and `supersedes` = the previous trial's number. Trimmed runs never ran: no trial."""
    varied = varied_params(runs)
    by_run: dict[str, list[FrozenTrial]] = {}
    for known in study.get_trials(deepcopy=False):
        by_run.setdefault(str(known.user_attrs.get("run_id")), []).append(known)
    new = []
    for planned, record in runs:
        _require_same_run(planned, record)
        if record.status in STATES:
            trial = _new_trial(study, planned, record, by_run.get(record.run_id, []), varied)
            new += [trial] if trial is not None else []
    study.add_trials(new)


def _require_same_run(planned: PlannedRun, record: RunRecord) -> None:
    if planned.run_id != record.run_id:
        raise LedgerError(
            f"planned run {planned.run_id} and record {record.run_id} are different runs"
        )


def _new_trial(
    study: optuna.Study,
    planned: PlannedRun,
    record: RunRecord,
    previous: list[FrozenTrial],
    varied: set[str] | None,
) -> FrozenTrial | None:
    """The trial to add for `record`, or None when its last trial already says the same."""
    if previous:
        last = previous[-1]
        same = (
            last.user_attrs.get("status") == record.status
            and last.user_attrs.get("steps_done") == record.steps_done
        )
        if same:
            return None
    trial = _trial(study, planned, record, varied)
    if previous:
        trial.set_user_attr("attempt", len(previous) + 1)
        trial.set_user_attr("supersedes", previous[-1].number)
    return trial
