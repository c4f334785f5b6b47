"""A user's own script on a process work pool, with the restart check on (the default): the
preflight passes on its first attempt, the campaign decides and `ablate verify` passes.

The restart check of external code once deleted the preflight run's folder in the store, the
campaign's pointer to the accepted attempt with it, so every command, Lightning or Trainer
campaign on a pool stopped at the gate with `fix` (the suite's pool tests ran the built-in
workload only). Two workers, a short plan; one worker takes the same path (measured in the
closing note of the fix), and the Lightning and Trainer adapters share this check
(`tests/ablations/byo/test_restart.py` pins that the check leaves the pointer)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from tests.flows.conftest import plan_text
from tests.flows.work_pool import POOL, Loopback
from tests.s3_server import BUCKET

pytestmark = [pytest.mark.slow, pytest.mark.long]  # `make test-long`: minutes each


def docs_plan(store: str, endpoint: str) -> dict[str, Any]:
    """The plan docs/work-pools.md gives for a script of one's own, with this test's store."""
    page = (ROOT / "docs" / "work-pools.md").read_text()
    section = page.split("## Your own script on a pool", 1)[1]
    plan: dict[str, Any] = yaml.safe_load(section.split("```yaml", 1)[1].split("```", 1)[0])
    plan["checkpoint"].update(store=store, endpoint_url=endpoint)
    return plan


def run_campaign(loopback: Loopback, tmp_path: Path, s3_endpoint: str, workers: int) -> Path:
    plan = tmp_path / f"plan-{workers}.yaml"
    store = f"s3://{BUCKET}/own-{tmp_path.name}-{workers}"
    plan.write_text(plan_text(docs_plan(store, s3_endpoint)))
    out = tmp_path / f"out-{workers}"
    run = ["run", str(plan), "--out", str(out), "--pool", POOL, "--devices", str(workers)]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "ablations.cli", *run],
        cwd=ROOT, env=loopback.env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    output = result.stdout + result.stderr
    print(f"campaign on {workers} worker(s): {time.monotonic() - started:.1f} s")
    assert result.returncode == 0, output[-4000:]
    # every run, the preflight first, passed on its first attempt
    assert "Traceback" not in output and "lost" not in output, output[-4000:]
    return out


def test_a_command_campaign_decides_on_two_workers(
    loopback: Loopback, s3_endpoint: str, tmp_path: Path
) -> None:
    loopback.worker("host-a", "cpu")
    loopback.worker("host-b", "cpu")
    out = run_campaign(loopback, tmp_path, s3_endpoint, 2)
    preflight = json.loads((out / "preflight.json").read_text())
    assert preflight["passed"] and preflight["restart"] is None, preflight
    assert preflight["seconds"] > 0  # the check ran (three short runs of the script)
    gate = json.loads((out / "gate.json").read_text())
    assert gate["decision"] == "continue", gate
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["decision_reached"].startswith("Keep the control"), manifest["decision_reached"]
    assert {run["status"] for run in manifest["runs"]} == {"accepted"}
    slots = {json.loads(p.read_text())["slot"].split("/")[0] for p in (out / "records").glob("*")}
    assert slots == {"host-a", "host-b"}
    verify = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "verify", str(out)],
        env=loopback.env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
