"""A throwaway PostgreSQL 15 cluster on loopback, for a Prefect server as a team runs one.

    def test_x(postgres: PostgresCluster):
        url = postgres.create_database("prefect_x")  # postgresql+asyncpg://...@127.0.0.1:P/...

One cluster per test session (`initdb` takes seconds; a database, a fraction of one): `initdb`
with trust authentication (nothing but loopback reaches it), a free port on 127.0.0.1, the
data and socket folders in a fresh temporary folder, `pg_ctl start`; stopped and removed at
the end, also when a test or the start itself failed. `initdb` refuses to run as root: as
root every server command runs as the `postgres` user (`runuser -u postgres --`), which owns
the folder. The binaries: `ABLATE_PG_BIN`, else `/usr/lib/postgresql/15/bin` (Debian's place;
CI has them); without them the tests that need the cluster are skipped, saying so.

`bench/pool_scale.py` starts its clusters with `postgres_cluster` too.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.s3_server import free_port

PG_BIN = Path(os.environ.get("ABLATE_PG_BIN", "/usr/lib/postgresql/15/bin"))
SUPERUSER = "postgres"
FAST = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
"""A test's database outlives no crash: skipping the disk flushes saves seconds per test."""


def missing() -> str | None:
    """Why no cluster can start here (None: it can)."""
    if not (PG_BIN / "initdb").is_file():
        return (
            f"PostgreSQL not found: no {PG_BIN / 'initdb'} "
            "(install postgresql-15, or set ABLATE_PG_BIN to its bin folder)"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "running as root, and no `postgres` user to run initdb as (initdb refuses root)"
        if shutil.which("runuser") is None:
            return "running as root without `runuser` to run initdb as the `postgres` user"
    return None


@dataclass(frozen=True)
class PostgresCluster:
    """A running cluster: TCP on 127.0.0.1:`port`, its socket in `socket_dir`."""

    port: int
    data_dir: Path
    socket_dir: Path
    settings: tuple[str, ...] = ()
    """The server's `-c` settings beyond loopback and the port (kept across a restart)."""

    def create_database(self, name: str) -> str:
        """A new, empty database; the URL a Prefect server takes in
        `PREFECT_API_DATABASE_CONNECTION_URL` (asyncpg ships with Prefect)."""
        _run([str(PG_BIN / "createdb"), *self._client_args(), name])
        return f"postgresql+asyncpg://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def _client_args(self) -> list[str]:
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER]

    def restart(self, down_s: float = 0.0) -> None:
        """Stop it (as a crash would: immediately), wait `down_s`, and start it again on the
        same port and data."""
        _server(self.data_dir, "stop", "-m", "immediate")
        time.sleep(down_s)
        _start(self.data_dir, self.socket_dir, self.port, self.settings)


def _as_owner() -> list[str]:
    """How to run a server command: as `postgres` when we are root (initdb refuses root)."""
    return ["runuser", "-u", SUPERUSER, "--"] if os.geteuid() == 0 else []


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr}")


def _server(data_dir: Path, *args: str) -> None:
    _run([*_as_owner(), str(PG_BIN / "pg_ctl"), "-D", str(data_dir), "-w", *args])


def _start(data_dir: Path, socket_dir: Path, port: int, settings: tuple[str, ...]) -> None:
    options = [
        "-c", "listen_addresses=127.0.0.1", "-p", str(port), "-k", str(socket_dir),
        # 16 workers' flow runs, each with its own client pool, and the server's own pool
        "-c", "max_connections=300", *settings,
    ]  # fmt: skip
    log = data_dir.parent / "postgres.log"
    _server(data_dir, "-o", " ".join(options), "-l", str(log), "start")


@contextlib.contextmanager
def postgres_cluster(durable: bool = False) -> Iterator[PostgresCluster]:
    """Initialize and start a cluster in a fresh temporary folder; stop and remove it after.

    `durable`: flush to disk as a production server does (the bench); otherwise not (tests)."""
    why = missing()
    if why is not None:
        raise RuntimeError(why)
    # Under /tmp, not pytest's folders: those are private to us, and the server runs as
    # `postgres`, which must reach its data and socket folders.
    folder = Path(tempfile.mkdtemp(prefix="ablate-pg-"))
    data_dir, socket_dir = folder / "data", folder / "socket"
    socket_dir.mkdir()
    if os.geteuid() == 0:
        owner = pwd.getpwnam(SUPERUSER)
        for path in (folder, socket_dir):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    started = False
    try:
        _run([*_as_owner(), str(PG_BIN / "initdb"), "-D", str(data_dir), "-U", SUPERUSER,
              "--auth=trust", "--encoding=UTF8", "--no-sync"])  # fmt: skip
        port = free_port()
        started = True  # from here on, stop it whatever happens (a half-started one too)
        settings = () if durable else FAST
        _start(data_dir, socket_dir, port, settings)
        yield PostgresCluster(port, data_dir, socket_dir, settings)
    finally:
        if started:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                _server(data_dir, "stop", "-m", "immediate")
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster for the session; the test is skipped, saying why, without one."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    with postgres_cluster() as cluster:
        yield cluster
