"""Malformed plans: exit 2, the field path named, no traceback, nothing written.

Hand-written cases cover each section; hypothesis generates more by putting values of the
wrong kind at known field paths. Most go through the in-process `main([...])` (fast); a few
go through `python -m ablations.cli validate|run` in a subprocess, as a user runs them.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ablations.cli import main
from tests.conftest import DEMO_PLAN

DEMO: dict[str, Any] = yaml.safe_load(DEMO_PLAN.read_text())


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, leaf = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return data


def _drop(data: dict[str, Any], path: str) -> dict[str, Any]:
    data = copy.deepcopy(data)
    *parents, leaf = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    del node[leaf]
    return data


def _adapter(field: str, value: Any) -> dict[str, Any]:
    """The demo plan with an adapter's field in place of the built-in entry."""
    return _set(_drop(DEMO, "workload.entry"), f"workload.{field}", value)


DIGITS = "ablations.workloads.digits:DigitsWorkload"
# An adapter's user modules are imported (and so checked) before any run, like an entry.
ADAPTERS: list[tuple[str, Any, str]] = [
    (
        "hf-trainer-missing-function",
        _adapter("hf_trainer", "ablations.workloads.digits:nope"),
        "workload.hf_trainer: module 'ablations.workloads.digits' has no 'nope'",
    ),
    (
        "hf-trainer-missing-module",
        _adapter("hf_trainer", "no_such_mod:make"),
        "workload.hf_trainer: module 'no_such_mod' cannot be found",
    ),
    (
        "lightning-missing-module",
        _adapter("lightning", {"module": "no_such_mod:Net", "data": DIGITS}),
        "workload.lightning.module: module 'no_such_mod' cannot be found",
    ),
    (
        "lightning-data-missing-class",
        _adapter("lightning", {"module": DIGITS, "data": "ablations.workloads.digits:Nope"}),
        "workload.lightning.data: module 'ablations.workloads.digits' has no 'Nope'",
    ),
]

# (case id, plan data or raw text, a field path the message must name)
HAND_WRITTEN: list[tuple[str, Any, str]] = [
    ("seeds-duplicate", _set(DEMO, "seeds", [1, 1]), "seeds"),
    ("seeds-empty", _set(DEMO, "seeds", []), "seeds"),
    ("seeds-strings", _set(DEMO, "seeds", ["a"]), "seeds"),
    ("campaign-missing", _drop(DEMO, "campaign"), "campaign"),
    ("campaign-id-missing", _drop(DEMO, "campaign.id"), "campaign.id"),
    ("campaign-id-slash", _set(DEMO, "campaign.id", "../../etc"), "campaign.id"),
    ("campaign-id-empty", _set(DEMO, "campaign.id", ""), "campaign.id"),
    ("unknown-top-key", _set(DEMO, "factorz", {}), "factorz"),
    ("unknown-nested-key", _set(DEMO, "checkpoint.keep_lst", 1), "checkpoint.keep_lst"),
    ("steps-zero", _set(DEMO, "workload.steps", 0), "workload.steps"),
    ("steps-negative", _set(DEMO, "workload.steps", -5), "workload.steps"),
    ("steps-string", _set(DEMO, "workload.steps", "many"), "workload.steps"),
    ("eval-every-zero", _set(DEMO, "workload.eval_every", 0), "workload.eval_every"),
    ("factors-empty", _set(DEMO, "factors", {}), "factors"),
    ("factor-no-levels", _set(DEMO, "factors.width.levels", []), "factors.width"),
    ("factor-bad-category", _set(DEMO, "factors.width.category", "vital"), "factors.width"),
    ("metric-direction", _set(DEMO, "metric.direction", "up"), "metric.direction"),
    ("metric-missing", _drop(DEMO, "metric"), "metric"),
    ("gate-mode", _set(DEMO, "gate.mode", "manual"), "gate.mode"),
    ("gate-timeout-negative", _set(DEMO, "gate.timeout_minutes", -1), "gate.timeout_minutes"),
    ("store-scheme", _set(DEMO, "checkpoint.store", "ftp://x/y"), "checkpoint.store"),
    ("keep-last-zero", _set(DEMO, "checkpoint.keep_last", 0), "checkpoint.keep_last"),
    ("mtbf-negative", _set(DEMO, "checkpoint.mtbf_hours", -4), "checkpoint.mtbf_hours"),
    ("devices-bad", _set(DEMO, "resources.devices", "gpu0"), "resources.devices"),
    ("pilot-unknown-variant", _set(DEMO, "pilot.variants", ["nope"]), "pilot.variants"),
    ("workload-entry-missing-module", _set(DEMO, "workload.entry", "no_such.mod:X"), "workload"),
    # Found but without the class: for `run`, the slot workers' import reports it.
    (
        "workload-entry-missing-class",
        _set(DEMO, "workload.entry", "ablations.workloads.digits:NoSuch"),
        "has no 'NoSuch'",
    ),
    ("budget-days", _set(DEMO, "budget.package.days", "forever"), "budget.package.days"),
    ("control-not-mapping", _set(DEMO, "control", [1, 2]), "control"),
    ("version-2", _set(DEMO, "version", 2), "version"),
    ("not-a-mapping", "- just\n- a list\n", "plan.yaml: invalid plan, 1 problem(s):\n  not a"),
    ("bad-yaml", "campaign: {id: [unclosed\n", "plan.yaml: invalid plan, 1 problem(s):\n  not va"),
    ("duplicate-key", "seeds: [0]\nseeds: [1]\n", "seeds"),
    *ADAPTERS,
]


