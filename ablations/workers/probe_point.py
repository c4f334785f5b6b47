"""One variant's probe inside a slot's worker: a few steps per input group and batch size.

For each input group the workload names (`probe_groups`, else one group `all`) and each batch
size, smallest first: build, train `steps` steps (the first warms up; the rest are timed with
one device sync at the end), evaluate once, capture and serialize the checkpoint state, each
phase with its own peak memory. The first error (out of memory or anything else) ends that
group's sweep: a larger batch is never tried after a smaller one failed, and the failure is a
point of its own, never averaged away.

Code that runs its own loop (a command, Lightning, a Trainer: `ablations.byo`) has no `build`
or `train_step` to call and builds its own loader, so nothing is swept: each variant is one
point, as planned, measured on the path its runs take. `measure_external` runs a pilot of
`steps` steps through the adapter with a `ProbeSession`, which times and measures each phase
from the reports: build (to the first step's report, that step included), train (the steps
after the first), evaluate (from the adapter's `evaluation_starts` to the report with the
metrics; a command reports only after evaluating, so its evaluation is its last step's time
less a mean step), checkpoint (the framework's save of the last step and its commit to a
scratch store). Memory: this process's (the framework's) peaks per phase; a command's are its
own process's peak resident set on CPU, and not measured on a GPU.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from statistics import fmean
from typing import TYPE_CHECKING, Any

from pydantic import model_serializer

from ablations.run.records import MemoryPeak, Record, RunError, RunSpec

if TYPE_CHECKING:
    import torch

    from ablations.byo import ExternalWorkload

BATCH_PARAM = "batch_size"
"""The workload param the probe varies (the built-in workloads' name for it)."""


class ProbePoint(Record):
    """One variant x input group x batch size: what a few steps cost, or how they failed."""

    variant: str
    group: str
    batch_size: int
    planned: bool = False
    """The runs' own configuration (their group and batch size): its times feed the plan."""
    steps: int = 0
    """Training steps completed."""
    inputs: int = 0
    """Inputs (batch rows) completed: steps x batch size."""
    build_seconds: float | None = None
    step_seconds: float | None = None
    """Seconds per training step after the first (warm-up) step."""
    eval_seconds: float | None = None
    checkpoint_seconds: float | None = None
    """Capturing and serializing the full training state (not the upload)."""
    memory: dict[str, MemoryPeak] = {}
    """Peak memory per phase: build, train, evaluate, checkpoint."""
    error: RunError | None = None
    failed_phase: str | None = None
    out_of_memory: bool = False
    adapter: str | None = None
    """The adapter whose own loop ran the point (`command`, `lightning`, `hf_trainer`, or an
    external entry): one point per variant, as planned, nothing swept (`batch_size` is the
    runs' own `batch_size` parameter, 0 when they have none). None: a built-in workload's
    sweep (and then left out of the JSON)."""

    @model_serializer(mode="wrap")
    def _without_adapter(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("adapter") is None:
            data.pop("adapter", None)
        return data

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def peak_reserved(self) -> int:
        return max((m.reserved for m in self.memory.values()), default=0)


def probe_groups(entry: str, params: Mapping[str, object]) -> dict[str, dict[str, object]]:
    """The workload's input groups as param overrides (`all`: none, without `probe_groups`)."""
    from ablations.run.workload import load_workload

    factory = load_workload(entry)
    groups = getattr(factory, "probe_groups", None)
    return dict(groups(params)) if callable(groups) else {"all": {}}


def probe_variant(spec: RunSpec, batch_sizes: list[int], steps: int) -> list[ProbePoint]:
    """Every group's sweep over `batch_sizes` (plus the runs' own batch size) for `spec`; for
    code that runs its own loop, one point as planned (`measure_external`)."""
    from ablations.byo import is_external
    from ablations.run.workload import load_workload

    factory = load_workload(spec.workload.entry)
    if is_external(factory):
        return [measure_external(spec, factory, steps)]
    planned_batch = spec.params.get(BATCH_PARAM)
    sizes = sorted({*batch_sizes, *([int(planned_batch)] if planned_batch is not None else [])})
    points: list[ProbePoint] = []
    for group, override in probe_groups(spec.workload.entry, spec.params).items():
        for size in sizes:
            params = {**spec.params, **override, BATCH_PARAM: size}
            point = measure(spec.model_copy(update={"params": params}), steps, group)
            point.planned = not override and size == planned_batch
            points.append(point)
            if not point.ok:
                break
    return points


def measure(spec: RunSpec, steps: int, group: str) -> ProbePoint:
    """Build, train, evaluate and checkpoint once; the phase that raised is named."""
    import torch

    from ablations.checkpoint.state import capture
    from ablations.run.hooks import RunHistory
    from ablations.run.workload import load_workload
    from ablations.training.driver import seed_everything
    from ablations.training.memory import PhaseMemory

    device = torch.device(spec.device)
    memory = PhaseMemory(device)
    point = ProbePoint(variant=spec.variant, group=group, batch_size=int(spec.params[BATCH_PARAM]))
    phase = "build"
    workload = None
    try:
        started = time.perf_counter()
        memory.start()
        seed_everything(spec.seed)
        workload = load_workload(spec.workload.entry).build(
            spec.params, seed=spec.seed, device=device, steps=spec.steps
        )
        _sync(device)
        memory.stop("build")
        point.build_seconds = time.perf_counter() - started
        phase = "train"
        memory.start()
        workload.train_step(1).detach().cpu()  # warm-up step (allocator, kernels), synced
        started = time.perf_counter()
        losses = [workload.train_step(step).detach() for step in range(2, steps + 1)]
        if losses:
            torch.stack(losses).sum().item()  # one sync: queued GPU work counts
        timed = time.perf_counter() - started
        memory.stop("train")
        point.steps = steps
        point.inputs = steps * point.batch_size
        point.step_seconds = timed / len(losses) if losses else None
        phase = "evaluate"
        memory.start()
        started = time.perf_counter()
        workload.evaluate()
        memory.stop("evaluate")
        point.eval_seconds = time.perf_counter() - started
        phase = "checkpoint"
        memory.start()
        started = time.perf_counter()
        capture(steps, workload, RunHistory()).serialize()
        memory.stop("checkpoint")
        point.checkpoint_seconds = time.perf_counter() - started
    except Exception as exc:  # the probe's finding: this point does not fit or does not run
        memory.stop(phase)
        point.error = RunError(type=type(exc).__name__, message=str(exc) or repr(exc))
        point.failed_phase = phase
        point.out_of_memory = is_out_of_memory(exc)
    finally:
        point.memory = dict(memory.peaks)
        del workload
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()  # the next point's peaks start from an empty cache
    return point


def measure_external(spec: RunSpec, factory: ExternalWorkload, steps: int) -> ProbePoint:
    """A pilot of `steps` steps through the adapter, evaluated and checkpointed at its last
    step (to a scratch store), each phase timed and measured by a `ProbeSession`."""
    import tempfile

    import torch

    from ablations.byo.probe import adapter_name, probe_session

    device = torch.device(spec.device)
    planned = spec.params.get(BATCH_PARAM)
    batch = planned if isinstance(planned, int) and not isinstance(planned, bool) else 0
    point = ProbePoint(
        variant=spec.variant, group="all", batch_size=batch, planned=True,
        adapter=adapter_name(spec),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix=f"ablate-probe-{spec.variant[:40]}-") as scratch:
        session = probe_session(spec, steps, Path(scratch))
        try:
            # The code's own printing (a Trainer's logs, a program's lines) goes to stderr:
            # stdout is the probe's table, or its `--json` object.
            with contextlib.redirect_stdout(sys.stderr):
                factory.run_external(session.spec, session)
            if session.step < steps:
                raise RuntimeError(
                    f"the training code ended at step {session.step} of the {steps} probed"
                )
        except Exception as exc:  # the probe's finding: this point does not run, or fit
            point.error = RunError(type=type(exc).__name__, message=str(exc) or repr(exc))
            point.failed_phase = session.phase or "checkpoint"
            point.out_of_memory = is_out_of_memory(exc)
        finally:
            try:
                session.close()
            except Exception as exc:
                if point.error is None:
                    point.error = RunError(type=type(exc).__name__, message=str(exc))
                    point.failed_phase = "checkpoint"
            session.end_phase()
    point.steps = session.step
    point.inputs = session.step * batch
    point.build_seconds = session.timings.load or None
    point.step_seconds = fmean(session.step_times) if session.step_times else None
    point.eval_seconds = session.eval_seconds()
    point.checkpoint_seconds = session.checkpoint_seconds
    point.memory = dict(session.memory.peaks)
    del session
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return point


def is_out_of_memory(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError | MemoryError) or "out of memory" in str(exc)


def _sync(device: torch.device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
