"""A command's program silent for `workload.report_timeout_seconds`: its run fails with "no
report for N s" (the workload's cause), everything it started is killed, and the preflight's
restart check is held to the same limit; the plan's field is bounded and command-only. A
silent program is also stopped at once when the run is asked to terminate (a Ctrl-C)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ablations.byo.command import CommandWorkload
from ablations.byo.restart import external_restart_check
from ablations.byo.run import execute
from ablations.errors import Interrupted, NoReport, PlanError
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.workload import DEFAULT_REPORT_TIMEOUT_SECONDS, WorkloadSection
from ablations.process.preemption import TERMINATE
from tests.ablations.byo.test_command import spec_for

HANGING = Path(__file__).with_name("hanging_script.py")
LIMIT = 2.0


def _gone(pid: int) -> bool:
    """Whether a process has ended (a zombie left for its parent to reap counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.parametrize("reported", [0, 3])
def test_a_silent_program_fails_its_run_and_its_group_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reported: int
) -> None:
    child = tmp_path / "child.pid"
    monkeypatch.setenv("CHILD_PID", str(child))
    monkeypatch.setenv("HANG_AFTER", str(reported))
    spec = spec_for(None, tmp_path, command=["python", str(HANGING)])
    spec = spec.with_workload(report_timeout_seconds=LIMIT)
    started = time.monotonic()
    record = execute(spec, CommandWorkload)
    took = time.monotonic() - started
    assert record.status == "failed" and record.error is not None, record
    assert record.error.type == "NoReport" and record.error.cause == "workload"
    assert record.error.message.startswith(f"no report for 2 s (after step {reported}; ")
    assert "report_timeout_seconds" in record.error.message
    assert record.steps_done == reported
    assert LIMIT <= took < LIMIT + 5, took  # the limit, not the default ten minutes
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while not _gone(pid):  # the program's own child, in its group, went with it
        assert time.monotonic() < deadline, f"the program's child {pid} outlived it"
        time.sleep(0.05)


def test_the_restart_check_is_held_to_the_limit(tmp_path: Path) -> None:
    """Preflight runs the program too: a hung one fails it in seconds, not silently."""
    store = CheckpointSection(store=f"file://{tmp_path / 'ckpt'}")
    spec = spec_for(store, tmp_path, command=["python", str(HANGING)])
    spec = spec.with_workload(report_timeout_seconds=LIMIT)
    started = time.monotonic()
    with pytest.raises(NoReport, match=r"^no report for 2 s \(after step 0; "):
        external_restart_check(spec, CommandWorkload)
    assert time.monotonic() - started < LIMIT + 5


def test_reports_in_time_keep_the_run_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is on silence, not on the run: 100 steps of 0.03 s (3 s) under a 2 s limit."""
    monkeypatch.setenv("STEP_SLEEP", "0.03")
    spec = spec_for(None, tmp_path).with_workload(report_timeout_seconds=LIMIT)
    record = execute(spec, CommandWorkload)
    assert record.status == "accepted" and record.steps_done == 100, record


def _plan(**workload: Any) -> dict[str, Any]:
    return {
        "campaign": {"id": "t", "question": "q?", "decision": "d"},
        "workload": {"command": ["python", "train.py"], **workload},
        "control": {"params": {"lr": 0.1}},
        "factors": {"lr": {"category": "essential", "levels": [0.2]}},
        "seeds": [0, 1],
        "metric": {"name": "mse", "direction": "minimize", "threshold": 1, "useful_effect": 0.1},
    }


def test_the_plan_field_is_bounded_command_only_and_out_of_the_hash() -> None:
    assert WorkloadSection(command=["x"]).report_timeout == DEFAULT_REPORT_TIMEOUT_SECONDS == 600
    assert WorkloadSection(command=["x"], report_timeout_seconds=2).report_timeout == 2
    for bad in (0, -1, 10**6, float("nan")):
        with pytest.raises(PlanError, match=r"workload\.report_timeout_seconds"):
            parse_plan(_plan(report_timeout_seconds=bad))
    with pytest.raises(PlanError, match="report_timeout_seconds limits a `command`"):
        parse_plan({**_plan(), "workload": {"report_timeout_seconds": 5}})
    # A plan registered before the field existed keeps its dump; a limit raised later (a
    # slow start found by a hung preflight) is the same campaign: the hash leaves it out.
    unset = parse_plan(_plan())
    assert "report_timeout_seconds" not in unset.model_dump(mode="json")["workload"]
    limited = parse_plan(_plan(report_timeout_seconds=5))
    assert limited.model_dump(mode="json")["workload"]["report_timeout_seconds"] == 5
    assert plan_hash(unset) == plan_hash(limited)
    assert plan_hash(unset) != plan_hash(parse_plan(_plan(steps=301)))


@pytest.fixture
def terminate_soon() -> Iterator[None]:
    """A terminate request (a Ctrl-C or SIGTERM passed on to the worker) one second in."""
    timer = threading.Timer(1.0, TERMINATE.request, args=("SIGTERM",))
    timer.start()
    yield
    timer.cancel()
    TERMINATE.clear()


def test_a_silent_program_is_stopped_at_once_on_a_terminate_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, terminate_soon: None
) -> None:
    """It never asks for answers, so it cannot hear `stop`: it is sent SIGTERM at once, not
    left to the grace period's end, and its run is interrupted (resumed by a rerun), not a
    failure of the workload that would have the gate answer `fix`."""
    monkeypatch.setenv("HANG_AFTER", "2")
    spec = spec_for(None, tmp_path, command=["python", str(HANGING)])
    started = time.monotonic()
    record = execute(spec.with_workload(report_timeout_seconds=60.0), CommandWorkload)
    assert time.monotonic() - started < 10
    assert record.interrupted and record.error is not None, record
    assert record.error.cause == "infrastructure" and record.steps_done == 2


def test_a_restart_check_cut_short_gives_no_verdict(tmp_path: Path, terminate_soon: None) -> None:
    store = CheckpointSection(store=f"file://{tmp_path / 'ckpt'}")
    spec = spec_for(store, tmp_path, command=["python", str(HANGING)])
    started = time.monotonic()
    with pytest.raises(Interrupted):
        external_restart_check(spec.with_workload(report_timeout_seconds=60.0), CommandWorkload)
    assert time.monotonic() - started < 10
