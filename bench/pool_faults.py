"""Faults at scale: a pool campaign undisturbed, then once under each fault, checked against it.

    .venv/bin/python bench/pool_faults.py [--faults workers server postgres s3]
        [--workers 6] [--runs 20] [--run-seconds 8] [--server-down-seconds 10]
        [--postgres-down-seconds 5] [--s3-down-seconds 30] [--json results.json] [--keep]

The set-up is `bench/pool_scale.py`'s (a Prefect server on a throwaway PostgreSQL cluster,
moto's S3 server as the store, N `prefect worker start` processes posing as hosts, the
campaign running `bench/sleepy_run.py`), except that the store is reached through a
loopback proxy that can cut it (`tests/fault_proxy.py`). Once a first round of main runs has
been accepted (so runs are in flight), one fault:

- `workers`: 4 of the N workers killed at once with their flow runs' processes (SIGKILL, as
  hosts losing power), and 4 new workers started under new names;
- `server`: the Prefect server stopped (SIGTERM), kept down `--server-down-seconds`, and
  started again on the same port and database;
- `postgres`: PostgreSQL stopped immediately (as a crash), kept down `--postgres-down-seconds`,
  and started again on the same port and data;
- `s3`: every connection to the store cut for `--s3-down-seconds`, then let through again;
- `server-gone`: the Prefect server stopped for good: the campaign must end within its
  outage (`ABLATE_API_OUTAGE_SECONDS`, 30 s here) plus `GONE_SLACK_S`, exit 1, with one
  `error: the Prefect server ...` line, its last.

Each campaign is checked, and the checks printed: it exits 0; its decision (the report's
sentence, the gate's decision and every look's verdicts) equals the undisturbed campaign's;
each planned (variant, seed) is one row of runs.csv, accepted, and one trial of the ledger;
`ablate verify DIR` passes; no flow run is left Scheduled, Pending or Running on the server
(one whose result the campaign took from the store is set Completed: `flows/settle.py`). The
line also says how many attempts were lost and resubmitted, how many flow runs were settled
so, and the Prefect client's retries and the 5xx answers seen in every log.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' loopback server, PostgreSQL cluster and proxy
sys.path.insert(0, str(ROOT / "bench"))

import yaml  # noqa: E402
from pool_scale import count_errors, moto, plan  # noqa: E402

from flows.api_outage import API_OUTAGE_ENV  # noqa: E402
from flows.settle import FROM_THE_STORE  # noqa: E402
from tests.fault_proxy import FaultProxy  # noqa: E402
from tests.flows.work_pool import (  # noqa: E402
    POOL,
    Loopback,
    _descendants,
    flow_runs,
    kill_tree,
    serve,
)
from tests.postgres import PostgresCluster, postgres_cluster  # noqa: E402
from tests.s3_server import BUCKET  # noqa: E402

FAULTS = ("workers", "server", "postgres", "s3", "server-gone")
GONE_OUTAGE_S = 30
"""`server-gone`: the outage the campaign rides through (ABLATE_API_OUTAGE_SECONDS) before
its one line: short, so the bench does not wait the default 120 s."""
GONE_SLACK_S = 45
"""`server-gone`: what the end may take past the outage: the last backoff of a call riding it
(at most 15 s), its last try, the engine's one refused report of the failed flow, the exit
(29 to 37 s in all past the fault for a 30 s outage on the 2-core machine at load 6 to 22:
docs/performance.md, Faults at scale)."""
KILLED = 4
"""Workers killed at once (the issue's 4 of 16 hosts)."""
BUSY_WAIT_S = 120.0
"""How long the `workers` fault waits for 4 hosts to be running a flow run each."""
CAMPAIGN_TIMEOUT_S = 1200.0
"""A campaign that has not ended by then hangs: killed, and the fault reported failed."""
RIDDEN = "into an outage of at most"
"""The line of each retried store or API call (`ablations.checkpoint.outage.ride_out`)."""
LOST = "lost: "
"""How the campaign says an attempt was lost (`flows/pool.py`), before resubmitting it."""


def decision(out: Path) -> dict[str, Any]:
    """What the campaign decided: the report's sentence, the gate's decision, the looks."""
    manifest = json.loads((out / "manifest.json").read_text())
    looks = json.loads((out / "looks.json").read_text())["looks"]
    return {
        "decision_reached": manifest.get("decision_reached"),
        "gate": (manifest.get("gate") or {}).get("decision"),
        "verdicts": [{j["variant"]: j["verdict"] for j in look["judgements"]} for look in looks],
    }


def counted(out: Path) -> list[str]:
    """Problems with the runs' count: each planned run (variant, seed, phase) must be one
    accepted row of runs.csv and one trial of the ledger."""
    manifest = json.loads((out / "manifest.json").read_text())
    planned = Counter((r["variant"], str(r["seed"]), r["phase"]) for r in manifest["runs"])
    with (out / "runs.csv").open() as rows:
        table = list(csv.DictReader(rows))
    rows_of = Counter((r["variant"], r["seed"], r["phase"]) for r in table)
    problems = [f"runs.csv: {k} {n} times" for k, n in rows_of.items() if n != 1]
    problems += [f"runs.csv: {k} missing" for k in planned if k not in rows_of]
    problems += [
        f"runs.csv: {r['variant']} seed {r['seed']} {r['status']}"
        for r in table
        if r["status"] != "accepted"
    ]
    with sqlite3.connect(out / "ledger.db") as ledger:
        ids = [
            json.loads(v)
            for (v,) in ledger.execute(
                "select value_json from trial_user_attributes where key = 'run_id'"
            )
        ]
    trials = Counter(ids)
    problems += [f"ledger: {i} {n} trials" for i, n in trials.items() if n != 1]
    problems += [
        f"ledger: {r['run_id']} no trial" for r in manifest["runs"] if r["run_id"] not in trials
    ]
    return problems


def inject(fault: str, loop: Loopback, cluster: PostgresCluster, proxy: FaultProxy,
           args: argparse.Namespace) -> str:  # fmt: skip
    """Do the fault; what was done, in words."""
    if fault == "workers":
        # Hosts with a flow run's process under them (a run in flight) first: a kill must
        # lose runs, not idle hosts. Under load a picked run takes a while to start.
        deadline = time.monotonic() + BUSY_WAIT_S
        while True:
            busy = [h for h, p in loop.workers.items() if len(_descendants(p.pid)) > 1]
            if len(busy) >= KILLED or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        victims = (busy + [h for h in loop.workers if h not in busy])[:KILLED]
        for host in victims:  # at once: the kills first, the replacements after
            kill_tree(loop.workers.pop(host))
        for number in range(len(victims)):
            loop.worker(f"spare-{number}", "cpu")
        running = len(set(victims) & set(busy))
        return f"killed {', '.join(victims)} ({running} running a flow run); {len(victims)} spares"
    if fault == "server":
        loop.stop_server()
        time.sleep(args.server_down_seconds)
        started = time.monotonic()
        loop.start_server("server-restarted.log")
        return f"server down {args.server_down_seconds:g} s, healthy {time.monotonic() - started:.0f} s after its start"  # noqa: E501
    if fault == "server-gone":
        loop.stop_server()
        return "server stopped for good"
    if fault == "postgres":
        cluster.restart(down_s=args.postgres_down_seconds)
        return f"PostgreSQL down {args.postgres_down_seconds:g} s"
    proxy.down()
    time.sleep(args.s3_down_seconds)
    proxy.up()
    return f"S3 unreachable {args.s3_down_seconds:g} s"


def campaign(fault: str | None, args: argparse.Namespace, cluster: PostgresCluster,
             proxy: FaultProxy) -> dict[str, Any]:  # fmt: skip
    """One campaign on a fresh server and database, with `fault` (None: undisturbed)."""
    folder = Path(tempfile.mkdtemp(prefix=f"pool-faults-{fault or 'none'}-"))
    url = cluster.create_database(f"faults_{fault or 'none'}_{folder.name[-8:]}".lower())
    with serve(folder, url) as loop:
        loop.env["ABLATE_SIGNING_KEY"] = "bench-key"
        if fault == "server-gone":
            loop.env[API_OUTAGE_ENV] = str(GONE_OUTAGE_S)
        for number in range(args.workers):
            loop.worker(f"host-{number}", "cpu")
        path, out = folder / "plan.yaml", folder / "out"
        store = f"s3://{BUCKET}/faults-{folder.name}"
        path.write_text(yaml.safe_dump(plan(store, proxy.endpoint, args.runs, args.run_seconds)))
        started = time.monotonic()
        process = loop.start(
            [sys.executable, "-m", "ablations.cli", "run", str(path), "--out", str(out),
             "--pool", POOL, "--devices", str(args.workers)],
            loop.env, "campaign.log",
        )  # fmt: skip
        done, injected_at = "", 0.0
        if fault is not None:
            # A first round of main runs accepted (the pilot's one run, the preflight's
            # none): the next round is in flight.
            while len(list((out / "records").glob("*.json"))) < 1 + args.workers:
                if process.poll() is not None or time.monotonic() - started > CAMPAIGN_TIMEOUT_S:
                    break
                time.sleep(0.5)
            else:
                injected_at = time.monotonic() - started
                done = f"at {injected_at:.0f} s: {inject(fault, loop, cluster, proxy, args)}"
        try:
            code = process.wait(timeout=max(1.0, CAMPAIGN_TIMEOUT_S - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            kill_tree(process)
            code = -9
        wall = time.monotonic() - started
        log = loop.log("campaign.log")
        figures: dict[str, Any] = {
            "fault": fault or "none",
            "injected": done,
            "exit": code,
            "campaign_wall_s": round(wall, 1),
            "after_fault_s": round(wall - injected_at, 1) if done else None,
            "attempts_lost": log.count(LOST),
            "errors": count_errors(sorted(folder.glob("*.log"))),
            "retried_calls": sum(
                path.read_text(errors="replace").count(RIDDEN) for path in folder.glob("*.log")
            ),
        }
        if code == 0:  # the server is up: what the UI shows of each flow run now
            runs = flow_runs(loop.env["PREFECT_API_URL"])
            settled = FROM_THE_STORE.split("{")[0]
            figures["flow_runs_unfinished"] = sum(
                1 for r in runs if r["state_type"] in ("SCHEDULED", "PENDING", "RUNNING")
            )
            figures["flow_runs_settled_from_store"] = sum(
                1 for r in runs if settled in ((r.get("state") or {}).get("message") or "")
            )
        if code != 0:
            lines = log.strip().splitlines()
            figures["failed"] = lines[-1][:400] if lines else "no output"
        if code == 0:
            verify = subprocess.run(
                [sys.executable, "-m", "ablations.cli", "verify", str(out)],
                cwd=ROOT, env=loop.env, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            figures["verify"] = verify.returncode
            if verify.returncode != 0:
                figures["verify_output"] = (verify.stdout + verify.stderr)[-1500:]
            figures["decision"] = decision(out)
            figures["count_problems"] = counted(out)
    if args.keep:
        figures["folder"] = str(folder)
    else:
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    return figures


def gone_checks(figures: dict[str, Any]) -> dict[str, bool]:
    """A server gone for good: exit 1 with one line naming it, its last, within the outage
    ridden through plus `GONE_SLACK_S`."""
    line = figures.get("failed", "")
    return {
        "exit 1": figures["exit"] == 1,
        "one line": line.startswith("error: the Prefect server"),
        "bounded": (figures["after_fault_s"] or 0) < GONE_OUTAGE_S + GONE_SLACK_S,
    }


def _reference(path: Path) -> dict[str, Any] | None:
    """The decision of the last undisturbed campaign recorded in a --json file."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    found = [line["decision"] for line in lines if line["fault"] == "none" and "decision" in line]
    return found[-1] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--workers", type=int, default=6, help="hosts (more than 4)")
    parser.add_argument("--runs", type=int, default=20, help="main runs (10 variants x seeds)")
    parser.add_argument("--run-seconds", type=float, default=8.0, help="sleep per run")
    parser.add_argument("--server-down-seconds", type=float, default=10.0)
    parser.add_argument("--postgres-down-seconds", type=float, default=5.0)
    parser.add_argument("--s3-down-seconds", type=float, default=30.0)
    parser.add_argument("--json", type=Path, help="append each campaign's figures (JSON lines)")
    parser.add_argument(
        "--reference",
        type=Path,
        help="take the undisturbed campaign's decision from this --json file (same sizes) "
        "instead of running it again",
    )
    parser.add_argument("--keep", action="store_true", help="keep the folders (logs) for a look")
    args = parser.parse_args()
    if args.workers <= KILLED and "workers" in args.faults:
        parser.error(f"--workers must be above {KILLED} to kill {KILLED} and keep one")
    os.environ.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    failures = 0
    with ExitStack() as stack:
        endpoint = stack.enter_context(moto())
        proxy = FaultProxy(int(endpoint.rsplit(":", 1)[1])).start()
        stack.callback(proxy.stop)
        cluster = stack.enter_context(postgres_cluster(durable=True))
        reference = _reference(args.reference) if args.reference else None
        for fault in [*([] if reference else [None]), *args.faults]:
            figures = campaign(fault, args, cluster, proxy)
            if fault is None:
                reference = figures.get("decision")
            checks = (
                gone_checks(figures)
                if fault == "server-gone"
                else {
                    "exit 0": figures["exit"] == 0,
                    "same decision": reference is not None and figures.get("decision") == reference,
                    "each run once": figures.get("count_problems") == [],
                    "verify": figures.get("verify") == 0,
                    "no flow run left unfinished": figures.get("flow_runs_unfinished") == 0,
                }
            )
            figures["checks"] = checks
            failures += not all(checks.values())
            print(json.dumps({"load": [round(x, 2) for x in os.getloadavg()], **figures}),
                  flush=True)  # fmt: skip
            if args.json:
                with args.json.open("a") as out:
                    out.write(json.dumps(figures) + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
