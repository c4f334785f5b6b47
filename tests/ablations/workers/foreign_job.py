"""A kind of job no module of `ablations` knows, for the worker's tests: what the worker
process has imported. It lives apart from the tests because the worker imports this module to
receive it, and the tests import the project's job kinds."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ablations.workers.messages import Done, Job

if TYPE_CHECKING:
    from ablations.workers.worker import SlotWorker


@dataclass(frozen=True)
class Imported(Job[list[str]]):
    """The names of the modules the worker process has imported."""

    def run(self) -> list[str]:
        return sorted(sys.modules)

    def dump(self, result: list[str]) -> str:
        return json.dumps(result)

    def send(self, worker: SlotWorker) -> list[str]:
        reply = worker.call(self)
        assert isinstance(reply, Done)
        return list(json.loads(reply.body))


@dataclass(frozen=True)
class Origin(Job[dict[str, object]]):
    """Where the worker process came from: its parent's pid, `ABLATE_TEST_MARK` in its
    environment, whether SIGTERM has its default action there, and how many objects it holds
    out of the garbage collector's reach (those the fork server froze)."""

    def run(self) -> dict[str, object]:
        import gc
        import os
        import signal

        return {
            "parent": os.getppid(),
            "mark": os.environ.get("ABLATE_TEST_MARK"),
            "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
            "frozen_objects": gc.get_freeze_count(),
        }

    def dump(self, result: dict[str, object]) -> str:
        return json.dumps(result)

    def send(self, worker: SlotWorker) -> dict[str, object]:
        reply = worker.call(self)
        assert isinstance(reply, Done)
        parsed: dict[str, object] = json.loads(reply.body)
        return parsed
