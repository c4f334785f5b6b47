"""A process busy before it can watch its parent's pipe dies with its parent all the same
(`parent_watch.die_with_parent`): the fork server importing torch once outlived a campaign
killed at its start by 5 s. Each test kills a middle process with SIGKILL and looks at its
child: gone within a second while it holds the signal, alive once it cleared it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

MIDDLE = """
import os, subprocess, sys, time
# as the campaign does before it starts the fork server (`workers/worker._context`)
os.environ["ABLATE_FORK_SERVER_PARENT"] = str(os.getpid())
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]],
                         stdout=subprocess.DEVNULL)
print(child.pid, flush=True)
time.sleep(120)
"""
WATCHED = """
import signal, sys, time
from ablations.process.parent_watch import die_with_parent
die_with_parent(signal.SIGKILL)
if sys.argv[2] == "stop":
    die_with_parent(0)
open(sys.argv[1], "w").close()
time.sleep(120)
"""
ZYGOTE = """
import sys
open(sys.argv[1], "w").close()
import ablations.workers.zygote
open(sys.argv[1] + ".imported", "w").close()
"""


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie left for a reaper that never reaps it counts as dead)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return False
    return fields[0] != "Z"


@pytest.fixture
def children() -> Iterator[list[int]]:
    """The children a test starts, killed at the end whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _orphan(code: str, *args: str, marker: Path, children: list[int], after: float = 0.0) -> int:
    """Start `code` as the child of a middle process, kill the middle `after` seconds once
    `marker` exists; the child's pid."""
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE, code, str(marker), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert middle.stdout is not None
    pid = int(middle.stdout.readline())
    children.append(pid)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline and _alive(pid), "the child never started"
        time.sleep(0.01)
    time.sleep(after)
    middle.kill()
    middle.wait(timeout=10)
    return pid


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


@pytest.mark.parametrize(("watch", "dies"), [("watch", True), ("stop", False)])
def test_a_child_dies_with_its_parent_while_it_holds_the_signal(
    tmp_path: Path, children: list[int], watch: str, dies: bool
) -> None:
    pid = _orphan(WATCHED, watch, marker=tmp_path / "ready", children=children)
    assert _gone_within(pid, 1.0) is dies


@pytest.mark.parametrize("after", [0.0, 0.4], ids=["before-it-asks", "mid-import"])
def test_the_fork_server_dies_with_the_campaign_while_it_imports_torch(
    tmp_path: Path, children: list[int], after: float
) -> None:
    """The fork server's preload (`ablations.workers.zygote`), its parent killed as it starts
    importing (before it could ask for the signal) or well into torch's import (seconds):
    it ends before the import does."""
    marker = tmp_path / "importing"
    pid = _orphan(ZYGOTE, marker=marker, children=children, after=after)
    assert _gone_within(pid, 1.0)
    assert not Path(f"{marker}.imported").exists()


def test_a_process_that_ran_a_campaign_may_import_the_server_module_and_live() -> None:
    """A test process that ran a campaign in-process (its pid in ABLATE_FORK_SERVER_PARENT)
    and then imports every module, the fork server's too, goes on: it is not the server, and
    takes neither the server's signals nor its exit (it once exited there, status 1)."""
    code = (
        "import os, signal\n"
        "os.environ['ABLATE_FORK_SERVER_PARENT'] = str(os.getpid())\n"
        "import ablations.workers.zygote\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert (result.returncode, result.stdout) == (0, "True\n"), result.stderr[-2000:]
