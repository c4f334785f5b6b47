"""What a slot's worker does with a job, called in this process on the tiny digits workload:
a run with or without its checkpoint hook, the preflight (data check, then the restart check
whole or up to its reference), and a restart check's continuation. (Across two worker
processes: tests/ablations/preflight/test_across.py.)"""

from __future__ import annotations

from pathlib import Path

import torch

from ablations.checkpoint import commit, open_store
from ablations.checkpoint.commit import Identity
from ablations.preflight.verdict import verdict
from ablations.run.records import RunSpec
from ablations.workers.jobs import continue_check, preflight_on_slot, preflight_start, run_spec
from ablations.workloads.digits import DigitsWorkload
from tests.ablations.checkpoint.conftest import SMALL, make_spec

FORGETFUL = "tests.ablations.checkpoint.workloads:ForgetfulDigits"


def _counts() -> dict[str, int]:
    """The digits workload's own split sizes (what a plan would register)."""
    workload = DigitsWorkload.build(SMALL, seed=7, device=torch.device("cpu"), steps=40)
    splits = workload.splits()
    return {"train": len(splits.train.ids), "heldout": len(splits.heldout.ids)}


def _memory(tmp_path: Path, **checkpoint: object) -> RunSpec:
    return make_spec(f"memory://jobs-{tmp_path.name}", **checkpoint)


def test_a_run_trains_its_steps_and_commits_through_its_checkpoint_hook(tmp_path: Path) -> None:
    spec = _memory(tmp_path, interval={"steps": 20})
    record = run_spec(spec)
    assert record.run_id == spec.run_id and record.error is None
    assert record.steps_done == spec.steps
    assert record.checkpoint.saves >= 1 and record.checkpoint.failures == 0
    assert spec.checkpoint is not None
    identity = Identity(spec.campaign_id, spec.run_id, spec.plan_hash)
    committed, _ = commit.scan(open_store(spec.checkpoint), identity)
    assert committed and committed[-1] == spec.steps
    assert record.checkpoint.uri is not None and record.checkpoint.uri.endswith(f"{spec.steps:08d}")


def test_a_run_without_a_checkpoint_section_saves_nothing() -> None:
    spec = make_spec("memory://unused").model_copy(update={"checkpoint": None})
    record = run_spec(spec)
    assert record.error is None and record.steps_done == spec.steps
    assert record.checkpoint.saves == 0 and record.checkpoint.uri is None


def test_the_whole_preflight_passes_on_a_sound_workload_and_leaves_the_store_clean(
    tmp_path: Path,
) -> None:
    spec = _memory(tmp_path)
    report = preflight_on_slot(spec, _counts())
    assert report.passed, report
    assert report.data_problems == [] and report.restart is None and report.error is None
    assert report.seconds > 0
    assert spec.checkpoint is not None
    assert open_store(spec.checkpoint).keys("") == []  # the check deletes what it saved


def test_registered_counts_the_data_lacks_fail_the_preflight_naming_them(tmp_path: Path) -> None:
    counts = _counts()
    wrong = {"train": counts["train"] + 1, "validation": 5}
    report = preflight_on_slot(_memory(tmp_path), wrong)
    assert not report.passed and report.restart is None
    problems = "\n".join(report.data_problems)
    assert f"train has {counts['train']} inputs, the plan registers {counts['train'] + 1}" in (
        problems
    )
    assert "registered split 'validation' not found" in problems


def test_a_checkpoint_missing_state_is_a_restart_stop(tmp_path: Path) -> None:
    spec = _memory(tmp_path).with_workload(entry=FORGETFUL)
    report = preflight_on_slot(spec, None)
    assert not report.passed and report.data_problems == [] and report.restart is not None
    assert report.restart.rule == "restart" and "after reload has loss" in report.restart.message


def test_without_the_restart_rule_or_a_checkpoint_only_the_data_is_checked(
    tmp_path: Path,
) -> None:
    spec = _memory(tmp_path).with_workload(entry=FORGETFUL)
    rules = spec.stop_rules.model_copy(
        update={"restart": spec.stop_rules.restart.model_copy(update={"enabled": False})}
    )
    for unchecked in (
        spec.model_copy(update={"stop_rules": rules}),
        spec.model_copy(update={"checkpoint": None}),
    ):
        start = preflight_start(unchecked, None, continue_elsewhere=True)
        assert start.restart is None and start.reference is None and start.error is None
        assert start.finish().passed  # the forgetful workload's defect goes unseen
    assert spec.checkpoint is not None
    assert open_store(spec.checkpoint).keys("") == []


def test_continuing_elsewhere_stops_at_the_reference_and_the_continuation_agrees(
    tmp_path: Path,
) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt")
    start = preflight_start(spec, None, continue_elsewhere=True)
    assert start.restart is None and start.error is None and start.data_problems == []
    reference = start.reference
    assert reference is not None and reference.exact  # on CPU: bitwise agreement expected
    assert reference.until == reference.early + spec.stop_rules.restart.check_steps
    assert len(reference.losses) == reference.until - reference.early

    got = continue_check(spec.for_restart_check(), reference.until)
    assert got.resumed == reference.early and got.refused is None
    assert got.losses == reference.losses and got.digest == reference.digest
    assert verdict(reference, got) is None
    assert start.finish().passed
    assert spec.checkpoint is not None
    assert open_store(spec.checkpoint).keys("") == []  # the continuation deletes the check's


def test_a_continuation_of_a_forgetful_workload_differs_from_its_reference(
    tmp_path: Path,
) -> None:
    spec = make_spec(f"file://{tmp_path}/ckpt").with_workload(entry=FORGETFUL)
    start = preflight_start(spec, None, continue_elsewhere=True)
    assert start.reference is not None
    got = continue_check(spec.for_restart_check(), start.reference.until)
    assert got.resumed == start.reference.early and got.losses != start.reference.losses
    stop = verdict(start.reference, got)
    assert stop is not None and not start.finish(stop).passed


def test_a_memory_store_cannot_be_continued_elsewhere_so_the_check_runs_whole(
    tmp_path: Path,
) -> None:
    # another process cannot see a memory:// store: the slot runs the whole check itself
    start = preflight_start(_memory(tmp_path), None, continue_elsewhere=True)
    assert start.reference is None and start.restart is None and start.error is None
    stopped = preflight_start(
        _memory(tmp_path).with_workload(entry=FORGETFUL), None, continue_elsewhere=True
    )
    assert stopped.reference is None and stopped.restart is not None


def test_a_preflight_that_crashes_reports_the_error_instead_of_raising(tmp_path: Path) -> None:
    spec = _memory(tmp_path).with_workload(entry="no_such_module_xyz:Work")
    start = preflight_start(spec, None, continue_elsewhere=True)
    assert start.error is not None and "no_such_module_xyz" in start.error.message
    assert start.reference is None and start.restart is None
    report = start.finish()
    assert not report.passed and report.error == start.error and report.seconds >= 0
