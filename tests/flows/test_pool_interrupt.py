"""Ctrl-C on a campaign that runs on a work pool: it ends in seconds, submits nothing more, and
the runs out on the pool go on (a rerun with the same folder takes their results)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.flows.conftest import plan_text
from tests.flows.test_shared_pool import _plan
from tests.flows.test_work_pool import _wait_for
from tests.flows.work_pool import POOL, Loopback, flow_runs
from tests.s3_server import BUCKET


@pytest.mark.slow
@pytest.mark.long  # `make test-long`: a server, two workers and a campaign (about 2 minutes)
def test_ctrl_c_on_a_pool_campaign_ends_it_and_submits_nothing_more(
    loopback: Loopback, s3_endpoint: str, tmp_path: Path
) -> None:
    plan = _plan("cc", f"s3://{BUCKET}/interrupt-{tmp_path.name}", s3_endpoint)
    plan["workload"]["command"][3] = "20"  # each main run sleeps 20 s: interrupted mid-run
    (tmp_path / "plan.yaml").write_text(plan_text(plan))
    loopback.worker("host-a", "1")
    run = ["run", str(tmp_path / "plan.yaml"), "--out", str(tmp_path / "out"), "--pool", POOL,
           "--devices", "1"]  # fmt: skip
    campaign = loopback.start([sys.executable, "-m", "ablations.cli", *run], loopback.env, "c.log")
    api = loopback.env["PREFECT_API_URL"]

    def main_runs() -> list[dict[str, Any]]:
        return [
            r for r in flow_runs(api) if (r["parameters"].get("spec") or {}).get("phase") == "main"
        ]

    def running() -> dict[str, Any] | None:
        assert campaign.poll() is None, loopback.log("c.log")[-3000:]
        return next((r for r in main_runs() if r["state_type"] == "RUNNING"), None)

    _wait_for(running, 400, "a main run Running")
    submitted = len(main_runs())
    campaign.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends
    code = campaign.wait(timeout=60)
    said = loopback.log("c.log")
    assert code == 130, said[-3000:]
    lines = [line for line in said.splitlines() if line.startswith("interrupted (Ctrl-C)")]
    assert len(lines) == 1 and "go on on their hosts" in lines[0], said[-3000:]
    assert "Traceback" not in said
    (own,) = [r for r in flow_runs(api) if r["flow_id"] != main_runs()[0]["flow_id"]]
    assert own["state_type"] == "CANCELLED", own["state_type"]  # not Running for good
    time.sleep(3)  # the task threads that held runs submitted none of them
    assert len(main_runs()) == submitted

    # The rerun takes the interrupted run's result once it is in, and finishes the campaign.
    rerun = subprocess.run(
        [sys.executable, "-m", "ablations.cli", *run], env=loopback.env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert "decision:" in rerun.stdout
