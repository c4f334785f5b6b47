"""Digits workloads for the resume and restart tests, importable by child processes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablations.workloads.digits import DigitsWorkload

CRASH_AT = "ABLATE_TEST_CRASH_AT"
"""`STEP:PATH[:ONCE]`: at STEP, wait for the file PATH (a commit record), then SIGKILL the
process; with ONCE, only the process that creates the file ONCE does (a lost worker whose
retry goes on)."""


def claim(marker: Path) -> bool:
    """Create `marker` exclusively: True for the one caller (across processes) that made it."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class CrashingDigits(DigitsWorkload):
    """Digits that kills its own process hard at a given step (when the env var says so)."""

    def train_step(self, step: int) -> Any:
        crash = os.environ.get(CRASH_AT)
        at, _, rest = (crash or "").partition(":")
        commit, _, once = rest.partition(":")
        if crash and step == int(at) and (not once or claim(Path(once))):
            committed = Path(commit)
            deadline = time.monotonic() + 30
            while not committed.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no atexit: a preemption
        return super().train_step(step)


class ForgetfulDigits(DigitsWorkload):
    """Digits whose own state omits the data position: a restart replays other batches."""

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": 0}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.order.cursor = int(state["cursor"])


class UnloadableDigits(DigitsWorkload):
    """Digits that cannot take its own state back (a workload bug a restart would hit)."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        raise KeyError("permutation")
