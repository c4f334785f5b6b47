"""Adversarial input (issue 15): special files, YAML tags, trailing newlines, non-finite and
ambiguous values, and CLI numbers; each refused with exit 2, the path named, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.cli import main
from tests.conftest import ROOT
from tests.faults.test_malformed_plans import DEMO, _assert_refused, _set

CASES: list[tuple[str, Any, str]] = [
    ("id-trailing-newline", _set(DEMO, "campaign.id", "demo\n"), "campaign.id"),
    ("entry-trailing-newline", _set(DEMO, "workload.entry", "a.b:C\n"), "workload.entry"),
    ("device-trailing-newline", _set(DEMO, "resources.devices", ["cpu\n"]), "resources.devices"),
    ("levels-nan", _set(DEMO, "factors.width.levels", [float("nan"), float("nan")]), "width"),
    ("level-inf", _set(DEMO, "factors.width.levels", [float("inf")]), "factors.width"),
    ("levels-same-name", _set(DEMO, "factors.dropout.levels", [0.3, "0.3"]), "'0.3'"),
    ("control-inf", _set(DEMO, "control.params.lr", float("inf")), "control.params"),
    ("workload-nan", _set(DEMO, "workload.params.batch_size", float("nan")), "workload.params"),
    ("pilot-seed-unregistered", _set(DEMO, "pilot.seeds", [2**40]), "pilot.seeds"),
    ("pilot-seed-negative", _set(DEMO, "pilot.seeds", [-1]), "pilot.seeds"),
    (
        "step-seconds-inf",
        _set(DEMO, "budget.estimate.step_seconds", float("inf")),
        "budget.estimate.step_seconds",
    ),
    ("prep-hours-inf", _set(DEMO, "budget.prep_hours", float("inf")), "budget.prep_hours"),
    ("python-tag", "campaign: !!python/object/apply:os.getpid []\n", "campaign"),
    ("str-tag", yaml.safe_dump(DEMO).replace("steps: 300", "steps: !!str 300"), "workload.steps"),
]


@pytest.mark.parametrize(("content", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_adversarial_values_are_refused_as_invalid_input(
    content: Any, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    code = main(["validate", str(plan)])
    captured = capsys.readouterr()
    _assert_refused(code, captured.err, captured.out, field)


SLOW = pytest.mark.slow


def test_two_levels_rendering_one_name_are_one_error_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(_set(DEMO, "factors.dropout.levels", [0.3, "0.3"])))
    assert main(["validate", str(plan)]) == 2
    err = capsys.readouterr().err
    assert "1 problem(s)" in err and "0.3 and '0.3'" in err and "dropout=0.3" not in err[:0]


def _cli(*args: str, cwd: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PREFECT_HOME=str(cwd / ".never-created"), PYTHONPATH=str(ROOT))
    env.pop("PREFECT_API_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "ablations.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_fifo_plan_is_refused_at_once(command: str, tmp_path: Path) -> None:
    fifo = tmp_path / "plan.yaml"
    os.mkfifo(fifo)
    result = _cli(command, str(fifo), cwd=tmp_path)  # hangs forever on open without the check
    assert result.returncode == 2, result.stderr
    assert "not a regular file (a FIFO)" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]


def test_dev_zero_is_refused_without_reading_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "/dev/zero"]) == 2
    assert "not a regular file (a character device)" in capsys.readouterr().err


def test_a_plan_over_the_cap_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(DEMO) + "#" * (1 << 20) + "\n")
    assert main(["validate", str(plan)]) == 2
    assert "exceeds the limit of 1048576 bytes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--heartbeat-timeout", "nan"], "--heartbeat-timeout: must be a finite number"),
        (["--heartbeat-timeout", "0"], "--heartbeat-timeout: must be above 0"),
        # With a pool the refusal comes after Prefect's import: seconds, make test only.
        pytest.param(["--pool", "p", "--devices", "0"], "--devices must be at least 1", marks=SLOW),
        pytest.param(["--pool", "p", "--devices", "abc"], "unknown device 'abc'", marks=SLOW),
        pytest.param(["--pool", "p"], "set PREFECT_API_URL", marks=SLOW),
    ],
)
def test_bad_run_options_exit_2_before_anything_starts(
    args: list[str], message: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    data = _set(DEMO, "checkpoint.store", f"file://{tmp_path / 'store'}")
    plan.write_text(yaml.safe_dump(data))
    result = _cli("run", str(plan), "--out", str(tmp_path / "out"), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_verify_refuses_a_non_finite_tolerance(tmp_path: Path) -> None:
    for value in ("nan", "inf", "-1"):
        result = _cli("verify", str(tmp_path), "--tolerance", value, cwd=tmp_path)
        assert result.returncode == 2 and "--tolerance" in result.stderr, result.stderr
