"""A command workload run by itself (no campaign): reports, stop rules, folder checkpoints
in the S3-protocol store, resume, and the mistakes a program can make."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ablations.byo.command import CommandWorkload, command_line
from ablations.byo.run import execute
from ablations.checkpoint.manager import CheckpointManager
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.workload import COMMAND_ENTRY
from ablations.process.scratch import scratch_root
from ablations.run.records import RunSpec
from tests.specs import bare_spec

SCRIPT = Path(__file__).with_name("linear_script.py")


def spec_for(store: CheckpointSection | None, tmp_path: Path, **changes: object) -> RunSpec:
    fields: dict[str, object] = dict(
        run_id="control-s0-abc", campaign_id="byo", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params={"lr": 0.05}, steps=100,
        eval_every=25, entry=COMMAND_ENTRY,
        command=["python", str(SCRIPT), "--lr", "{lr}"], metric="mse", direction="minimize",
        threshold=0.5, checkpoint=store, out_dir=str(tmp_path / "out"),
    )  # fmt: skip
    fields.update(changes)
    return bare_spec(**fields)


def run(spec: RunSpec):  # type: ignore[no-untyped-def]
    hook = CheckpointManager(spec) if spec.checkpoint is not None else None
    return execute(spec, CommandWorkload, hook)


def test_parameters_replace_placeholders_and_python_is_this_interpreter() -> None:
    argv = command_line(["python", "t.py", "--lr={lr}", "{flag}"], {"lr": 0.1, "flag": True})
    assert argv == [sys.executable, "t.py", "--lr=0.1", "true"]


def test_checkpoints_in_s3_resume_exactly_and_count_no_step_twice(
    tmp_path: Path, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CheckpointSection(
        store="s3://ablate-test/byo-command", endpoint_url=s3_endpoint, interval={"steps": 30}
    )
    straight = run(spec_for(None, tmp_path))
    assert straight.status == "accepted", straight
    # The checkpointed run, stopped at step 60 as a pilot is, then continued from the store.
    log = tmp_path / "trained"
    log.mkdir()
    monkeypatch.setenv("TRAINED_LOG", str(log))
    first = run(spec_for(store, tmp_path, until=60, phase="pilot"))
    assert first.steps_done == 60 and first.checkpoint.saves == 2, first
    assert first.checkpoint.uri.endswith("byo-command/byo/control-s0-abc/step-00000060")
    second = run(spec_for(store, tmp_path))
    assert second.checkpoint.resumed_from_step == 60
    assert second.status == "accepted" and second.steps_done == 100
    assert second.metrics == straight.metrics  # bitwise: the folder held the whole state
    assert second.evaluations == straight.evaluations  # the history came back with it
    trained = (log / "0.05-0.log").read_text().split()
    assert trained == [str(step) for step in range(1, 101)]  # nothing trained twice


def test_divergence_stops_with_the_rule_and_the_step(tmp_path: Path) -> None:
    record = run(spec_for(None, tmp_path, params={"lr": 200.0}))
    assert record.status == "stopped" and record.stop is not None
    assert record.stop.rule == "non_finite_loss"
    assert f"at step {record.stop.step} (as reported)" in record.stop.message
    assert record.steps_done == record.stop.step < 100  # told to stop, it stopped there
    assert (tmp_path / "out" / record.artifacts["steps"]).exists()


def test_the_quality_rule_stops_at_the_evaluation_it_judged(tmp_path: Path) -> None:
    """The helper sends an evaluation without waiting for the answer (its steps are
    microseconds): the rule's stop comes with the program's next question, and the run ends
    at the evaluation's step, the steps trained meanwhile left out."""
    rules = {"quality": {"warmup_steps": 0}}
    record = run(spec_for(None, tmp_path, threshold=1e-9, stop_rules=rules))
    assert record.status == "stopped" and record.stop is not None
    assert record.stop.rule == "quality" and record.stop.step == 25
    assert record.steps_done == 25 and [e["step"] for e in record.evaluations] == [25]


def test_a_resume_the_program_ignores_fails_the_run(tmp_path: Path) -> None:
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 30})
    run(spec_for(store, tmp_path, until=30, phase="pilot"))
    ignoring = tmp_path / "ignores_resume.py"
    ignoring.write_text(SCRIPT.read_text().replace("ablate.resumed_step()", "0"))
    record = run(spec_for(store, tmp_path, command=["python", str(ignoring), "--lr", "{lr}"]))
    assert record.status == "failed" and record.error is not None
    assert "resumed from step 30 but the training code reported step 1" in record.error.message


def test_a_crashing_program_fails_with_its_stderr(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise SystemExit('no data at /nowhere')\n")
    record = run(spec_for(None, tmp_path, command=["python", str(broken)]))
    assert record.status == "failed" and record.error is not None
    assert "exited with 1: no data at /nowhere" in record.error.message


def test_the_programs_folders_are_a_scratch_folder_gone_after_the_run(tmp_path: Path) -> None:
    """Staged under the per-user scratch root (a killed campaign's folders are removed by the
    next run, `ablations.process.scratch`), not a bare temporary folder that a kill -9 leaves."""
    seen = tmp_path / "seen.txt"
    program = tmp_path / "where.py"
    program.write_text(
        f"import os\nopen({str(seen)!r}, 'w').write(os.environ['ABLATE_CHECKPOINT_DIR'])\n"
        "raise SystemExit('looked')\n"
    )
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 30})
    record = run(spec_for(store, tmp_path, command=["python", str(program)]))
    assert record.status == "failed"
    folder = Path(seen.read_text())
    assert scratch_root() in folder.parents
    assert not folder.exists() and not folder.parent.exists()


def test_the_command_runs_in_the_folder_ablate_run_started_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a work pool the worker's flow run starts in a temporary folder of its own: the
    command's relative path still resolves where `ablate run` started (the spec's workdir)."""
    here = tmp_path / "checkout"
    here.mkdir()
    (here / "train.py").write_text(SCRIPT.read_text())
    elsewhere = tmp_path / "worker-tmp"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    relative = ["python", "train.py", "--lr", "{lr}"]
    record = run(
        spec_for(None, tmp_path, command=relative).model_copy(update={"workdir": str(here)})
    )
    assert record.status == "accepted", record
    gone = spec_for(None, tmp_path, command=relative).model_copy(
        update={"workdir": str(tmp_path / "not-on-this-host")}
    )
    failed = run(gone)
    assert failed.status == "failed" and failed.error is not None
    assert "not a folder on this host" in failed.error.message
    assert "not-on-this-host" in failed.error.message
