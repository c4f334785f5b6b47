"""A kind of job no module of `ablations` knows, for the worker's tests: what the worker
process has imported. It lives apart from the tests because the worker imports this module to
receive it, and the tests import the project's job kinds."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ablations.slots.messages import Done, Job

if TYPE_CHECKING:
    from ablations.slots.worker import SlotWorker


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
