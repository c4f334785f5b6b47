"""Helpers for the fault suite: `ablate run` as a killable process tree in its own folder."""

from __future__ import annotations

import atexit
import copy
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from ablations.process.environment import environment_set
from flows.local_server import TemporaryServer
from tests.conftest import ROOT
from tests.flows.conftest import TINY_PLAN

_SHARED_API: list[str] = []


def shared_api_url() -> str:
    """One Prefect server for every campaign this test process starts, with its own home.

    Each `ablate run` would otherwise start a temporary server of its own: 4 s and as many
    CPU-seconds, some forty times in the suite. The campaigns are killed and rerun freely
    around it (it is not in their process group); nothing of the campaign's state lives on
    the server, so a rerun resumes from its folder as under its own server. Tests of the
    temporary server itself (`test_die_together`, the flows' output-folder test) keep it."""
    if not _SHARED_API:
        home = tempfile.mkdtemp(prefix="ablate-test-prefect-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)  # after the server stops
        server_env = {"PREFECT_HOME": home, **_NO_EVENT_SERVICES}  # the database goes there
        with environment_set(server_env):
            server = TemporaryServer()
            _SHARED_API.append(server.wait_ready(90))
    return _SHARED_API[0]


_NO_EVENT_SERVICES = {
    f"PREFECT_SERVER_SERVICES_{service}_ENABLED": "false"
    for service in ("TASK_RUN_RECORDER", "EVENT_PERSISTER", "TRIGGERS", "ACTIONS", "EVENT_LOGGER")
}
"""The shared server keeps no task-run states or events: no fault test reads them back (the
campaign's state lives in its folder), and recording them costs CPU in every campaign."""


def fault_plan(**changes: Any) -> dict[str, Any]:
    """The tiny flow plan on the fault workload, a relative file store (inside `out`)."""
    data = copy.deepcopy(TINY_PLAN)
    data["workload"]["entry"] = "tests.faults.workloads:FaultDigits"
    data["workload"]["steps"] = 200
    data["workload"]["eval_every"] = 50
    data["pilot"]["steps"] = 100
    data["checkpoint"] = {"store": "file://./ckpt", "interval": {"steps": 50}, "keep_last": 2}
    data.update(changes)
    return data


class Campaign:
    """One campaign folder: `cwd/plan.yaml`, `cwd/out`, store `cwd/out/ckpt`, own PREFECT_HOME.

    Its `ablate run`s talk to this test process's shared Prefect server (`shared_api_url`);
    with `own_server` each starts its temporary server, as a user's does."""

    def __init__(
        self, cwd: Path, plan: dict[str, Any], prefect_home: Path, *, own_server: bool = False
    ) -> None:
        self.cwd = cwd
        self.own_server = own_server
        cwd.mkdir(parents=True, exist_ok=True)
        self.plan = cwd / "plan.yaml"
        self.plan.write_text(yaml.safe_dump(plan, sort_keys=False))
        self.out = cwd / "out"
        self.records = self.out / "records"
        self.prefect_home = prefect_home
        self.logs: list[str] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PREFECT_API_URL", None)  # own server: ephemeral mode, as a user runs it
        if not self.own_server:
            env["PREFECT_API_URL"] = shared_api_url()
        env["PREFECT_HOME"] = str(self.prefect_home)
        env["PYTHONPATH"] = str(ROOT)  # the fault workload, importable from any cwd
        env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "90"
        env.update(extra)
        return env

    def command(self, *args: str) -> list[str]:
        cli = [sys.executable, "-m", "ablations.cli", "run", str(self.plan), "--out"]
        return [*cli, str(self.out), *args]

    def start(self, *args: str, **env: str) -> subprocess.Popen[str]:
        log = (self.cwd / f"run-{len(self.logs)}.log").open("w")
        self.logs.append(log.name)
        return subprocess.Popen(
            self.command(*args), cwd=self.cwd, env=self.env(**env), start_new_session=True,
            stdout=log, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def run(self, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.command(*args), cwd=self.cwd, env=self.env(**env), capture_output=True,
            text=True, timeout=timeout,
        )  # fmt: skip
        self.logs.append(result.stdout + result.stderr)
        return result

    def finished(self, phase: str | None = None) -> list[Path]:
        if not self.records.exists():
            return []
        found = list(self.records.glob("*.json"))
        if phase == "pilot":
            return [p for p in found if p.name.startswith("pilot-")]
        if phase == "main":
            return [p for p in found if not p.name.startswith("pilot-")]
        return found

    def snapshot(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in self.finished()}


def kill_when(
    process: subprocess.Popen[str], condition: Callable[[], bool], timeout: float = 240
) -> None:
    """SIGKILL the whole process tree (campaign, Prefect server, slot workers) once true."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, "the campaign ended before the fault could be injected"
        assert time.monotonic() < deadline, "the fault point was never reached"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def log_text(path: str) -> str:
    return Path(path).read_text() if Path(path).exists() else path
