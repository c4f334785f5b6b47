"""A campaign on a process work pool: a real server, two workers, one killed mid-run.

Everything on loopback: `prefect server start` on a throwaway PostgreSQL cluster (as a team
runs its server; `tests/postgres.py`), the pool and the `run/gpus` deployment
from prefect.yaml (`prefect deploy --all`), two `ablate worker` processes posing as two
GPU hosts (distinct ABLATE_HOST and lock folders), and the moto S3 server as the shared store.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.flows.conftest import plan_text
from tests.flows.work_pool import POOL, Loopback, kill_tree
from tests.s3_server import BUCKET

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,
]  # `make test-long`: minutes (a PostgreSQL cluster, a server, two workers)


@functools.cache
def _s3(endpoint: str) -> Any:
    """One client for the test's polling: building one costs a fifth of a CPU-second."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint)


def _store_keys(endpoint: str, prefix: str) -> set[str]:
    pages = _s3(endpoint).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {obj["Key"] for page in pages for obj in page.get("Contents", [])}


def _heartbeat(endpoint: str, key: str) -> dict[str, Any]:
    body = _s3(endpoint).get_object(Bucket=BUCKET, Key=key)["Body"]
    parsed: dict[str, Any] = json.loads(body.read())
    return parsed


def _wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _plant_a_forged_result(plan: Path, endpoint: str, prefix: str, key: str) -> str:
    """An unsigned result under a signed accepted pointer for the first pilot run, as someone
    who can write the store but not sign would leave it (the pointer replayed); its run id."""
    from ablations.plan.io import load_plan
    from ablations.plan.model import plan_hash
    from ablations.plan.runs import planned_runs
    from ablations.security.signing import sign

    loaded = load_plan(plan)
    run = next(r for r in planned_runs(loaded, plan_hash(loaded)) if r.phase == "pilot")
    base = f"{prefix}/tiny/{run.run_id}"
    pointer = {"attempt": "1-forged000000", "campaign_id": "tiny", "run_id": run.run_id}
    forged = {"run_id": run.run_id, "variant": run.variant, "seed": run.seed,
              "category": run.category, "phase": "pilot", "status": "accepted",
              "metrics": {"accuracy": 0.999}, "slot": "forged"}  # fmt: skip
    envelope = {"kind": "run", "campaign_id": "tiny", "plan_hash": plan_hash(loaded),
                "run_id": run.run_id, "variant": run.variant, "seed": run.seed,
                "phase": "pilot", "attempt": "1-forged000000",
                "result": json.dumps(forged)}  # fmt: skip
    s3 = _s3(endpoint)
    s3.put_object(Bucket=BUCKET, Key=f"{base}/accepted.json",
                  Body=json.dumps(sign(pointer, key.encode())).encode())  # fmt: skip
    s3.put_object(Bucket=BUCKET, Key=f"{base}/attempts/1-forged000000/outputs/result.json",
                  Body=json.dumps(envelope).encode())  # fmt: skip
    return run.run_id


