"""The temporary Prefect server of `ablate run`: up on loopback, used by Prefect, then gone."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ablations.errors import InfrastructureError
from flows.environment import quiet_prefect
from flows.local_server import TemporaryServer, campaign_api, start_unless_configured
from tests.conftest import ROOT

quiet_prefect()


@pytest.fixture(autouse=True)
def own_prefect_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database of its own: the machine's may belong to another Prefect version."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))


@pytest.mark.slow
def test_the_server_answers_prefect_uses_it_and_it_stops() -> None:
    server = TemporaryServer()
    try:
        url = server.wait_ready(90)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/api")
        with urllib.request.urlopen(f"{url}/health", timeout=5) as reply:
            assert json.loads(reply.read()) is True
        from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

        # As in a fresh `ablate run`: no server configured (other tests' harness may be up).
        with temporary_settings(restore_defaults={PREFECT_API_URL}):
            with campaign_api(server):
                assert get_current_settings().api.url == url
            assert get_current_settings().api.url != url  # only for the campaign's duration
    finally:
        server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=2)


def test_a_server_that_dies_is_an_error_naming_its_exit() -> None:
    server = TemporaryServer()
    assert server._process is not None
    server._process.kill()
    server._process.wait()
    with pytest.raises(InfrastructureError, match=r"temporary Prefect server exited \(-9\)"):
        server.wait_ready(30)
    server.stop()


@pytest.mark.slow
def test_a_server_whose_app_fails_to_start_is_reported_not_relaunched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A database URL nothing can open: the app's startup fails (uvicorn exit 3, port free).
    monkeypatch.setenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", "sqlite+aiosqlite:////proc/x/db")
    server = TemporaryServer()
    try:
        with pytest.raises(InfrastructureError, match=r"temporary Prefect server exited \(3\)"):
            server.wait_ready(60)
    finally:
        server.stop()


@pytest.mark.slow
def test_a_database_a_newer_prefect_migrated_is_named_with_the_way_out(tmp_path: Path) -> None:
    from flows.server_database import prepare_database

    prepare_database()  # this home's database: the migrated template, as a first campaign gets
    database = tmp_path / "prefect-home" / "prefect.db"
    with sqlite3.connect(database) as db:  # as a newer Prefect's migration leaves it
        db.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    server = TemporaryServer()
    try:
        with pytest.raises(InfrastructureError, match=r"a newer Prefect version .* migrated it"):
            server.wait_ready(60)
    finally:
        server.stop()


def test_a_configured_server_is_used_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    assert start_unless_configured() is None


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux-only")
def test_the_server_goes_when_the_campaign_process_is_killed(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from flows.local_server import TemporaryServer\n"
        "s = TemporaryServer(); print(s._process.pid, flush=True); time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    server_pid = int(parent.stdout.readline())
    os.kill(server_pid, 0)  # running
    parent.kill()  # SIGKILL: no atexit, no cleanup
    parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _alive(server_pid):
        time.sleep(0.1)
    assert not _alive(server_pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()
    return stat[0] != "Z"  # a zombie awaiting its reaper is gone for our purpose
