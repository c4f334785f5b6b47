"""SIGTERM to `ablate run` mid-run: it passes the signal on to its slot workers, each running
run commits a checkpoint at its current step and is recorded as interrupted, and the campaign
exits 1 with one line; the rerun resumes those runs from their steps and ends bitwise equal to
an uninterrupted campaign (metrics and final weights)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from ablations.verify.folder import verify_folder
from tests.faults.conftest import Campaign, fault_plan, log_text

pytestmark = pytest.mark.slow


def _runs(campaign: Campaign) -> dict[str, dict[str, object]]:
    runs = json.loads((campaign.out / "manifest.json").read_text())["runs"]
    return {r["run_id"]: r for r in runs}


def _wait_for(condition: object, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)


@pytest.mark.long  # `make test-long`: two campaigns in subprocesses (about a minute)
def test_sigterm_mid_run_commits_its_step_and_the_rerun_is_bitwise_uninterrupted(
    tmp_path: Path,
) -> None:
    home = tmp_path / "prefect-home"
    reference = Campaign(tmp_path / "reference", fault_plan(), home)
    result = reference.run()
    assert result.returncode == 0, result.stdout + result.stderr

    campaign = Campaign(tmp_path / "c", fault_plan(), home)
    paused, go = campaign.cwd / "paused", campaign.cwd / "go"
    # The first main run to reach step 120 waits there (not a checkpoint step: every 50).
    process = campaign.start(ABLATE_FAULT_PAUSE=f"120:{paused}:{go}")
    _wait_for(paused.exists)
    process.send_signal(signal.SIGTERM)  # to `ablate run` alone: it passes it on
    _wait_for(lambda: "SIGTERM: the running runs commit" in log_text(campaign.logs[-1]), 60)
    go.touch()
    assert process.wait(timeout=60) == 1
    log = log_text(campaign.logs[-1])
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "SIGTERM received" in errors[0], log
    assert "Traceback" not in log

    records = [json.loads(p.read_text()) for p in campaign.finished()]
    interrupted = {
        r["run_id"]: r for r in records if (r.get("error") or {}).get("type") == "Interrupted"
    }
    assert interrupted, log
    steps = {}
    for run_id, record in interrupted.items():
        assert record["error"]["cause"] == "infrastructure"
        step = record["steps_done"]
        assert (
            f"at step {step}: its checkpoint at step {step} is committed"
            in record["error"]["message"]
        )
        assert record["checkpoint"]["uri"].endswith(f"step-{step:08d}")
        steps[run_id] = step
    assert 120 in steps.values()  # the paused run saved exactly where it was stopped

    result = campaign.run()
    assert result.returncode == 0, result.stdout + result.stderr
    got, expected = _runs(campaign), _runs(reference)
    assert got.keys() == expected.keys()
    for run_id, run in expected.items():
        assert (got[run_id]["status"], got[run_id]["metrics"]) == (run["status"], run["metrics"])
    for run_id, step in steps.items():
        record = json.loads((campaign.records / f"{run_id}.json").read_text())
        assert record["checkpoint"]["resumed_from_step"] == step
        model = Path("models") / f"{run_id}.pt"
        if (reference.out / model).exists():
            assert (campaign.out / model).read_bytes() == (reference.out / model).read_bytes()
    assert verify_folder(campaign.out, check_store=False).problems == []


def test_sigterm_while_the_workers_start_ends_the_campaign_at_once(tmp_path: Path) -> None:
    """Before any run: the campaign waits on its workers' warm-up (here a workload module that
    takes a minute to import). A SIGTERM then ends it in seconds, not after the warm-up or
    the grace period, and nothing is registered; the workers go with it."""
    campaign = Campaign(tmp_path / "c", fault_plan(), tmp_path / "prefect-home")
    marker = tmp_path / "importing"
    process = campaign.start(ABLATE_FAULT_SLOW_IMPORT=str(marker))
    _wait_for(lambda: marker.exists() and marker.read_text().endswith("\n"))
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert process.wait(timeout=60) == 1
    took = time.monotonic() - sent
    output = log_text(campaign.logs[-1])
    assert took < 10, (took, output)  # the grace is 30 s, the import 60 s
    assert "SIGTERM received" in output and "Traceback" not in output, output
    assert not (campaign.out / "registration.json").exists()
    for pid in map(int, marker.read_text().split()):
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), pid


def _state(pid: int) -> str:
    """A process's state letter (Z: a zombie, gone but not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
