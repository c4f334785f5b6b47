"""A Prefect server on loopback with the `gpus` process pool deployed, and workers posing as
GPU hosts: what the work-pool tests run campaigns on (the `loopback` fixture, tests/flows)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.s3_server import free_port

POOL = "gpus"  # the pool and deployment names in prefect.yaml
ENGINE_COMMAND = "python -m prefect.engine"
"""The deployment's command, as docs/work-pools.md offers it to hosts whose workers run in an
activated environment: the engine without Prefect's supervisor (one interpreter per run)."""
PREFECT = [sys.executable, "-m", "prefect"]
LEAN = ["--no-services", "--no-ui"]
"""The API alone: a process pool's runs need no server service (its workers poll the API,
ablate watches heartbeats in the store), and the services' loops cost CPU all test long."""


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it (flow runs start in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process and everything it started, as a host that loses power would."""
    for pid in _descendants(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait(timeout=30)


class Loopback:
    """A Prefect server with the pool deployed; workers started on demand."""

    def __init__(self, home: Path, env: dict[str, str], port: int) -> None:
        self.home, self.env, self.port = home, env, port
        self.processes: list[subprocess.Popen[bytes]] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.server: subprocess.Popen[bytes] | None = None

    def start_server(self, log: str = "server.log") -> None:
        """`prefect server start` on this loopback's port and database; back once healthy."""
        command = [*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)]
        self.server = self.start([*command, *LEAN], self.env, log)
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/health", timeout=2):
                    return
            except OSError:
                assert time.monotonic() < deadline, self.log(log)[-3000:]
                time.sleep(0.5)

    def stop_server(self) -> None:
        """Stop the server as an operator's restart does (SIGTERM; SIGKILL after 20 s)."""
        assert self.server is not None
        self.server.terminate()
        try:
            self.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            kill_tree(self.server)

    def start(self, command: list[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        with (self.home / log).open("wb") as out:
            process = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        self.processes.append(process)
        return process

    def prefect(self, *args: str) -> None:
        result = subprocess.run(
            [*PREFECT, *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stdout + result.stderr

    def worker(self, host: str, devices: str, limit: int = 1, program: str = "ablate") -> None:
        """A worker posing as a host of `devices`, taking at most `limit` flow runs at once:
        `ablate worker` (flow runs forked from a warm server), or with `program="prefect"`
        Prefect's own `prefect worker start` (a new interpreter per flow run)."""
        env = {
            **self.env,
            "ABLATE_HOST": host,
            "ABLATE_DEVICES": devices,
            "ABLATE_SLOT_DIR": str(self.home / f"slots-{host}"),
        }
        if program == "ablate":
            command = [sys.executable, "-m", "ablations.cli", "worker", "--pool", POOL]
        else:
            command = [*PREFECT, "worker", "start", "--pool", POOL]
        command += ["--limit", str(limit), "--name", host]
        self.workers[host] = self.start(command, env, f"worker-{host}.log")

    def log(self, name: str) -> str:
        return (self.home / name).read_text(errors="replace")


def loopback_env(home: Path, port: int, database_url: str | None = None) -> dict[str, str]:
    """The environment of the server, the workers and the campaign: this Prefect home, the
    API on `port`, quiet, and `database_url` (None: SQLite in the home)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home / "prefect-home"),
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_LOGGING_LEVEL="WARNING",
        PREFECT_WORKER_QUERY_SECONDS="1",  # default 10: each run would wait that long
        # Deployed with the engine as the command (ENGINE_COMMAND), each run is `python -m
        # prefect.engine`: the hosts' `python` is this environment's, as on a host whose
        # worker runs in an activated environment.
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    )
    if database_url is not None:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    return env


@contextlib.contextmanager
def serve(tmp_path: Path, database_url: str | None = None) -> Iterator[Loopback]:
    """Server on a free port with a fresh database; every process killed at teardown.

    `database_url`: the server's database (`postgresql+asyncpg://...`, a fresh one); None:
    SQLite in the server's Prefect home, as on a single machine."""
    port = free_port()
    env = loopback_env(tmp_path, port, database_url)
    loop = Loopback(tmp_path, env, port)
    try:
        loop.start_server()
        loop.prefect("work-pool", "create", POOL, "--type", "process")
        loop.prefect(
            "--no-prompt", "deploy", "--all", "--job-variable", f"command={ENGINE_COMMAND}"
        )
        yield loop
    finally:
        for process in reversed(loop.processes):
            if process.poll() is None:
                kill_tree(process)


def flow_runs(api: str) -> list[dict[str, Any]]:
    """Every flow run on the server at `api` (its REST API read page by page), as JSON."""
    found: list[dict[str, Any]] = []
    while True:
        body = json.dumps({"limit": 200, "offset": len(found)}).encode()
        request = urllib.request.Request(
            f"{api}/flow_runs/filter", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            page = json.loads(response.read())
        found += page
        if len(page) < 200:
            return found
