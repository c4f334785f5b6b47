"""`ablate probe` for code that runs its own loop: a short pilot, timed and measured per phase.

    session = probe_session(spec, steps, scratch)    # a ProbeSession on a pilot of `steps`
    factory.run_external(session.spec, session)       # the adapter's path, as a run takes it
    session.step_times, session.eval_seconds(), session.checkpoint_seconds, session.memory.peaks

The probe cannot call `build` or `train_step` here, nor set the batch size of a loader the
code builds itself: it runs the variant as planned for `steps` steps (the run's length, so LR
schedules are the run's; stopped there as a pilot is, evaluated and checkpointed there, to a
scratch store; no stop rule), and reads the phases off the reports. `ProbeSession` is a run's
`Session` that also notes the time and memory of each phase: build (to the first step's
report, that step included), train (the steps after the first), evaluate (from
`evaluation_starts`, which the Lightning and Trainer adapters call, to the report carrying the
metrics; a command reports only after evaluating, so its evaluation is its last step's time
less a mean step) and checkpoint (from the reply asking for it to the commit: the framework's
save, the pack and the commit). Memory is this process's per phase (`PhaseMemory`: the CUDA
allocator's peaks, or the resident set on CPU), the framework's own; a command's is its
process's peak resident set (`ProgramMemory`), and on a GPU not measured.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean
from typing import Protocol

import torch

from ablations.byo import adapter_field
from ablations.byo.session import Reply, Session
from ablations.checkpoint.manager import CheckpointManager
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.rules import NonFiniteLossRule, QualityRule, RestartRule, StopRules
from ablations.run.records import MemoryPeak, RunSpec

RULES_OFF = StopRules(
    non_finite_loss=NonFiniteLossRule(enabled=False),
    quality=QualityRule(enabled=False),
    restart=RestartRule(enabled=False),
)
"""A probe times steps, as the built-in probe does: no rule stops it."""


def adapter_name(spec: RunSpec) -> str:
    """The plan's field naming the loop's owner (`command`, `lightning`, `hf_trainer`), or the
    external entry itself."""
    return adapter_field(spec.workload) or spec.workload.entry


class PhaseMemoryLike(Protocol):
    """`ablations.training.memory.PhaseMemory`'s interface."""

    peaks: dict[str, MemoryPeak]

    def start(self) -> None: ...

    def stop(self, phase: str) -> None: ...


class ProgramMemory:
    """A command's memory: its process's peak resident set (`VmHWM`), reset at each phase's
    start where the system allows it (else the peak so far); nothing on a GPU, where the
    program's card memory is its own process's (`measured=False`)."""

    def __init__(self, measured: bool) -> None:
        self.measured = measured
        self.pid: int | None = None
        self.peaks: dict[str, MemoryPeak] = {}

    def start(self) -> None:
        if self.measured and self.pid is not None:
            # not Linux, or not allowed: the phase's peak is then the peak so far
            with contextlib.suppress(OSError):
                Path(f"/proc/{self.pid}/clear_refs").write_bytes(b"5")

    def stop(self, phase: str) -> None:
        if not self.measured or self.pid is None:
            return
        try:
            status = Path(f"/proc/{self.pid}/status").read_bytes()
            start = status.index(b"VmHWM:") + len(b"VmHWM:")
            peak = int(status[start : status.index(b"kB", start)]) * 1024
        except (OSError, ValueError):
            return  # gone, or no /proc: not measured
        before = self.peaks.get(phase, MemoryPeak())
        self.peaks[phase] = MemoryPeak(
            allocated=max(before.allocated, peak), reserved=max(before.reserved, peak)
        )


