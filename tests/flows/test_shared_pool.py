"""Two campaigns on one work pool at once, as two researchers share a cluster.

Everything real and on loopback (`tests.flows.work_pool`): a Prefect server on a throwaway
PostgreSQL database, the `gpus` pool with a second work queue of higher priority, three
workers posing as hosts of one device each (two `ablate worker --limit 1`, as the docs say; one
`prefect worker start --limit 2`, misconfigured), moto's S3 server as the store, and two
`ablate run --pool` campaigns of a command that mostly sleeps (`bench/sleepy_run.py`), started
together: `alpha` with `--queue urgent`, `beta` on the default queue, each with `--devices 2`,
so four runs want three devices.

What is checked from the server's flow runs and the hosts' records: both campaigns decide and
verify; no device slot ran two runs at once, not even on the host whose worker took two flow
runs at once (its slot lock made the second wait, saying so); the well-configured workers ran
one flow run at a time; neither campaign ever had more than its two flow runs out (submitted
and not over); each campaign's runs went to its own queue under its own tag; and the
campaigns ran side by side (neither waited for the other to finish: the one with priority
cannot take every device).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.flows.conftest import plan_text
from tests.flows.work_pool import POOL, Loopback, flow_runs
from tests.s3_server import BUCKET

DEVICES = 2
"""Each campaign's share of the pool: two of its three workers."""


def _plan(campaign: str, store: str, endpoint: str) -> dict[str, Any]:
    """Two variants x two seeds of a 3-second sleeping run: six flow runs per campaign
    (preflight, one pilot run, four main runs), short enough to run twice side by side."""
    command = [sys.executable, str(ROOT / "bench" / "sleepy_run.py"), "--seconds", "3"]
    return {
        "campaign": {
            "id": campaign,
            "question": "Does the learning rate matter?",
            "decision": "Keep the control unless a rate is usefully better.",
        },
        "workload": {"command": [*command, "--lr", "{lr}"], "steps": 10, "eval_every": 1},
        "control": {"params": {"lr": 0.01}},
        "factors": {"lr": {"category": "essential", "levels": [0.02]}},
        "seeds": [0, 1],
        "metric": {"name": "mse", "direction": "minimize", "threshold": 2.0, "useful_effect": 0.05},
        "stop_rules": {"quality": {"warmup_steps": 10}},
        "pilot": {"variants": ["control"], "steps": 1},
        "checkpoint": {"store": store, "endpoint_url": endpoint, "interval": {"steps": 5}},
    }


