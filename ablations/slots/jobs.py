"""What a slot's worker does with a job: a run, the preflight checks, or a restart check's
continuation. No Prefect here."""

from __future__ import annotations

import time

import torch

from ablations.errors import WorkloadError
from ablations.preflight.across import PreflightStart
from ablations.preflight.verdict import Continuation
from ablations.records import PreflightReport, RunError, RunRecord, RunSpec, Stop


def run_spec(spec: RunSpec) -> RunRecord:
    """Execute one run with its checkpoint hook (when the plan checkpoints)."""
    from ablations.byo import is_external
    from ablations.training.driver import execute
    from ablations.workload import load_workload

    hook = None
    if spec.checkpoint is not None:
        from ablations.checkpoint import hook_for

        hook = hook_for(spec)
    try:
        factory = load_workload(spec.workload)
    except WorkloadError:
        factory = None  # `execute` records the same failure as the run's
    if is_external(factory):  # its framework owns the loop: ablations.byo
        from ablations.byo.run import execute as execute_external

        return execute_external(spec, factory, hook)
    return execute(spec, hook)


def run_preflight(spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
    """Data check on the workload's inputs, then the whole restart check on `spec`'s device
    (its continuation in a new process)."""
    return preflight_start(spec, expected_inputs, continue_elsewhere=False).finish()


def preflight_start(
    spec: RunSpec, expected_inputs: dict[str, int] | None, *, continue_elsewhere: bool
) -> PreflightStart:
    """The data check, then the restart check: whole, or (`continue_elsewhere`, and a store
    other processes can see) up to the reference, its continuation left to another process."""
    from ablations.byo import is_external
    from ablations.preflight.data_check import check_data
    from ablations.workload import load_workload

    started = time.perf_counter()
    try:
        factory = load_workload(spec.workload)
        restart, reference = None, None
        if is_external(factory):  # its data is its own: nothing to inspect; see ablations.byo
            check = getattr(factory, "preflight", None)
            if callable(check):
                check(spec)  # the framework and the user's classes import: raises otherwise
            if spec.stop_rules.restart.enabled and spec.checkpoint is not None:
                from ablations.byo.restart import external_restart_check

                restart = external_restart_check(spec, factory)
            return PreflightStart(restart=restart, seconds=time.perf_counter() - started)
        workload = factory.build(
            spec.params, seed=spec.seed, device=torch.device(spec.device), steps=spec.steps
        )
        problems = [str(p) for p in check_data(workload, expected_inputs)]
        del workload
        if spec.stop_rules.restart.enabled and spec.checkpoint is not None:
            from ablations.preflight.restart_check import reference_half, restart_check
            from ablations.preflight.verdict import check_spec

            if continue_elsewhere and not spec.checkpoint.store.startswith("memory://"):
                half = reference_half(check_spec(spec))
                restart, reference = (half, None) if isinstance(half, Stop) else (None, half)
            else:
                restart = restart_check(spec)
    except Exception as exc:  # a preflight that crashes fails the campaign's preflight, clearly
        return PreflightStart(
            error=RunError(type=type(exc).__name__, message=str(exc)),
            seconds=time.perf_counter() - started,
        )
    return PreflightStart(
        data_problems=problems,
        restart=restart,
        reference=reference,
        seconds=time.perf_counter() - started,
    )


def continue_check(spec: RunSpec, until: int) -> Continuation:
    """The restart check's continuation, in this process (which did not save the checkpoint)."""
    from ablations.preflight.restart_check import continue_from_checkpoint

    return continue_from_checkpoint(spec, until)
