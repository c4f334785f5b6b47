"""The Optuna ledger: trials per run, states, attributes, idempotence."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from ablations.plan.variants import PlannedRun
from ablations.results.ledger import (
    LEDGER_URL,
    STATES,
    absolute_ledger_url,
    open_ledger,
    record_runs,
    search_space,
    trials_of,
)
from ablations.run.records import RunRecord
from tests.ablations.analysis.synthetic import STOP_MESSAGE, Synthetic, write_synthetic
from tests.file_modes import UMASKS, modes, umask

optuna.logging.set_verbosity(optuna.logging.WARNING)


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    """Work from `folder`, as a user who opens the manifest's relative URL does."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def assert_ledger_matches_manifest(out_dir: Path) -> optuna.Study:
    """Open the manifest's ledger URL as it is and check it against the manifest's runs.

    One trial per run that ran (accepted, stopped, failed, rejected; the latest attempt
    counts), its state, its attributes and its intermediate values. Reusable on the folder a
    real campaign writes.
    """
    manifest = json.loads((out_dir / "manifest.json").read_text())
    url, name = manifest["ledger_url"], manifest["campaign_id"]
    assert url == LEDGER_URL
    with inside(out_dir):
        study = optuna.load_study(study_name=name, storage=url)
        trials = study.get_trials()
    latest = {t.user_attrs["run_id"]: t for t in trials}  # oldest first: later attempts win
    ran = [r for r in manifest["runs"] if r["status"] in STATES]
    assert sorted(latest) == sorted(r["run_id"] for r in ran)
    assert len(trials) == len(ran) + sum(t.user_attrs.get("attempt", 1) > 1 for t in trials)
    for row in ran:
        trial = latest[row["run_id"]]
        assert trial.state == STATES[row["status"]], row["run_id"]
        for key in ("variant", "seed", "category", "phase", "status"):
            assert trial.user_attrs[key] == row[key], (row["run_id"], key)
        stop = row.get("stop") or {}
        assert trial.user_attrs["stop_rule"] == stop.get("rule")
        assert trial.user_attrs["stop_reason"] == stop.get("message")
        assert trial.user_attrs["params"] == row["params"]  # the full configuration
        assert trial.params == {k: v for k, v in row["params"].items() if k in trial.params}
        steps = [int(e["step"]) for e in row["evaluations"] if "accuracy" in e]
        assert sorted(trial.intermediate_values) == sorted(set(steps))
        if row["status"] == "accepted":
            assert trial.value == pytest.approx(row["metrics"]["accuracy"])
    return study


def record_run(study: optuna.Study, planned: PlannedRun, record: RunRecord) -> FrozenTrial | None:
    """One run recorded alone (`record_runs` of one); its latest trial, None when it has none."""
    record_runs(study, [(planned, record)])
    trials = trials_of(study, planned.run_id)
    return trials[-1] if trials else None


def record_all(out_dir: Path, synthetic: Synthetic) -> optuna.Study:
    study = open_ledger(out_dir, synthetic.plan.campaign.id, plan=synthetic.plan)
    for run in synthetic.runs:
        assert run.record is not None
        record_run(study, run.planned, run.record)
    return study


@pytest.fixture
def campaign(tmp_path: Path) -> Synthetic:
    return write_synthetic(tmp_path, ledger_url=LEDGER_URL)


def test_a_campaign_with_a_stopped_run_opens_from_the_manifest(
    tmp_path: Path, campaign: Synthetic
) -> None:
    record_all(tmp_path, campaign)
    study = assert_ledger_matches_manifest(tmp_path)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    states = [t.state for t in study.trials]
    assert len(states) == 19  # 1 pilot + 6 variants x 3 seeds
    assert states.count(TrialState.COMPLETE) == 16
    assert states.count(TrialState.PRUNED) == 1
    assert states.count(TrialState.FAIL) == 2

    (pruned,) = study.get_trials(states=(TrialState.PRUNED,))
    assert pruned.user_attrs["variant"] == "width=16" and pruned.user_attrs["seed"] == 2
    assert pruned.user_attrs["stop_rule"] == "quality"
    assert pruned.user_attrs["stop_reason"] == STOP_MESSAGE
    assert pruned.value == pytest.approx(pruned.intermediate_values[50])
    failed = study.get_trials(states=(TrialState.FAIL,))
    assert all(t.user_attrs["error"].startswith("RuntimeError") for t in failed)
    best = study.best_trial
    assert best.user_attrs["variant"] == "width=128"
    assert best.duration is not None and best.duration.total_seconds() == pytest.approx(60.0)


def test_recording_twice_never_duplicates_a_trial(tmp_path: Path, campaign: Synthetic) -> None:
    record_all(tmp_path, campaign)
    study = record_all(tmp_path, campaign)  # a restarted campaign records everything again
    assert len(study.trials) == len(campaign.runs)


