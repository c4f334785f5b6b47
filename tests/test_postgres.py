"""The throwaway PostgreSQL cluster the pool tests run their Prefect server on
(`tests/postgres.py`): it answers on loopback, and is stopped and removed when the block
ends, by an error too."""

from __future__ import annotations

import socket
import subprocess

import pytest

from tests.postgres import PG_BIN, missing, postgres_cluster

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_database_is_created_and_the_cluster_is_gone_after_a_failure() -> None:
    failed = pytest.raises(RuntimeError, match="the test failed")
    with failed, postgres_cluster() as cluster:
        url = cluster.create_database("prefect_check")
        assert url == f"postgresql+asyncpg://postgres@127.0.0.1:{cluster.port}/prefect_check"
        query = [str(PG_BIN / "psql"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U",
                 "postgres", "-tAc", "select current_database()", "prefect_check"]  # fmt: skip
        answer = subprocess.run(query, capture_output=True, text=True, timeout=60)
        assert answer.stdout.strip() == "prefect_check", answer.stderr
        folder = cluster.data_dir.parent
        raise RuntimeError("the test failed")
    assert not _answers(cluster.port)
    assert not folder.exists()
