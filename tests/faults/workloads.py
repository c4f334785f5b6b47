"""A digits workload with fault hooks, for campaigns run in subprocesses (slot workers).

Both hooks are off unless their environment variable is set, so a reference campaign with the
same plan (same workload entry, same run ids) runs untouched:

- `ABLATE_FAULT_SLOW_UPLOAD=STEP:MARKER`: the first save of step STEP writes half of its
  `state.pt`, creates MARKER and hangs (the test kills the process tree meanwhile): a kill
  in the middle of a checkpoint upload, with a half-written object left in the store.
- `ABLATE_FAULT_PAUSE=STEP:MARKER:GO`: the first run to reach step STEP creates MARKER and
  waits until the file GO exists (the test stops and restarts the S3 server meanwhile).
- `ABLATE_FAULT_LOSE_CURSOR=1`: `load_state_dict` forgets the batch cursor, a state bug the
  restart check must find (preflight fails; without the variable the same folder passes).
- `ABLATE_FAULT_SLOW_IMPORT=MARKER`: importing this module (a slot worker's warm-up) writes
  the process id to MARKER (appending a line) and sleeps a minute: a campaign still starting.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ablations.checkpoint.store import FsspecStore
from ablations.workloads.digits import DigitsWorkload
from tests.ablations.checkpoint.workloads import claim as _claim

SLOW_UPLOAD, PAUSE = "ABLATE_FAULT_SLOW_UPLOAD", "ABLATE_FAULT_PAUSE"
LOSE_CURSOR = "ABLATE_FAULT_LOSE_CURSOR"
SLOW_IMPORT = "ABLATE_FAULT_SLOW_IMPORT"

if os.environ.get(SLOW_IMPORT):
    with open(os.environ[SLOW_IMPORT], "a") as _marker:
        _marker.write(f"{os.getpid()}\n")
    time.sleep(60)


_put = FsspecStore.put


def _hanging_put(self: FsspecStore, key: str, data: bytes) -> None:
    step, _, marker = os.environ.get(SLOW_UPLOAD, "").partition(":")
    if marker and key.endswith(f"step-{int(step):08d}/state.pt") and _claim(Path(marker)):
        self.fs.pipe_file(self._path(key), data[: len(data) // 2])  # half an object
        written = Path(f"{marker}.key.part")  # renamed whole: the test reads it once it exists
        written.write_text(key)
        written.rename(f"{marker}.key")
        time.sleep(120)  # the kill arrives here
    _put(self, key, data)


if os.environ.get(SLOW_UPLOAD):
    FsspecStore.put = _hanging_put  # type: ignore[method-assign]


class FaultDigits(DigitsWorkload):
    """Digits that can pause at a step until the test lets it go on."""

    def train_step(self, step: int) -> Any:
        at, _, rest = os.environ.get(PAUSE, "").partition(":")
        marker, _, go = rest.partition(":")
        if marker and step == int(at) and _claim(Path(marker)):
            deadline = time.monotonic() + 120
            while not Path(go).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return super().train_step(step)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if os.environ.get(LOSE_CURSOR):
            state = {**state, "cursor": 0}
        super().load_state_dict(state)


class ProbeOOM(DigitsWorkload):
    """Digits that runs out of memory (a real `torch.OutOfMemoryError`) from batch size
    `oom_at_batch` up: the probe's injected limit."""

    def __init__(self, params: Any, seed: int, device: Any, steps: int) -> None:
        params = dict(params)
        self.oom_at_batch = int(params.pop("oom_at_batch", 0))
        super().__init__(params, seed, device, steps)

    @classmethod
    def build(cls, params: Any, *, seed: int, device: Any, steps: int) -> ProbeOOM:
        return cls(params, seed, device, steps)

    def train_step(self, step: int) -> Any:
        import torch

        if self.oom_at_batch and self.batch_size >= self.oom_at_batch:
            raise torch.OutOfMemoryError(
                f"CUDA out of memory: injected at batch {self.batch_size} (oom_at_batch)"
            )
        return super().train_step(step)
