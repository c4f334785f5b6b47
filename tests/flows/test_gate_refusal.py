"""`--gate ui` never waits for nobody (#44): without a Prefect server the user can open, a
local `ablate run` whose gate asks in the UI is refused at once (exit 2, one line saying how),
before anything is written; the temporary server of `ablate run` serves no UI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import yaml

from ablations.errors import GateUnanswerable
from ablations.files.names import GATE
from ablations.plan.io import plan_from_text
from flows.cli import refuse_unanswerable_gate
from tests.conftest import DEMO_PLAN, ROOT


@pytest.fixture(autouse=True)
def no_configured_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a fresh machine: no PREFECT_API_URL, a Prefect home with no profile naming one."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))


def _plan(mode: str, tmp_path: Path) -> Path:
    data = yaml.safe_load(DEMO_PLAN.read_text())
    data.setdefault("gate", {})["mode"] = mode
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _ablate_run(plan: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(out), *flags],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("mode", "flags", "named"),
    [("auto", ("--gate", "ui"), "--gate ui"), ("ui", (), "the plan's gate.mode: ui")],
)
def test_a_ui_gate_without_a_server_is_refused_in_one_line_before_anything_starts(
    mode: str, flags: tuple[str, ...], named: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = _ablate_run(_plan(mode, tmp_path), out, *flags)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {named} asks in the Prefect UI")
    assert "set PREFECT_API_URL" in line and "`ablate serve`" in line
    assert not out.exists()  # no folder, no lock, no server, no worker


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _api_url(url: str | None) -> AbstractContextManager[object]:
    """PREFECT_API_URL as this process's Prefect sees it (its settings are read once, at
    import: the environment of a running process does not reach them)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if url is None:
        return temporary_settings(restore_defaults={PREFECT_API_URL})
    return temporary_settings(updates={PREFECT_API_URL: url})


def test_a_configured_server_that_does_not_answer_ends_the_run_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its UI could not be opened either: the run ends before it starts, exit 1, one line."""
    url = f"http://127.0.0.1:{_closed_port()}/api"
    monkeypatch.setenv("PREFECT_API_URL", url)
    out = tmp_path / "out"
    result = _ablate_run(_plan("auto", tmp_path), out, "--gate", "ui")
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"PREFECT_API_URL={url} does not answer" in line
    assert not out.exists()


def test_what_is_not_refused(tmp_path: Path) -> None:
    """An automatic gate (the flag overrides the plan), a gate already decided in the folder
    (a rerun asks nothing), and a UI gate with a server configured."""
    plan = plan_from_text(_plan("ui", tmp_path).read_text(), "plan.yaml")
    decided = tmp_path / "decided"
    decided.mkdir()
    (decided / GATE).write_text("{}")
    with _api_url(None):
        refuse_unanswerable_gate("auto", plan, tmp_path / "out")
        refuse_unanswerable_gate(None, plan, decided)
        with pytest.raises(GateUnanswerable):  # the same call, no server: refused
            refuse_unanswerable_gate("ui", plan, tmp_path / "out")
    with _api_url("http://127.0.0.1:4200/api"):
        refuse_unanswerable_gate("ui", plan, tmp_path / "out")