@pytest.mark.parametrize("mask", UMASKS, ids=oct)
def test_the_ledger_file_has_the_folders_mode(
    tmp_path: Path, campaign: Synthetic, mask: int
) -> None:
    """SQLite creates its file 0644 whatever the umask; the ledger is created first with the
    mode of every other file of the folder, and kept (not replaced) when it exists."""
    out = tmp_path / "out"
    with umask(mask) as expected:
        record_all(out, campaign)
    assert modes(out) == {"ledger.db": expected}
    study = record_all(out, campaign)  # opened again: the same file, its trials kept
    assert len(study.trials) == len(campaign.runs)


def test_a_retried_run_with_a_new_outcome_is_a_new_attempt(
    tmp_path: Path, campaign: Synthetic
) -> None:
    study = open_ledger(tmp_path, "synthetic", plan=campaign.plan)
    run = campaign.run("dropout=0.3", 1)
    assert run.record is not None and run.record.status == "failed"
    first = record_run(study, run.planned, run.record)
    retried = run.record.model_copy(
        update={"status": "accepted", "error": None, "metrics": {"accuracy": 0.93}}
    )
    second = record_run(study, run.planned, retried)
    assert first is not None and second is not None
    assert second.state == TrialState.COMPLETE and second.value == pytest.approx(0.93)
    assert second.user_attrs["attempt"] == 2 and second.user_attrs["supersedes"] == first.number
    assert record_run(study, run.planned, retried).number == second.number  # type: ignore[union-attr]


def test_trimmed_runs_get_no_trial(tmp_path: Path, campaign: Synthetic) -> None:
    study = open_ledger(tmp_path, "synthetic", plan=campaign.plan)
    planned = campaign.run("optimizer=sgd", 0).planned
    trimmed = RunRecord(
        run_id=planned.run_id,
        variant=planned.variant,
        seed=planned.seed,
        category=planned.category,
        phase="main",
        status="trimmed",
    )
    assert record_run(study, planned, trimmed) is None
    assert study.trials == []


def test_an_accepted_run_without_its_metric_is_refused(tmp_path: Path, campaign: Synthetic) -> None:
    study = open_ledger(tmp_path, "synthetic", plan=campaign.plan)
    run = campaign.run("control", 1)
    assert run.record is not None
    with pytest.raises(Exception, match="has no finite 'accuracy' metric"):
        record_run(study, run.planned, run.record.model_copy(update={"metrics": {}}))


def test_search_space_spans_every_variant(campaign: Synthetic) -> None:
    space = search_space(campaign.plan)
    assert space["width"] == IntDistribution(16, 128)
    assert space["dropout"] == FloatDistribution(0.1, 0.3)
    assert space["optimizer"] == CategoricalDistribution(["adam", "sgd"])
    assert space["batch_size"] == IntDistribution(64, 64)


def test_the_absolute_url_names_the_folders_ledger(tmp_path: Path) -> None:
    assert absolute_ledger_url(tmp_path) == f"sqlite:///{tmp_path.resolve()}/ledger.db"


@pytest.mark.slow
def test_recording_many_runs_at_once_matches_one_by_one(
    tmp_path: Path, campaign: Synthetic
) -> None:
    batch = open_ledger(tmp_path / "batch", "synthetic", plan=campaign.plan)
    single = open_ledger(tmp_path / "single", "synthetic", plan=campaign.plan)
    runs = [(r.planned, r.record) for r in campaign.runs if r.record is not None]
    record_runs(batch, runs)
    record_runs(batch, runs)  # idempotent: nothing new the second time
    for planned, record in runs:
        record_run(single, planned, record)
    summary = [(t.user_attrs["run_id"], t.state, t.value) for t in batch.trials]
    assert summary == [(t.user_attrs["run_id"], t.state, t.value) for t in single.trials]
    assert len(summary) == sum(r.status != "trimmed" for _, r in runs) > 0
    failed = next((p, r) for p, r in runs if r.status == "failed")
    retried = failed[1].model_copy(
        update={"status": "accepted", "error": None, "metrics": {"accuracy": 0.93}}
    )
    record_runs(batch, [(failed[0], retried)])
    again = [t for t in batch.trials if t.user_attrs["run_id"] == failed[0].run_id]
    assert [t.user_attrs.get("attempt") for t in again] == [None, 2]


def test_only_factors_that_vary_among_accepted_runs_are_params(
    tmp_path: Path, campaign: Synthetic
) -> None:
    # optuna-dashboard ranks every param's importance over the complete trials: a trimmed
    # factor (optimizer) or a never-varied parameter (batch_size) must not be among them.
    study = open_ledger(tmp_path, "synthetic", plan=campaign.plan)
    runs = []
    for run in campaign.runs:
        assert run.record is not None
        record = run.record
        if run.planned.variant == "optimizer=sgd":
            record = record.model_copy(update={"status": "trimmed", "metrics": {}})
        runs.append((run.planned, record))
    record_runs(study, runs)
    named = set().union(*(t.params for t in study.trials))
    assert {"width", "depth", "dropout"} <= named
    assert "optimizer" not in named and "batch_size" not in named
    assert set(optuna.importance.get_param_importances(study)) <= {"width", "depth", "dropout"}
    control = next(t for t in study.trials if t.user_attrs["variant"] == "control")
    assert control.user_attrs["seed"] in (0, 1, 2) and "batch_size" in control.user_attrs["params"]
