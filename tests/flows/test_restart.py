"""Kill `ablate run` mid-campaign, run it again: finished runs are skipped, the rest finish."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.flows.conftest import plan_text

pytestmark = pytest.mark.slow


def _cli_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)  # ephemeral mode, as a user runs it
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    return env


def test_killed_campaign_resumes_without_rerunning_finished_runs(
    tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    tiny_plan["workload"]["steps"] = 200
    tiny_plan["seeds"] = [0, 1, 2]
    tiny_plan["checkpoint"]["store"] = f"file://{tmp_path}/ckpt"
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(out)]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=_cli_env(tmp_path),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    records = out / "records"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        main_done = (
            [p for p in records.glob("*.json") if not p.name.startswith("pilot-")]
            if records.exists()
            else []
        )
        if len(main_done) >= 2 or process.poll() is not None:
            break
        time.sleep(0.2)
    assert process.poll() is None, "the campaign finished before it could be killed"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    before = {p.name: p.read_bytes() for p in records.glob("*.json")}
    assert before

    result = subprocess.run(
        command, cwd=ROOT, env=_cli_env(tmp_path), capture_output=True, text=True, timeout=400
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for name, content in before.items():  # finished runs were not executed again
        assert (records / name).read_bytes() == content
    manifest = json.loads((out / "manifest.json").read_text())
    assert all(r["status"] != "pending" for r in manifest["runs"])
    assert len(list(records.glob("*.json"))) == len(manifest["runs"])
