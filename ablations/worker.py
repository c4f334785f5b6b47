"""One long-lived worker process per slot, pinned to its device before torch is imported.

Importing torch costs seconds, so a slot keeps its process across runs and starts a new one
only after a crash. The child is spawned (never forked: a forked CUDA context is unusable)
and sets `CUDA_VISIBLE_DEVICES` as its very first act, so the run inside sees one card.
A worker that dies fails only the run it held; the next run gets a fresh worker.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from ablations.records import PreflightReport, RunError, RunRecord, RunSpec
from ablations.slots import SlotSpec

_POLL_SECONDS = 0.5


def _serve(conn: Connection, visible_devices: str, cpu_threads: int) -> None:
    """The child's main loop: receive run specs, execute them, send records back."""
    os.environ["CUDA_VISIBLE_DEVICES"] = visible_devices  # before torch is imported
    import torch

    torch.set_num_threads(cpu_threads)
    from ablations.runner import run_preflight, run_spec

    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        kind, payload, expected = message
        spec = RunSpec.model_validate_json(payload)
        if kind == "preflight":
            conn.send(run_preflight(spec, expected).model_dump_json())
        else:
            conn.send(run_spec(spec).model_dump_json())


class SlotWorker:
    """The parent's handle on one slot's worker process."""

    def __init__(self, slot: SlotSpec) -> None:
        self.slot = slot
        self._process: Any = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self.restarts = 0

    def start(self) -> None:
        """Start the worker process unless it runs (returns at once; the child imports torch)."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                if self._process is not None:
                    self.restarts += 1
                self._start()

    def _start(self) -> None:
        context = mp.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(child, self.slot.visible_devices, self.slot.cpu_threads),
            name=f"ablate-slot-{self.slot.name}",
            daemon=True,
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent

    def run(self, spec: RunSpec) -> RunRecord:
        """Execute one run on this slot; a crashed worker yields a `failed` record."""
        started = time.time()
        reply = self._call("run", spec, None)
        if reply is None:
            return self._crashed(spec, started)
        record = RunRecord.model_validate_json(reply)
        return record.model_copy(update={"slot": self.slot.name})

    def preflight(self, spec: RunSpec, expected: dict[str, int] | None) -> PreflightReport:
        """The data and restart checks, on this slot's device."""
        reply = self._call("preflight", spec, expected)
        if reply is None:
            message = f"the worker process of slot {self.slot.name} died during preflight"
            return PreflightReport(
                passed=False, error=RunError(type="WorkerCrashed", message=message)
            )
        return PreflightReport.model_validate_json(reply)

    def _call(self, kind: str, spec: RunSpec, expected: dict[str, int] | None) -> str | None:
        """Send one job and wait for its reply; None when the worker died meanwhile."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                if self._process is not None:
                    self.restarts += 1
                self._start()
            assert self._conn is not None
            local = spec.model_copy(update={"device": self.slot.local_device})
            try:
                self._conn.send((kind, local.model_dump_json(), expected))
                while not self._conn.poll(_POLL_SECONDS):
                    if not self._process.is_alive():
                        return None
                reply: str = self._conn.recv()
                return reply
            except (EOFError, OSError):
                return None

    def _crashed(self, spec: RunSpec, started: float) -> RunRecord:
        code = None
        if self._process is not None:
            self._process.join(timeout=5)
            code = self._process.exitcode
            self._process = None
            self.restarts += 1  # the next run starts a fresh worker
        return RunRecord.failed(
            spec,
            "WorkerCrashed",
            f"the worker process of slot {self.slot.name} died (exit code {code})",
            device=self.slot.device,
            slot=self.slot.name,
            started_at=started,
            ended_at=time.time(),
        )

    def close(self) -> None:
        """Ask the worker to finish, then make sure it is gone."""
        if self._process is None:
            return
        try:
            assert self._conn is not None
            self._conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=5)
        self._process = None