class ProbeSession(Session):
    """A run's session that also times and measures its phases from the reports (see the
    module docstring): `phase` is the one in progress (None once the checkpoint is done)."""

    def __init__(
        self, spec: RunSpec, checkpoints: CheckpointManager, memory: PhaseMemoryLike
    ) -> None:
        super().__init__(spec, checkpoints)
        self.memory = memory
        self.phase: str | None = "build"
        self.step_times: list[float] = []
        """Seconds per training step, of the steps after the first (the warm-up)."""
        self.checkpoint_seconds: float | None = None
        self._eval_seconds: float | None = None
        self._with_eval: float | None = None
        """A command's last step: its seconds, its evaluation included."""
        self._last: tuple[int, float] | None = None
        self._eval_started: float | None = None
        self._save_asked: float | None = None
        memory.start()

    def _switch(self, phase: str | None) -> None:
        """End the current phase's memory segment; begin `phase`'s."""
        if self.phase is not None:
            self.memory.stop(self.phase)
        if phase is not None:
            self.memory.start()
        self.phase = phase

    def evaluation_starts(self) -> None:
        self._eval_started = time.perf_counter()
        self._switch("evaluate")

    def report(
        self, step: int, loss: float | None = None, metrics: Mapping[str, float] | None = None
    ) -> Reply:
        now = time.perf_counter()
        if isinstance(self.memory, ProgramMemory) and self.memory.pid is None:
            self.memory.pid = self.program_pid
        evaluated = self._eval_started is not None
        if self._last is not None and step > self._last[0]:
            end = self._eval_started if evaluated and metrics else now
            seconds = ((end or now) - self._last[1]) / (step - self._last[0])
            if metrics and not evaluated:
                self._with_eval = seconds  # a command: its evaluation is in this step
            else:
                self.step_times.append(seconds)
        if metrics and evaluated and self._eval_started is not None:
            self._eval_seconds = now - self._eval_started
        if self.phase in ("build", "evaluate"):
            self._switch("train")
        self._eval_started = None
        self._last = (step, now)
        reply = super().report(step, loss, metrics)
        if reply.checkpoint:
            self._switch("checkpoint")
            self._save_asked = time.perf_counter()
        return reply

    def next_due(self) -> int:
        """Every step as it happens: the probe times each (a command batches no report)."""
        return self.step + 1

    def commit(self, step: int, folder: Path) -> None:
        super().commit(step, folder)
        if self._save_asked is not None:
            self.checkpoint_seconds = time.perf_counter() - self._save_asked
            self._save_asked = None
            self._switch(None)
        if self._last is not None:
            self._last = (self._last[0], time.perf_counter())

    def end_phase(self) -> None:
        """Close the phase in progress (the probe ended, or failed in it)."""
        self._switch(None)

    def eval_seconds(self) -> float | None:
        """The evaluation's seconds; a command's, its last step's less a mean step."""
        if self._eval_seconds is not None:
            return self._eval_seconds
        if self._with_eval is not None and self.step_times:
            return max(0.0, self._with_eval - fmean(self.step_times))
        return None


def probe_session(spec: RunSpec, steps: int, scratch: Path) -> ProbeSession:
    """A `ProbeSession` on the pilot of `spec` the probe runs (`session.spec`), its checkpoint
    going to a store in `scratch`."""
    store = CheckpointSection(store=f"file://{scratch}/store", interval={"steps": 10**9})
    short = spec.with_workload(eval_every=steps).model_copy(  # evaluated once, at the last step
        update={
            "steps": max(spec.steps, steps),  # the run's own length (LR schedules)...
            "until": steps,  # ... stopped there, as a pilot is, with a checkpoint
            "phase": "pilot",
            "stop_rules": RULES_OFF,
            "checkpoint": store,
            "out_dir": None,
        }
    )
    memory: PhaseMemoryLike
    if spec.workload.command is not None:
        memory = ProgramMemory(measured=torch.device(spec.device).type == "cpu")
    else:
        from ablations.training.memory import PhaseMemory

        memory = PhaseMemory(torch.device(spec.device))
    return ProbeSession(short, CheckpointManager(short), memory)
