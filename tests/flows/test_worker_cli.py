"""`ablate worker`'s bad input: one line naming what is wrong, exit 2, before any server call
(the worker itself runs the pool tests' campaigns: tests/flows/test_work_pool*.py, long)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.s3_server import free_port


def _worker(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "ablations.cli", "worker", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The line naming the error: the only one, or argparse's after its usage lines."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(("error: ", "ablate worker: error: ")), done.stderr
    assert len(lines) == 1 or lines[0].startswith("usage: "), done.stderr
    return lines[-1]


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        # Nothing listens at the URL: had the devices been checked after the server, this
        # would be exit 1 for the dead server, not exit 2 for the devices.
        (["--devices", "tpu:0"], {"PREFECT_API_URL": "dead"}, "--devices 'tpu:0'"),
        (["--devices", "1"], {}, "set PREFECT_API_URL"),
        (["--devices", "1"], {"PREFECT_WORKER_QUERY_SECONDS": "soon"}, "QUERY_SECONDS"),
        (["--devices", "1", "--query-seconds", "0"], {}, "--query-seconds"),
        (["--devices", "1", "--limit", "0"], {}, "--limit"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], env: dict[str, str], named: str) -> None:
    if env.get("PREFECT_API_URL") == "dead":
        env = {"PREFECT_API_URL": f"http://127.0.0.1:{free_port()}/api"}
    assert named in _error_line(_worker("--pool", "gpus", *args, **env))