@pytest.fixture
def in_empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _write(folder: Path, content: Any) -> Path:
    path = folder / "plan.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return path


def _assert_refused(code: int, err: str, out: str, field: str) -> None:
    assert code == 2, err
    assert f"{field}" in err, err
    assert "<plan>" not in err  # the plan as a whole: its file names it (#44)
    assert "Traceback" not in err + out
    assert "internal error" not in err


@pytest.mark.parametrize(
    ("content", "field"), [c[1:] for c in HAND_WRITTEN], ids=[c[0] for c in HAND_WRITTEN]
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_hand_written_malformed_plans_are_refused(
    command: str,
    content: Any,
    field: str,
    tmp_path: Path,
    in_empty_cwd: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = _write(tmp_path, content)
    out_dir = tmp_path / "out"
    argv = [command, str(plan)] + (["--out", str(out_dir)] if command == "run" else [])
    code = main(argv)
    captured = capsys.readouterr()
    _assert_refused(code, captured.err, captured.out, field)
    assert not out_dir.exists()  # nothing written, not even the folder
    assert list(in_empty_cwd.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "field"), [c[1:] for c in ADAPTERS], ids=[c[0] for c in ADAPTERS]
)
def test_an_adapter_that_does_not_import_is_refused_before_probing(
    content: Any, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["probe", str(_write(tmp_path, content))])
    captured = capsys.readouterr()
    _assert_refused(code, captured.err, captured.out, field)


# Generated: a value of the wrong kind at a known field path.
FIELDS = [
    "workload.steps",
    "workload.eval_every",
    "seeds",
    "metric.threshold",
    "metric.direction",
    "gate.mode",
    "gate.timeout_minutes",
    "checkpoint.keep_last",
    "checkpoint.mtbf_hours",
    "checkpoint.store",
    "pilot.steps",
    "resources.slots_per_device",
]
WRONG = st.one_of(
    st.integers(max_value=0),
    st.text(alphabet="xyz!?", min_size=1, max_size=6),
    st.lists(st.dictionaries(st.text("ab", min_size=1, max_size=2), st.integers()), max_size=2),
    st.dictionaries(st.text("cd", min_size=1, max_size=2), st.booleans(), min_size=1, max_size=2),
)


def _is_valid_anyway(field: str, value: Any) -> bool:
    """Values a field genuinely accepts (a threshold may be any number, seeds any ints)."""
    if field == "metric.threshold":
        return isinstance(value, int)
    return False


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(FIELDS), value=WRONG)
def test_generated_malformed_plans_are_refused(
    field: str, value: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if _is_valid_anyway(field, value):
        return
    plan = _write(tmp_path, _set(DEMO, field, value))
    code = main(["validate", str(plan)])
    captured = capsys.readouterr()
    _assert_refused(code, captured.err, captured.out, field)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.text(min_size=1, max_size=200))
def test_arbitrary_text_never_crashes_the_validator(
    junk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(junk, encoding="utf-8")
    code = main(["validate", str(plan)])
    captured = capsys.readouterr()
    assert code == 2, captured.out
    assert "Traceback" not in captured.err and "internal error" not in captured.err


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PREFECT_HOME=str(cwd / ".never-created"))
    return subprocess.run(
        [sys.executable, "-m", "ablations.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("case", "command"),
    [("seeds-duplicate", "validate"), ("bad-yaml", "run"), ("store-scheme", "run")],
)
def test_malformed_plans_through_the_real_cli(
    case: str, command: str, tmp_path: Path, write_plan: Callable[[Any], Path]
) -> None:
    _, content, field = next(c for c in HAND_WRITTEN if c[0] == case)
    plan = write_plan(content)
    work = tmp_path / "work"
    work.mkdir()
    args = [command, str(plan)] + (["--out", str(tmp_path / "out")] if command == "run" else [])
    result = _cli(*args, cwd=work)
    _assert_refused(result.returncode, result.stderr, result.stdout, field)
    assert list(work.iterdir()) == [] and not (tmp_path / "out").exists()
