"""The temporary server's database: migrated once per user, copied into a fresh Prefect home.

A Prefect server on a new home first creates its SQLite database and runs every migration:
seconds to tens of seconds, on the critical path of a newcomer's first campaign. The migrated
but empty database is the same for every home of one Prefect version, so it is built once per
user (`~/.cache/ablate/prefect-<version>.db`, by `make venv` or by the first campaign that
needs it) and copied, a megabyte, into each new home before the server starts; the server's
own migration step then finds nothing to do. Homes with a database, and servers configured
with another database, are left alone.

    python -m flows.server_database      # build the template now (make venv does)
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

DATABASE_SETTINGS = (
    "PREFECT_API_DATABASE_CONNECTION_URL",
    "PREFECT_SERVER_DATABASE_CONNECTION_URL",
)
MIGRATE = (
    "import asyncio\n"
    "from prefect.server.database import provide_database_interface\n"
    "asyncio.run(provide_database_interface().create_db())\n"
)
"""Prefect's own database creation (every migration), in a child process pointed at a file."""


def template_path() -> Path:
    """The per-user migrated database of the installed Prefect version."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    version = importlib.metadata.version("prefect")  # without importing prefect: a second
    return Path(cache) / "ablate" / f"prefect-{version}.db"


def home_database() -> Path | None:
    """`PREFECT_HOME/prefect.db` when the server will use that default SQLite file; None when
    a database is configured (environment or profile)."""
    if any(os.environ.get(name) for name in DATABASE_SETTINGS):
        return None
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    profiles = home / "profiles.toml"
    with contextlib.suppress(OSError):
        if "DATABASE" in profiles.read_text(errors="replace"):
            return None
    return home / "prefect.db"


def build_template(template: Path) -> None:
    """Run Prefect's migrations into a new file and publish it as `template` (atomically)."""
    template.parent.mkdir(parents=True, exist_ok=True)
    partial = template.with_name(f".{template.name}.{os.getpid()}.tmp")
    env = {k: v for k, v in os.environ.items() if k not in DATABASE_SETTINGS}
    env["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{partial}"
    try:
        subprocess.run(
            [sys.executable, "-c", MIGRATE], env=env, check=True, capture_output=True, timeout=600
        )
        with contextlib.closing(sqlite3.connect(partial)) as db:  # one self-contained file
            db.execute("PRAGMA journal_mode=DELETE")
        os.replace(partial, template)
    finally:
        for leftover in (partial, *partial.parent.glob(f"{partial.name}-*")):
            leftover.unlink(missing_ok=True)


def prepare_database() -> None:
    """Before the temporary server starts: give a new home a copy of the migrated template
    (building the template first when this user has none). Never fails a campaign: on any
    error the server creates its database itself, as Prefect always does."""
    target = home_database()
    if target is None or target.exists():
        return
    try:
        template = template_path()
        if not template.exists():
            build_template(template)  # the migration the server would run anyway, kept
        target.parent.mkdir(parents=True, exist_ok=True)
        copy = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        copy.write_bytes(template.read_bytes())
        try:
            os.link(copy, target)  # never over a database another process made meanwhile
        except FileExistsError:
            pass
        finally:
            copy.unlink(missing_ok=True)
    except (OSError, subprocess.SubprocessError, sqlite3.Error, ValueError):
        return


if __name__ == "__main__":
    path = template_path()
    if not path.exists():
        build_template(path)
    print(path)
