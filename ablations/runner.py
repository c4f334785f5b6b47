"""What a slot's worker does with a job: a run, or the preflight checks. No Prefect here."""

from __future__ import annotations

import time

import torch

from ablations.records import PreflightReport, RunError, RunRecord, RunSpec


def run_spec(spec: RunSpec) -> RunRecord:
    """Execute one run with its checkpoint hook (when the plan checkpoints)."""
    from ablations.driver import execute

    hook = None
    if spec.checkpoint is not None:
        from ablations.checkpoint import hook_for

        hook = hook_for(spec)
    return execute(spec, hook)


def run_preflight(spec: RunSpec, expected_inputs: dict[str, int] | None) -> PreflightReport:
    """Data check on the workload's inputs, then the restart check on `spec`'s device."""
    from ablations.data_check import check_data
    from ablations.workload import load_workload

    started = time.perf_counter()
    try:
        factory = load_workload(spec.workload)
        workload = factory.build(
            spec.params, seed=spec.seed, device=torch.device(spec.device), steps=spec.steps
        )
        problems = [str(p) for p in check_data(workload, expected_inputs)]
        del workload
        restart = None
        if spec.stop_rules.restart.enabled and spec.checkpoint is not None:
            from ablations.checkpoint import restart_check

            restart = restart_check(spec)
    except Exception as exc:  # a preflight that crashes fails the campaign's preflight, clearly
        return PreflightReport(
            passed=False,
            error=RunError(type=type(exc).__name__, message=str(exc)),
            seconds=time.perf_counter() - started,
        )
    return PreflightReport(
        passed=not problems and restart is None,
        data_problems=problems,
        restart=restart,
        seconds=time.perf_counter() - started,
    )