def _queues(api: str) -> dict[str, int]:
    request = urllib.request.Request(
        f"{api}/work_pools/{POOL}/queues/filter", b"{}", {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return {q["name"]: q["priority"] for q in json.loads(response.read())}


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (one ending as another starts: not both)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, change in events:  # at one instant the ends (-1) sort before the starts
        now += change
        most = max(most, now)
    return most


def test_most_at_once_counts_overlaps_only() -> None:
    assert most_at_once([(0, 1), (1, 2), (2, 3)]) == 1
    assert most_at_once([(0, 2), (1, 3), (1.5, 1.7)]) == 3
    assert most_at_once([]) == 0


@pytest.mark.slow
@pytest.mark.long  # `make test-long`: minutes
def test_two_campaigns_share_three_workers_each_within_its_share(
    loopback: Loopback, s3_endpoint: str, tmp_path: Path
) -> None:
    api = loopback.env["PREFECT_API_URL"]
    loopback.prefect("work-queue", "create", "urgent", "--pool", POOL, "--priority", "1")
    priorities = _queues(api)
    assert priorities["urgent"] < priorities["default"], priorities  # taken first
    # One device, two flow runs: the lock decides. Prefect's own worker, as a host that kept
    # `prefect worker start` would run it: both kinds of worker serve one pool. Alone at first,
    # it takes the two campaigns' first runs at once (with the other hosts up, they may take
    # one first and host-c never holds two).
    loopback.worker("host-c", "cpu", limit=2, program="prefect")
    queues = {"alpha": "urgent", "beta": "default"}
    campaigns, outs = {}, {}
    started = time.monotonic()
    for name, queue in queues.items():
        plan = tmp_path / f"{name}.yaml"
        plan.write_text(
            plan_text(_plan(name, f"s3://{BUCKET}/shared-{tmp_path.name}", s3_endpoint))
        )
        outs[name] = tmp_path / f"out-{name}"
        run = ["run", str(plan), "--out", str(outs[name]), "--pool", POOL]
        run += ["--devices", str(DEVICES)] + (["--queue", queue] if queue != "default" else [])
        campaigns[name] = loopback.start(
            [sys.executable, "-m", "ablations.cli", *run], loopback.env, f"{name}.log"
        )
    # host-c waits for its device's lock (saying why), then the other hosts join.
    waiting = "host-c: all 1 slot(s) busy; waiting for one"
    deadline = time.monotonic() + 300
    while waiting not in loopback.log("worker-host-c.log"):
        assert time.monotonic() < deadline, loopback.log("worker-host-c.log")[-4000:]
        time.sleep(0.2)
    loopback.worker("host-a", "cpu")
    loopback.worker("host-b", "cpu")
    for name, process in campaigns.items():
        assert process.wait(timeout=900) == 0, loopback.log(f"{name}.log")[-4000:]
    print(f"two campaigns on three workers: {time.monotonic() - started:.1f} s")

    verifying = {  # both at once: each re-evaluates its accepted runs in fresh processes
        name: subprocess.Popen(
            [sys.executable, "-m", "ablations.cli", "verify", str(out)],
            env=loopback.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, out in outs.items()
    }
    records: dict[str, dict[str, Any]] = {}
    for name, out in outs.items():
        output = loopback.log(f"{name}.log")
        assert "Traceback" not in output and "lost" not in output, output[-4000:]
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["decision_reached"].startswith("Keep the control"), manifest
        assert {r["status"] for r in manifest["runs"]} == {"accepted"}, manifest["runs"]
        records |= {
            f"{name}/{p.stem}": json.loads(p.read_text()) for p in (out / "records").glob("*")
        }
        said, _ = verifying[name].communicate(timeout=300)
        assert verifying[name].returncode == 0, said

    runs = [r for r in flow_runs(api) if r["parameters"].get("spec")]
    assert {r["state_type"] for r in runs} == {"COMPLETED"}, [r["state_type"] for r in runs]
    assert len(runs) == 12  # each campaign: preflight, one pilot run, four main runs

    # One run at a time per device slot (the host's slot locks), whichever campaign submitted
    # it and whatever its worker's limit; one flow run at a time per worker of `--limit 1`.
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        worker = run["labels"]["prefect.worker.name"]
        by_worker.setdefault(worker, []).append((_when(run["start_time"]), _when(run["end_time"])))
    at_once = {worker: most_at_once(spans) for worker, spans in by_worker.items()}
    print(f"flow runs at once per worker: {at_once}")
    # host-c took a second flow run while its device was busy: it waited for the lock
    assert at_once == {"host-a": 1, "host-b": 1, "host-c": 2}
    by_slot: dict[str, list[tuple[float, float]]] = {}
    for record in records.values():
        by_slot.setdefault(record["slot"], []).append((record["started_at"], record["ended_at"]))
    assert {s: most_at_once(spans) for s, spans in by_slot.items()} == dict.fromkeys(by_slot, 1)

    # Each campaign's share: never more than --devices flow runs out, from the submission
    # (queued included) to the end; each on its own queue, under its own tag.
    spans: dict[str, list[tuple[float, float]]] = {}
    for name, queue in queues.items():
        mine = [r for r in runs if f"campaign:{name}" in r["tags"]]
        assert len(mine) == 6 and {r["work_queue_name"] for r in mine} == {queue}
        assert all(r["name"].startswith(f"{name}: ") for r in mine), [r["name"] for r in mine]
        out = [(_when(r["created"]), _when(r["end_time"])) for r in mine]
        assert most_at_once(out) <= DEVICES, name
        spans[name] = [(_when(r["start_time"]), _when(r["end_time"])) for r in mine]
        running = most_at_once(spans[name])
        print(f"{name}: at most {most_at_once(out)} flow runs out, {running} running at once")
    # Side by side: at some instant each campaign had a run running (neither was starved
    # until the other finished).
    side_by_side = [a for a in spans["alpha"] for b in spans["beta"] if a[0] < b[1] and b[0] < a[1]]
    assert side_by_side, spans
