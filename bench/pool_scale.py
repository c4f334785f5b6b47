"""A campaign on a work pool of 1 to 16 hosts: throughput against the ideal, the cost per run.

    .venv/bin/python bench/pool_scale.py [--databases sqlite postgres] [--workers 1 2 4 8 16]
        [--runs 200] [--run-seconds 30] [--query-seconds 10] [--worker ablate|prefect]
        [--json results.json]

Everything on loopback, as `tests/flows/test_work_pool.py` starts it (`tests.flows.work_pool`):
for each database and worker count, a fresh Prefect server (API only) on SQLite in its home
or on a fresh database of a throwaway PostgreSQL cluster (`tests.postgres`, flushing to disk as
a production server does), the `gpus` pool and its deployment, moto's S3 server as the shared
store, and N `ablate worker --limit 1` processes posing as hosts of one CPU device each
(`--worker prefect`: `prefect worker start`; both poll every `--query-seconds`). The campaign
(`ablate run --pool gpus --devices N`, signed results) runs `bench/sleepy_run.py`: each run
sleeps `--run-seconds` in 10 steps, reports (and evaluates) at each and checkpoints every 5, so
the cores stay free for the orchestration being measured. 10 variants x runs/10 seeds in the
main phase, after a preflight and a pilot of one step of the control.

Per size, for the main phase (from its first submission to its last accepted record):

- runs/min against the ideal: N workers x (the sleep the runs did) back to back;
- the overhead per run (median): submit to start (the flow run's creation to its Running
  state: the worker's poll, the process's start), the time the run's process spent around
  its sleep, and finish to accepted (the flow run's end to its record in the folder); beside
  it, submit to start split at the Pending state (`pickup_s`: the worker's poll; `starting_s`:
  the worker's job, the process's start, the engine up to Running) and each slot's idle time
  between two runs (`idle_between_runs_s`: one flow run's end to the next one's Running on the
  same host's slot; `end_to_next_submit_s`: how much of it passed before the campaign
  submitted the run that came next there);
- CPU seconds per flow run: the Prefect server's process tree, PostgreSQL's, the campaign
  process's, and the hosts' (each worker with the flow-run processes it started: the flow
  run's own Python, its slot worker, the command), over the whole campaign;
- errors: `database is locked`, HTTP 5xx and client retries in every log;
- the campaign process's peak memory (VmHWM).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' loopback server and PostgreSQL cluster

import yaml  # noqa: E402

from tests.flows.work_pool import POOL, Loopback, _descendants, flow_runs, serve  # noqa: E402
from tests.postgres import postgres_cluster  # noqa: E402
from tests.s3_server import BUCKET, DUMMY_CREDENTIALS, free_port  # noqa: E402

VARIANTS = 10  # the control and 9 learning rates: main runs = VARIANTS x seeds
STEPS = 10
ERRORS = ("database is locked", "5xx", "retries")
SERVER_ERROR = ('HTTP/1.1" 50', "status code 50", " 500 ", "Server error '50")
"""How a 5xx shows: an access log line, the client's retry warning, an error line, the
client's exception (`PrefectHTTPStatusError`). Counted per log line, as is a lock."""
RETRY = "Another attempt will be made"
"""The Prefect client's line when it retries a request (a 5xx, 429 or a dropped connection)."""


