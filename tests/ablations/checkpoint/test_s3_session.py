"""S3 stores share botocore's parsed model within a process, never a session's credentials."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from ablations.checkpoint.s3_session import s3_session


def _access_key() -> str:
    credentials = asyncio.run(s3_session().get_credentials())
    return str(credentials.access_key)


def test_each_store_has_its_own_session_on_one_parsed_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = s3_session(), s3_session()
    assert first is not second
    assert first.get_component("data_loader") is second.get_component("data_loader")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert _access_key() == "first-key"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second-key")  # as the environment is now
    assert _access_key() == "second-key"


def test_warming_parses_the_model_and_leaves_no_thread_behind() -> None:
    """What `ablate worker`'s fork server does before it forks (a thread would not survive
    a fork)."""
    check = (
        "import threading\n"
        "from ablations.checkpoint import s3_session as s\n"
        "s.warm()\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "loader = s.s3_session().get_component('data_loader')\n"
        "read, load = [], loader.file_loader.load_file\n"
        "loader.file_loader.load_file = lambda *a, **k: (read.append(a), load(*a, **k))[1]\n"
        "s.warm()  # a second client: from what the first parsed, no file read again\n"
        "assert not read, read\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_warming_from_a_running_event_loop_works_too() -> None:
    """`ablate worker` imports the fork server's module inside its event loop."""

    async def inside() -> None:
        from ablations.checkpoint.s3_session import warm

        warm()

    asyncio.run(inside())
