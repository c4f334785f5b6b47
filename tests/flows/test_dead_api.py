"""A PREFECT_API_URL naming a server that does not answer: `ablate run`, `ablate notify` and
`ablate worker` end with one line saying so, exit 1, before anything starts (no `internal error`, no
traceback, no folder written)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO_PLAN
from tests.s3_server import free_port


@pytest.mark.parametrize("command", ["run", "notify", "worker"])
def test_a_dead_api_is_one_line_exit_1(tmp_path: Path, command: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/api"  # nothing listens there
    args = {
        "run": ["run", str(DEMO_PLAN), "--out", str(tmp_path / "out")],
        "notify": ["notify", "--webhook", "https://hooks.example.com/x"],
        "worker": ["worker", "--pool", "gpus", "--devices", "1"],
    }[command]
    env = {**os.environ, "PREFECT_API_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "ablations.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"the Prefect server at PREFECT_API_URL={url} does not answer" in lines[0]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
