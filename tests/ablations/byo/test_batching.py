"""Reports sent together: the helper holds short steps back and sends them with the step the
campaign must hear at once (the first, an evaluation, its `next`), one answer for all; the
session takes a batch as it takes each step (a stop rule at its step, a checkpoint at the
batch's last, one timing sample spread over the batch's steps)."""

from __future__ import annotations

import importlib
import io
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ablations.byo.command import HELPER_DIR
from ablations.byo.session import Session
from ablations.checkpoint.manager import CheckpointManager
from ablations.errors import WorkloadError
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.workload import COMMAND_ENTRY
from ablations.run.records import RunSpec
from tests.specs import bare_spec


def spec(tmp_path: Path, **changes: object) -> RunSpec:
    fields: dict[str, object] = dict(
        run_id="r", campaign_id="c", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params={}, steps=100, eval_every=50,
        entry=COMMAND_ENTRY, command=["python", "t.py"], metric="mse",
        direction="minimize", threshold=10.0,
    )  # fmt: skip
    fields.update(changes)
    return bare_spec(**fields)


@pytest.fixture
def helper(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh `ablate_report`, as a program under ablate imports it."""
    monkeypatch.setenv("ABLATE_RUN_ID", "r")
    monkeypatch.syspath_prepend(str(HELPER_DIR))
    monkeypatch.delitem(sys.modules, "ablate_report", raising=False)
    module = importlib.import_module("ablate_report")
    monkeypatch.setattr(module, "BATCH_SECONDS", 60.0)  # the clock never flushes here
    yield module
    sys.modules.pop("ablate_report", None)


def test_the_helper_holds_steps_until_the_campaign_must_hear_one(
    helper: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = io.StringIO(
        '{"checkpoint": false, "stop": false, "next": 6}\n'
        '{"checkpoint": true, "stop": false, "next": 10}\n'
        '{"ok": true}\n'
        '{"checkpoint": false, "stop": true, "next": 10}\n'
    )
    sent = io.StringIO()
    monkeypatch.setattr(sys, "stdin", answers)
    monkeypatch.setattr(sys, "stdout", sent)
    replies = [helper.report(step, 0.5) for step in range(1, 7)]
    replies.append(helper.report(7, 0.4, mse=0.3))  # an evaluation: sent, not asked about
    replies.append(helper.report(8, 0.3))  # held
    messages = [json.loads(line) for line in sent.getvalue().splitlines()]
    assert messages == [
        {"step": 1, "loss": 0.5, "reply": True},  # the first step: asked at once
        {"steps": [2, 3, 4, 5, 6], "losses": [0.5] * 5, "reply": True},  # up to `next`
        {"step": 7, "loss": 0.4, "metrics": {"mse": 0.3}},  # for the stop rules, unasked
    ]
    assert [r.checkpoint for r in replies] == [False] * 5 + [True, False, False]
    helper.saved(8)  # what is held is sent, unasked, before the program's own save
    assert [json.loads(line) for line in sent.getvalue().splitlines()[3:]] == [
        {"step": 8, "loss": 0.3},
        {"saved": 8, "reply": True},
    ]
    monkeypatch.setattr(helper, "BATCH_SECONDS", 0.0)  # the clock: asked again
    assert helper.report(9, 0.2).stop


def test_a_batch_is_taken_step_by_step_with_one_answer(tmp_path: Path) -> None:
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 5})
    checked = spec(tmp_path, checkpoint=store)
    session = Session(checked, CheckpointManager(checked))
    session.report(1, 1.0)
    assert session.next_due() == 5  # the interval's step: never held back
    reply = session.report_batch([2, 3, 4, 5], [0.9, 0.8, None, 0.7])
    assert reply.checkpoint and not reply.stop
    assert session.step == 5 and session.losses[-1] == (5, 0.7) and len(session.losses) == 4
    assert len(session.step_seconds) == 1  # one sample, the batch's seconds over 4 steps
    assert session.next_due() == 10
    session.close()


def test_a_rule_firing_inside_a_batch_ends_the_run_at_its_step(tmp_path: Path) -> None:
    session = Session(spec(tmp_path))
    session.report(1, 1.0)
    reply = session.report_batch([2, 3, 4], [0.5, math.inf, 0.4], {"mse": 0.1})
    assert reply.stop and not reply.checkpoint
    assert session.stop is not None and session.stop.rule == "non_finite_loss"
    assert session.stop.step == 3 and session.step == 3  # not the batch's last
    assert session.evaluations == []  # the metrics were the last step's: never taken


def test_a_malformed_batch_is_refused_by_name(tmp_path: Path) -> None:
    session = Session(spec(tmp_path))
    session.report(3, 1.0)
    with pytest.raises(WorkloadError, match=r"as many losses as steps \(2 steps, 1 losses\)"):
        session.report_batch([4, 5], [0.1])
    with pytest.raises(WorkloadError, match=r"steps \[5, 5\] reported together must increase"):
        session.report_batch([5, 5], [0.1, 0.1])
    with pytest.raises(WorkloadError, match="step 2 reported after step 3"):
        session.report_batch([2, 4], [0.1, 0.1])


def test_the_helper_writes_predictions_whole_in_the_folders_mode(
    helper: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's script writes its predictions file as the campaign writes its own files
    (temporary, fsync, rename, folder fsync; a plain open()'s mode), importing nothing of
    ablate, so a script killed mid-write leaves the old file or none."""
    import os
    import stat
    import subprocess

    from tests.file_modes import umask

    target = tmp_path / "predictions.csv"
    monkeypatch.setenv("ABLATE_PREDICTIONS", str(target))
    with umask(0o002) as expected:
        helper.write_predictions([3, 4], [0, 1], [1, 1])
    assert target.read_text() == "input_id,label,predicted\n3,0,1\n4,1,1\n"
    assert stat.S_IMODE(target.stat().st_mode) == expected
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    helper.write_predictions([5], [0], [0])
    assert len(synced) == 2  # the file, then the folder holding its new name

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        helper.write_predictions([6], [1], [1])
    assert target.read_text() == "input_id,label,predicted\n5,0,0\n"
    assert [p.name for p in tmp_path.iterdir()] == ["predictions.csv"]
    ours = "('ablations', 'tasks', 'flows')"
    bare = subprocess.run(
        [sys.executable, "-c", "import ablate_report, sys; "
         f"print(sorted(m for m in sys.modules if m.split('.')[0] in {ours}))"],
        env={**os.environ, "PYTHONPATH": str(HELPER_DIR)}, cwd=tmp_path, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert bare.stdout.strip() == "[]"  # still imports nothing of the project
