"""The S3 server stopped and restarted in the middle of a run: the saves are retried and the
campaign completes. It runs with distinctive dummy credentials, which must never appear in the
manifest, the report, any file of the output folder, Prefect's home or the campaign's output.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.faults.conftest import Campaign, fault_plan
from tests.s3_server import free_port

# A store cut mid-run and its retries (35 s on 2 cores): `make test-long`, beside the other
# store outages in test_infrastructure; CI runs it after `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.long]

KEY_ID, SECRET = "AKIAFAULTSUITE9DUMMY", "dummy-secret-fault-suite-9-do-not-leak"
BUCKET = "ablate-faults"


def _server(port: int) -> object:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET, region_name="us-east-1",
    ).create_bucket(Bucket=BUCKET)  # fmt: skip
    return server


def test_s3_outage_mid_run_is_retried_and_no_credential_leaks(tmp_path: Path) -> None:
    port = free_port()
    server = _server(port)
    plan = fault_plan(
        checkpoint={
            "store": f"s3://{BUCKET}/campaigns",
            "endpoint_url": f"http://127.0.0.1:{port}",
            "interval": {"steps": 50},
        },
        resources={"devices": 1},  # one slot: nothing else starts while the store is down
    )
    campaign = Campaign(tmp_path / "c", plan, tmp_path / "prefect-home", own_server=True)
    paused, go = tmp_path / "paused", tmp_path / "go"
    credentials = {
        "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1", "ABLATE_FAULT_PAUSE": f"120:{paused}:{go}",
    }  # fmt: skip
    process = campaign.start(**credentials)
    try:
        deadline = time.monotonic() + 240
        while not paused.exists():  # a main run has committed steps 50 and 100, now at 120
            assert process.poll() is None and time.monotonic() < deadline, "never paused"
            time.sleep(0.05)
        server.stop()  # type: ignore[attr-defined]
        go.touch()  # the run goes on; its save at step 150 meets a dead endpoint
        time.sleep(2.5)
        server = _server(port)  # back (empty, as after a restore), within the saver's retries
        assert process.wait(timeout=240) == 0, Path(campaign.logs[-1]).read_text()
    finally:
        if process.poll() is None:
            process.kill()
        server.stop()  # type: ignore[attr-defined]
    import json

    output = Path(campaign.logs[-1]).read_text()
    assert "Traceback" not in output
    manifest = json.loads((campaign.out / "manifest.json").read_text())
    runs = manifest["runs"]
    assert all(r["status"] not in ("pending", "failed") for r in runs), output
    saved = [r for r in runs if r["status"] != "trimmed" and r["phase"] == "main"]
    assert saved and all(r["checkpoint"]["failures"] == 0 for r in saved if r.get("checkpoint"))
    assert any("s3://" in (r["checkpoint"].get("uri") or "") for r in saved if r["checkpoint"])

    leaks = []
    for folder in (campaign.out, campaign.prefect_home, campaign.cwd):
        for path in folder.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                if KEY_ID.encode() in data or SECRET.encode() in data:
                    leaks.append(str(path))
    assert leaks == []
    assert KEY_ID not in output and SECRET not in output
