"""One Ctrl-C to `ablate run` (SIGINT to its whole process group, as a terminal sends it) in
the pilot: the campaign ends within the grace period with one line on stderr and exit 130, no
traceback, no gate recorded (the runs' interruption is no verdict on them); the run in flight
is recorded interrupted at its step, and the same command run again resumes it and finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.faults.conftest import Campaign, fault_plan

pytestmark = pytest.mark.slow

PAUSE_AT = 30
"""The pilot's first run to reach this step waits there (the preflight's runs stop at 6)."""


def _wait_for(condition: object, process: subprocess.Popen[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert process.poll() is None, "the campaign ended before the Ctrl-C"
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)


def test_one_ctrl_c_ends_the_campaign_in_one_line_and_the_rerun_resumes(tmp_path: Path) -> None:
    plan = fault_plan(pilot={"steps": 40})
    plan["workload"].update(steps=80, eval_every=20)
    plan["checkpoint"]["interval"] = {"steps": 20}
    campaign = Campaign(tmp_path / "c", plan, tmp_path / "prefect-home")
    paused, go = campaign.cwd / "paused", campaign.cwd / "go"
    env = campaign.env(ABLATE_FAULT_PAUSE=f"{PAUSE_AT}:{paused}:{go}")
    process = subprocess.Popen(
        campaign.command(), cwd=campaign.cwd, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_for(paused.exists, process)
    os.killpg(process.pid, signal.SIGINT)  # the whole group: the workers get it too
    sent = time.monotonic()
    threading_go = _release_after(go, 1.0)  # the paused step ends; the run sees the request
    stdout, stderr = process.communicate(timeout=60)
    took = time.monotonic() - sent
    threading_go.join()
    assert process.returncode == 130, stdout + stderr
    assert took < 20, (took, stderr)  # the grace is 30 s; the run stops at its next step
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: "), stderr
    assert "rerun the same command to resume" in lines[0]
    assert "Traceback" not in stdout + stderr
    assert not (campaign.out / "gate.json").exists()
    records = [json.loads(p.read_text()) for p in campaign.finished()]
    interrupted = [r for r in records if (r.get("error") or {}).get("type") == "Interrupted"]
    assert interrupted and all(r["phase"] == "pilot" for r in records), records
    assert all(r["status"] != "failed" or r in interrupted for r in records), records
    assert {r["steps_done"] for r in interrupted} >= {PAUSE_AT}

    rerun = campaign.run()
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    gate = json.loads((campaign.out / "gate.json").read_text())
    assert gate["decision"] in ("continue", "trim"), gate
    for record in interrupted:
        resumed = json.loads((campaign.records / f"{record['run_id']}.json").read_text())
        assert resumed["checkpoint"]["resumed_from_step"] == record["steps_done"]


def _release_after(go: Path, seconds: float):  # type: ignore[no-untyped-def]
    import threading

    timer = threading.Timer(seconds, go.touch)
    timer.start()
    return timer
