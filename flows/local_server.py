"""The temporary Prefect server of one `ablate run`: Prefect's ephemeral server, started first.

Prefect's ephemeral mode starts this same server (uvicorn over the API app, UI off, the
ephemeral services) when the flow makes its first API call, after the process has imported
Prefect's server package: seconds of import plus seconds of start, all on the campaign's
critical path. Started as the command's first act (a subprocess, nothing imported here), it
comes up while the plan loads, the slot workers import torch and the flow is imported; the
campaign then talks to it through PREFECT_API_URL, and it stops when the command ends.
Nothing for the user to start or stop, as with Prefect's own ephemeral mode.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ablations.errors import InfrastructureError
from ablations.process.parent_watch import PRCTL, die_with_parent
from flows.server_database import prepare_database

STARTUP_FAILED = 3
"""uvicorn's exit code when startup failed: the port taken between our probe and its bind,
or the app itself (a database another Prefect version migrated, say)."""
RELAUNCHES = 3
"""New ports tried when the port was taken."""
LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Health checks go straight to 127.0.0.1, whatever proxy the environment names."""
SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
}
"""What Prefect sets for its ephemeral server (no UI, the ephemeral set of services), and
errors logged: its output goes to a private file, shown only when it fails to start."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _taken(port: int) -> bool:
    """Whether something else holds `port` now (a lost race for it, not a failed app)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def _site_packages() -> str:
    spec = importlib.util.find_spec("prefect")  # found, not imported: that costs a second
    if spec is None or spec.origin is None:
        raise InfrastructureError("prefect is not installed in this environment")
    return str(Path(spec.origin).parent.parent)


class TemporaryServer:
    """A Prefect API server on a free loopback port for the lifetime of this process."""

    def __init__(self) -> None:
        # The server's stderr, kept for the error message if it fails; open while it runs.
        self._log = tempfile.TemporaryFile(mode="w+", prefix="ablate-server-")  # noqa: SIM115
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        prepare_database()  # a new Prefect home gets the migrated database: no migrations
        self._launch()
        # After Prefect's own exit hooks (they flush events and logs to this server).
        atexit.register(self.stop)

    def _launch(self) -> None:
        self.port = _free_port()
        command = [
            *(sys.executable, "-m", "uvicorn", "--app-dir", _site_packages()),
            *("--factory", "prefect.server.api.server:create_app"),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--log-level", "error", "--lifespan", "on"),
            # Bounded: uvicorn otherwise waits for every open connection to close, and a
            # server told to stop by its dead parent's signal lived on for an hour.
            *("--timeout-graceful-shutdown", "3"),
        ]
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        self._process = subprocess.Popen(
            command,
            env={**env, **SERVER_ENV},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            # SIGTERM when the campaign process dies, even by SIGKILL: no orphaned server
            # holds the database (`ablate run` starts it from its main thread, first).
            preexec_fn=die_with_parent if PRCTL is not None else None,
            # Out of the terminal's process group: a Ctrl-C reaches `ablate run`, which
            # stops its runs while the server still answers, then stops the server.
            start_new_session=True,
        )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def wait_ready(self, timeout_s: float) -> str:
        """Block until the server answers its health check; return its API URL."""
        deadline = time.monotonic() + timeout_s
        relaunches = 0
        while time.monotonic() < deadline:
            assert self._process is not None
            code = self._process.poll()
            if code == STARTUP_FAILED and relaunches < RELAUNCHES and _taken(self.port):
                relaunches += 1
                self._launch()
                continue
            if code is not None:
                raise InfrastructureError(self._exit_message(code))
            try:
                with LOOPBACK.open(f"{self.api_url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return self.api_url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.05)
        raise InfrastructureError(
            f"the temporary Prefect server did not answer in {timeout_s:.0f} s "
            f"(raise PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS): {self._tail()}"
        )

    def _exit_message(self, code: int) -> str:
        tail = self._tail()
        if "Can't locate revision" in tail:  # alembic: a newer Prefect migrated this database
            return (
                "the temporary Prefect server cannot open PREFECT_HOME's database: a newer "
                f"Prefect version (not {importlib.metadata.version('prefect')}, installed here) "
                "migrated it. Install that version here, or point PREFECT_HOME at another "
                "folder for this environment"
            )
        return (
            f"the temporary Prefect server exited ({code}): {tail}; "
            "try `prefect server start` and PREFECT_API_URL to see its log"
        )

    def _tail(self) -> str:
        self._log.seek(0)
        lines = [line for line in self._log.read().splitlines() if line.strip()]
        return " | ".join(lines[-3:]) or "no output"

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._log.close()


API_CHECK_SECONDS = 5.0
"""How long a configured server has to answer before a command says it does not."""


def require_configured_api(command: str) -> None:
    """When PREFECT_API_URL names a server, `InfrastructureError` in one line unless it
    answers (any HTTP reply will do: a server that answers 401 is there): without this,
    Prefect's first call raises a bare `RuntimeError: Failed to reach API` deep in a flow."""
    url = os.environ.get("PREFECT_API_URL", "").rstrip("/")
    if not url:
        return
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=API_CHECK_SECONDS):
            return
    except urllib.error.HTTPError:
        return
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InfrastructureError(
            f"the Prefect server at PREFECT_API_URL={url} does not answer ({reason}): start it "
            f"(`prefect server start`), or unset PREFECT_API_URL for `ablate {command}` to use a "
            "temporary one"
            if command == "run"
            else f"the Prefect server at PREFECT_API_URL={url} does not answer ({reason}): "
            "start it (`prefect server start`) and rerun"
        ) from None


def start_unless_configured() -> TemporaryServer | None:
    """Start a temporary server now, unless PREFECT_API_URL names one (call this first)."""
    return None if os.environ.get("PREFECT_API_URL") else TemporaryServer()


@contextmanager
def campaign_api(server: TemporaryServer | None) -> Iterator[None]:
    """Point Prefect at the temporary server for the block, once it answers.

    A server named in the Prefect profile, or ephemeral mode turned off there, wins: the
    temporary server stops and Prefect does what it would have done without us."""
    if server is None:
        yield
        return
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        server.stop()
        yield
        return
    url = server.wait_ready(settings.server.ephemeral.startup_timeout_seconds)
    with temporary_settings(updates={PREFECT_API_URL: url}):
        yield