def plan(store: str, endpoint: str, runs: int, run_seconds: float) -> dict[str, Any]:
    seeds = max(1, runs // VARIANTS)
    levels = [round(0.01 * (i + 2), 3) for i in range(VARIANTS - 1)]
    return {
        "campaign": {"id": "scale", "question": "Does lr matter?", "decision": "Keep it."},
        "workload": {
            "command": [
                sys.executable,
                str(ROOT / "bench" / "sleepy_run.py"),
                "--seconds",
                str(run_seconds),
                "--lr",
                "{lr}",
            ],
            "steps": STEPS,
            "eval_every": 1,  # a pilot of one step evaluates (the gate reads it)
        },
        "control": {"params": {"lr": 0.01}},
        "factors": {"lr": {"category": "essential", "levels": levels}},
        "seeds": list(range(seeds)),
        "metric": {"name": "mse", "direction": "minimize", "threshold": 2.0, "useful_effect": 0.05},
        "stop_rules": {"quality": {"warmup_steps": STEPS}},
        "pilot": {"variants": ["control"], "steps": 1},  # the main phase is what is measured
        "checkpoint": {"store": store, "endpoint_url": endpoint, "interval": {"steps": 5}},
    }


def cpu_seconds(pid: int) -> float:
    """User and system CPU of `pid` and its processes, reaped children included."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for each in _descendants(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def postmaster(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def pending_at(api: str, flow_run_id: str) -> float | None:
    """When the flow run went Pending (a worker took it), from its state history."""
    url = f"{api}/flow_run_states/?flow_run_id={flow_run_id}"
    with urllib.request.urlopen(url, timeout=60) as response:
        states = json.loads(response.read())
    stamps = [when(s["timestamp"]) for s in states if s["type"] == "PENDING"]
    return min(stamps) if stamps else None


def count_errors(logs: list[Path]) -> dict[str, int]:
    counts = dict.fromkeys(ERRORS, 0)
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            if "database is locked" in line:
                counts["database is locked"] += 1
            if any(code in line for code in SERVER_ERROR):
                counts["5xx"] += 1
            if RETRY in line:
                counts["retries"] += 1
    return counts


@contextmanager
def moto() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    os.environ.update(DUMMY_CREDENTIALS)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        import boto3

        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.stop()


def measure(
    loop: Loopback, folder: Path, endpoint: str, workers: int, args: argparse.Namespace,
    database_pid: int | None,
) -> dict[str, Any]:  # fmt: skip
    loop.env["PREFECT_WORKER_QUERY_SECONDS"] = str(args.query_seconds)
    loop.env["ABLATE_SIGNING_KEY"] = "bench-key"
    for number in range(workers):
        loop.worker(f"host-{number}", "cpu", program=args.worker)
    # A team's hosts run their workers before anyone starts a campaign: measure from there
    # (16 workers importing Prefect at once, and `ablate worker`'s fork servers, are a minute
    # of both cores here, which would land on the campaign's first runs).
    deadline = time.monotonic() + 600
    while not all("started!" in loop.log(f"worker-host-{n}.log") for n in range(workers)):
        assert time.monotonic() < deadline, "the workers did not start within 10 minutes"
        time.sleep(1.0)
    path = folder / "plan.yaml"
    store = f"s3://{BUCKET}/scale-{folder.name}"
    path.write_text(yaml.safe_dump(plan(store, endpoint, args.runs, args.run_seconds)))
    out = folder / "out"
    server = loop.processes[0]
    server_cpu = cpu_seconds(server.pid)
    database_cpu = cpu_seconds(database_pid) if database_pid else 0.0
    load_before = os.getloadavg()
    started = time.time()
    campaign = loop.start(
        [sys.executable, "-m", "ablations.cli", "run", str(path), "--out", str(out),
         "--pool", POOL, "--devices", str(workers)],
        loop.env, "campaign.log",
    )  # fmt: skip
    hosts = [p.pid for p in loop.workers.values()]
    hosts_cpu = sum(cpu_seconds(pid) for pid in hosts)
    peak_kib, campaign_cpu = 0, 0.0
    while campaign.poll() is None:
        try:
            status = Path(f"/proc/{campaign.pid}/status").read_text()
            peak_kib = max(peak_kib, int(status.split("VmHWM:")[1].split()[0]))
            campaign_cpu = cpu_seconds(campaign.pid)  # the last reading before it exits
        except (OSError, IndexError):
            pass
        time.sleep(1.0)
    # Each worker reaps its flow runs' processes (their slot workers and commands below
    # them): their CPU is in the worker's children's time.
    hosts_cpu = sum(cpu_seconds(pid) for pid in hosts) - hosts_cpu
    wall = time.time() - started
    if campaign.returncode != 0:  # a figure too (SQLite at 16 hosts): why, and the errors
        lines = loop.log("campaign.log").strip().splitlines()
        return {
            "workers": workers,
            "failed": lines[-1][:300] if lines else "no output",
            "campaign_wall_s": round(wall, 1),
            "errors": count_errors(sorted(folder.glob("*.log"))),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        }
    server_cpu = cpu_seconds(server.pid) - server_cpu
    database_cpu = (cpu_seconds(database_pid) - database_cpu) if database_pid else 0.0

    records = {p.stem: json.loads(p.read_text()) for p in (out / "records").glob("*.json")}
    accepted_at = {p.stem: p.stat().st_mtime for p in (out / "records").glob("*.json")}
    api = loop.env["PREFECT_API_URL"]
    runs = [r for r in flow_runs(api) if r["parameters"].get("kind") == "run"]
    main = [r for r in runs if r["parameters"]["spec"]["phase"] == "main"]
    pause = args.run_seconds / STEPS
    submit_to_start, around, finish_to_accepted = [], [], []
    pickup, starting = [], []  # submit to start, split at the worker's Pending
    slept = 0.0
    for run in main:
        run_id = run["parameters"]["spec"]["run_id"]
        record = records[run_id]
        trained = record["steps_done"] - ((record.get("checkpoint") or {}).get(
            "resumed_from_step") or 0)  # fmt: skip
        slept += trained * pause
        if run["state_type"] != "COMPLETED":
            continue  # a lost attempt: its resubmission is the one measured
        start, end = when(run["start_time"]), when(run["end_time"])
        submit_to_start.append(start - when(run["created"]))
        pending = pending_at(api, run["id"])
        if pending is not None:
            pickup.append(pending - when(run["created"]))
            starting.append(start - pending)
        around.append(end - start - trained * pause)
        finish_to_accepted.append(accepted_at[run_id] - end)
    first = min(when(r["created"]) for r in main)
    last = max(accepted_at[r["parameters"]["spec"]["run_id"]] for r in main)
    main_ids = {r["parameters"]["spec"]["run_id"] for r in main}
    # Each host's device between two runs: from one flow run's end to the next one's Running
    # state on the same slot, and of that, the part before the next run was submitted.
    by_slot: dict[str, list[dict[str, Any]]] = {}
    for run in main:
        if run["state_type"] == "COMPLETED":
            slot = records[run["parameters"]["spec"]["run_id"]].get("slot") or "?"
            by_slot.setdefault(slot, []).append(run)
    idle, end_to_submit = [], []
    for ran in by_slot.values():
        ran.sort(key=lambda r: when(r["start_time"]))
        for before, after in itertools.pairwise(ran):
            idle.append(when(after["start_time"]) - when(before["end_time"]))
            end_to_submit.append(when(after["created"]) - when(before["end_time"]))
    phase_wall = last - first
    logs = sorted(folder.glob("*.log"))
    return {
        "workers": workers,
        "main_runs": len(main_ids),
        "flow_runs": len(runs),
        "campaign_wall_s": round(wall, 1),
        "main_phase_s": round(phase_wall, 1),
        "runs_per_min": round(60 * len(main_ids) / phase_wall, 2),
        "ideal_runs_per_min": round(60 * len(main_ids) / (slept / workers), 2),
        "of_ideal": round((slept / workers) / phase_wall, 3),
        "submit_to_start_s": round(statistics.median(submit_to_start), 2),
        "pickup_s": round(statistics.median(pickup), 2) if pickup else None,
        "starting_s": round(statistics.median(starting), 2) if starting else None,
        "around_run_s": round(statistics.median(around), 2),
        "finish_to_accepted_s": round(statistics.median(finish_to_accepted), 2),
        "idle_between_runs_s": round(statistics.median(idle), 2) if idle else None,
        "end_to_next_submit_s": round(statistics.median(end_to_submit), 2)
        if end_to_submit
        else None,
        "overhead_per_run_s": round(
            statistics.median(
                a + b + c
                for a, b, c in zip(submit_to_start, around, finish_to_accepted, strict=True)
            ),
            2,
        ),
        "server_cpu_s_per_run": round(server_cpu / len(runs), 3),
        "database_cpu_s_per_run": round(database_cpu / len(runs), 3),
        "campaign_cpu_s_per_run": round(campaign_cpu / len(runs), 3),
        "hosts_cpu_s_per_run": round(hosts_cpu / len(runs), 3),
        "errors": count_errors(logs),
        "campaign_peak_mib": round(peak_kib / 1024),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "postgres"],
                        default=["sqlite", "postgres"])  # fmt: skip
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--runs", type=int, default=200, help="main runs (10 variants x seeds)")
    parser.add_argument("--run-seconds", type=float, default=30.0, help="sleep per run")
    parser.add_argument(
        "--query-seconds",
        type=float,
        default=10.0,
        help="PREFECT_WORKER_QUERY_SECONDS of the workers (Prefect's default: 10)",
    )
    parser.add_argument(
        "--worker",
        choices=["ablate", "prefect"],
        default="ablate",
        help="each host's worker: `ablate worker` (runs forked from a warm server) or "
        "`prefect worker start` (an interpreter per run)",
    )
    parser.add_argument("--json", type=Path, help="append each size's figures here (JSON lines)")
    parser.add_argument("--keep", action="store_true", help="keep the folders (logs) for a look")
    args = parser.parse_args()
    os.environ.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    with ExitStack() as stack:
        endpoint = stack.enter_context(moto())
        cluster = (
            stack.enter_context(postgres_cluster(durable=True))
            if "postgres" in args.databases
            else None
        )
        for database in args.databases:
            for workers in args.workers:
                folder = Path(tempfile.mkdtemp(prefix=f"pool-scale-{database}-{workers}-"))
                url, pid = None, None
                if database == "postgres":
                    assert cluster is not None
                    url = cluster.create_database(f"scale_{workers}_{folder.name[-8:]}".lower())
                    pid = postmaster(cluster.data_dir)
                with serve(folder, url) as loop:
                    figures = measure(loop, folder, endpoint, workers, args, pid)
                figures = {"database": database, "run_seconds": args.run_seconds,
                           "query_seconds": args.query_seconds, "worker": args.worker,
                           **figures}  # fmt: skip
                print(json.dumps(figures), flush=True)
                if args.json:
                    with args.json.open("a") as out:
                        out.write(json.dumps(figures) + "\n")
                if args.keep:
                    print(f"  logs: {folder}", flush=True)
                else:
                    subprocess.run(["rm", "-rf", str(folder)], check=False)


if __name__ == "__main__":
    main()
