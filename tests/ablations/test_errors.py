"""The error tree by cause and the exit codes `ablate` gives each: 2 for the input, 1 for the
infrastructure, whichever command meets it."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ablations
from ablations.cli import EXIT_INFRASTRUCTURE, EXIT_INPUT, main
from ablations.cli import registry as cli_registry
from ablations.errors import AblationError, InfrastructureError, InputError
from tests.conftest import ROOT

NOT_A_CAUSE: set[str] = set()
"""Errors exempt from naming a cause: none (`NoUsableRestart`, once exempt, is a
`WorkloadError`)."""


def _subclasses(base: type[BaseException]) -> set[type[BaseException]]:
    found = set(base.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


@pytest.mark.filterwarnings("ignore:ablations\\.\\w+ is deprecated:DeprecationWarning")  # old paths
def test_every_error_of_the_project_names_its_cause() -> None:
    for module in pkgutil.walk_packages(ablations.__path__, "ablations."):
        user_style = module.name.startswith("ablations.workloads.")  # examples for users
        if not user_style and not module.name.endswith(".__main__"):  # `-m` runs the CLI
            importlib.import_module(module.name)
    untyped = [
        f"{error.__module__}.{error.__name__}"
        for error in _subclasses(AblationError)
        if not issubclass(error, InputError | InfrastructureError)
        and error not in (InputError, InfrastructureError)
        and error.__name__ not in NOT_A_CAUSE
    ]
    assert untyped == []


def test_no_module_raises_the_base_itself() -> None:
    """`raise AblationError(...)` names no cause: `ablate` could not choose an exit code."""
    raised = []
    for folder in ("ablations", "tasks", "flows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    name = node.exc.func
                    if isinstance(name, ast.Name) and name.id == "AblationError":
                        raised.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert raised == []


def _plan_folder(tmp_path: Path, plan: dict[str, Any]) -> Path:
    """A folder `ablate report` reads: a manifest, and the (here invalid) registered plan."""
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"campaign_id": "x", "runs": []}))
    (folder / "plan.yaml").write_text(json.dumps(plan))
    return folder


@pytest.mark.parametrize("command", ["validate", "plan", "budget", "run", "report"])
def test_a_bad_plan_exits_2_from_every_command_that_reads_one(
    command: str,
    tmp_path: Path,
    demo_data: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo_data["seeds"] = 0  # one named problem
    plan = tmp_path / "plan.yaml"
    plan.write_text(json.dumps(demo_data))
    target = _plan_folder(tmp_path, demo_data) if command == "report" else plan
    args = [command, str(target)]
    if command == "run":
        args += ["--out", str(tmp_path / "out")]
    assert main(args) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "invalid plan" in err and "seeds" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_report_and_verify_agree_on_a_folder_that_is_no_campaign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in (tmp_path, tmp_path / "missing"):
        codes = {command: main([command, str(folder)]) for command in ("report", "verify")}
        assert codes == {"report": EXIT_INPUT, "verify": EXIT_INPUT}
        err = capsys.readouterr().err
        assert err.count("error: ") == 2 and "Traceback" not in err


def test_report_of_a_folder_without_its_plan_exits_2(
    tmp_path: Path, demo_data: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _plan_folder(tmp_path, demo_data)
    (folder / "plan.yaml").unlink()
    assert main(["report", str(folder)]) == EXIT_INPUT
    assert "plan.yaml does not exist" in capsys.readouterr().err


def _open_a_store_on_a_file(tmp_path: Path) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        from ablations.checkpoint.store import open_store
        from ablations.plan.infrastructure import CheckpointSection

        blocker = tmp_path / "not-a-folder"
        blocker.write_text("a file where the store's folder should be")
        open_store(CheckpointSection(store=f"file://{blocker}/ckpt"))  # probes: write, read
        return 0

    return handler


def test_a_store_failure_exits_1_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A real store refusing its probe, met by a command (here in place of `schema`'s body).
    monkeypatch.setitem(cli_registry.COMMANDS, "schema", _open_a_store_on_a_file(tmp_path))
    assert main(["schema"]) == EXIT_INFRASTRUCTURE
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "not-a-folder" in err and "rerun the same command" in err
    assert "Traceback" not in err and "internal error" not in err