@pytest.mark.parametrize("loss", ["killed", "stopped"])
def test_runs_land_on_both_workers_and_a_lost_workers_run_resumes_on_the_other(
    loopback: Loopback, s3_endpoint: str, tmp_path: Path, tiny_plan: dict[str, Any], loss: str
) -> None:
    """`killed`: the host's worker and its runs SIGKILLed, as a host losing power. `stopped`:
    `ablate worker` sent SIGTERM, as a service manager stops it: it stops its run in flight
    and exits at once, saying so."""
    tiny_plan["factors"] = {"width": {"category": "essential", "levels": [8]}}
    tiny_plan["seeds"] = [0]
    # Seconds of training per main run, committed every 300 steps: a kill lands mid-run.
    tiny_plan["workload"].update(steps=3000, eval_every=1500)
    tiny_plan["pilot"]["steps"] = 1500  # a pilot reaches the first evaluation (validate)
    prefix = f"pool-{tmp_path.name}"
    tiny_plan["checkpoint"] = {
        "store": f"s3://{BUCKET}/{prefix}",
        "endpoint_url": s3_endpoint,
        "interval": {"steps": 300},
    }
    plan = tmp_path / "plan.yaml"
    plan.write_text(plan_text(tiny_plan))
    out = tmp_path / "out"
    # Signed results, and a forged one already under a (replayed, genuinely signed) accepted
    # pointer of a pilot run: refused, and that run is submitted afresh.
    loopback.env["ABLATE_SIGNING_KEY"] = "pool-test-key"
    forged_run = _plant_a_forged_result(plan, s3_endpoint, prefix, "pool-test-key")
    loopback.worker("host-a", "cpu")
    loopback.worker("host-b", "cpu")
    run = ["run", str(plan), "--out", str(out), "--pool", POOL, "--devices", "2"]
    campaign = loopback.start(
        [sys.executable, "-m", "ablations.cli", *run, "--heartbeat-timeout", "12"],
        loopback.env,
        "campaign.log",
    )

    def running_main_run() -> tuple[str, str, str] | None:
        """A main run's attempt with a checkpoint of its own and no result yet: (run id, the
        attempt, its host). Keys: <prefix>/tiny/<run>/attempts/<a>/step-N/COMMIT.json."""
        keys = _store_keys(s3_endpoint, f"{prefix}/tiny/")
        for key in sorted(keys):
            parts = key.split("/")
            if len(parts) != 7 or parts[3] != "attempts" or parts[6] != "COMMIT.json":
                continue
            run_id, attempt = parts[2], parts[4]
            if run_id.startswith(("pilot-", "preflight-")):
                continue
            base = f"{prefix}/tiny/{run_id}/attempts/{attempt}"
            if f"{base}/outputs/result.json" not in keys and f"{base}/heartbeat.json" in keys:
                host = _heartbeat(s3_endpoint, f"{base}/heartbeat.json")["host"]
                return run_id, attempt, host
        assert campaign.poll() is None, loopback.log("campaign.log")[-4000:]
        return None

    # Guards against a hang, not timings: under a load of 10 on two cores the preflight, the
    # pilot and the first main commit took over 200 s (60 s unloaded).
    found = _wait_for(running_main_run, 420, "a main run's first checkpoint")
    victim, lost_attempt, victim_host = found
    worker = loopback.workers[victim_host]
    if loss == "killed":
        kill_tree(worker)
    else:
        worker.terminate()
        assert worker.wait(timeout=60) == 130, loopback.log(f"worker-{victim_host}.log")
        assert "1 run(s) in flight stopped" in loopback.log(f"worker-{victim_host}.log")
    survivor = ({"host-a", "host-b"} - {victim_host}).pop()

    assert campaign.wait(timeout=420) == 0, loopback.log("campaign.log")[-4000:]
    output = loopback.log("campaign.log")
    # the server kept its flow runs in PostgreSQL (the fixture's), never in a SQLite file
    assert not list((tmp_path / "prefect-home").glob("*.db")), "the server fell back to SQLite"
    assert "Traceback" not in output, output[-4000:]

    manifest = json.loads((out / "manifest.json").read_text())
    records = {p.stem: json.loads(p.read_text()) for p in (out / "records").glob("*.json")}
    assert set(records) == {r["run_id"] for r in manifest["runs"]}
    assert all(r["status"] in {"accepted", "rejected", "stopped"} for r in manifest["runs"])
    assert {r["slot"].split("/")[0] for r in records.values()} == {"host-a", "host-b"}

    assert records[forged_run]["status"] != "failed" and "forged" not in records[forged_run].get(
        "slot", ""
    )
    assert (
        f"{forged_run[:20]}" in output and "not signed" in output and "submitted afresh" in output
    )
    for record in records.values():  # every export hashed in the host's signed result
        assert set(record["export_sha256"]) == set(record["artifacts"].values())
        for relative, digest in record["export_sha256"].items():
            assert hashlib.sha256((out / relative).read_bytes()).hexdigest() == digest

    resumed = records[victim]
    assert resumed["slot"] == f"{survivor}/cpu#0"
    assert resumed["checkpoint"]["resumed_from_step"] > 0
    assert f"/{victim}/attempts/" in resumed["checkpoint"]["uri"]  # the accepted attempt's
    assert f"/attempts/{lost_attempt}/" not in resumed["checkpoint"]["uri"]
    assert resumed["steps_done"] == 3000
    for relative in resumed["artifacts"].values():  # fetched from the store into the folder
        assert (out / relative).stat().st_size > 0
