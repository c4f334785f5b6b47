"""The temporary server's database template: copied into a fresh Prefect home, never over an
existing or configured database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flows.server_database import home_database, prepare_database, template_path


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    for name in ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL"):
        monkeypatch.delenv(name, raising=False)
    template = template_path()
    template.parent.mkdir(parents=True)
    with sqlite3.connect(template) as db:  # stands in for the migrated database
        db.execute("CREATE TABLE alembic_version (version_num TEXT)")
    return tmp_path


def test_a_fresh_home_gets_the_template_and_an_existing_database_is_kept(homes: Path) -> None:
    target = homes / "home" / "prefect.db"
    assert home_database() == target
    prepare_database()
    assert target.read_bytes() == template_path().read_bytes()
    target.write_bytes(b"the user's own database")
    prepare_database()
    assert target.read_bytes() == b"the user's own database"
    assert sorted(p.name for p in target.parent.iterdir()) == ["prefect.db"]  # no temporaries


def test_a_configured_database_is_left_alone(homes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", "postgresql+asyncpg://db/x")
    assert home_database() is None
    prepare_database()
    assert not (homes / "home").exists()
    monkeypatch.delenv("PREFECT_SERVER_DATABASE_CONNECTION_URL")
    (homes / "home").mkdir()
    (homes / "home" / "profiles.toml").write_text(
        '[profiles.local]\nPREFECT_API_DATABASE_CONNECTION_URL = "sqlite:////elsewhere.db"\n'
    )
    assert home_database() is None
