"""The restart check for code that runs its own loop (a command, Lightning, a Trainer).

The built-in check (`ablations.preflight.restart_check`) drives a workload step by step; an
adapter's framework owns its loop, so the check runs the framework three times on a short run
of `2 k` steps (k = `stop_rules.restart.check_steps`), through the same `Session` and store a
real run uses: straight through; to step k, committing the checkpoint there (as a pilot
does); and resumed from that checkpoint to `2 k`. The continuation's training losses must equal
the straight run's, bit for bit, else the run is stopped with the `restart` rule, naming the
first step that differs. This is what makes a resumed run trustworthy: a framework that does
not resume exactly (a shuffling loader restarted mid-epoch, an RNG it does not save) is found
before the money is spent, not after a preemption. All three runs happen in this process: the
framework is built anew for each, so no state is shared but what the checkpoint carries.
"""

from __future__ import annotations

from ablations.byo import ExternalWorkload
from ablations.byo.session import Session
from ablations.checkpoint.manager import CheckpointManager
from ablations.records import RunSpec, Stop


def _losses(spec: RunSpec, factory: ExternalWorkload) -> list[tuple[int, float]]:
    """Run `spec` through the framework; its reported training losses."""
    session = Session(spec, CheckpointManager(spec) if spec.checkpoint is not None else None)
    try:
        factory.run_external(spec, session)
    finally:
        session.close()
    if session.stop is not None:
        raise _Stopped(session.stop)
    return list(session.losses)


class _Stopped(Exception):
    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.message)
        self.stop = stop


def external_restart_check(spec: RunSpec, factory: ExternalWorkload) -> Stop | None:
    """None when a run resumed at step k continues exactly as the run straight through; a
    `restart` stop naming the first differing step otherwise (or why no check was possible)."""
    k = spec.stop_rules.restart.check_steps
    total = 2 * k
    # short, evaluated once at its end: the losses are what is compared
    short = spec.model_copy(update={"steps": total, "eval_every": total, "out_dir": None})
    straight = short.model_copy(update={"run_id": f"{spec.run_id}-straight", "checkpoint": None})
    first = short.model_copy(update={"until": k, "phase": "pilot"})
    resumed = short.model_copy(update={"until": None, "phase": "main"})
    try:
        reference = dict(_losses(straight, factory))
        _losses(first, factory)
        continued = _losses(resumed, factory)
    except _Stopped as stopped:  # a rule fired within 2 k steps: no restart can be judged
        return None if stopped.stop.rule != "restart" else stopped.stop
    later = [(step, loss) for step, loss in continued if step > k]
    if not later:
        return Stop(
            rule="restart",
            step=k,
            message=f"the training code reported no loss after resuming at step {k}",
        )
    for step, loss in later:
        if reference.get(step) != loss:
            return Stop(
                rule="restart",
                step=step,
                message=(
                    f"resumed at step {k}, the training loss at step {step} is {loss!r}, not "
                    f"{reference.get(step)!r} as straight through: the framework does not "
                    "resume exactly (a loader that reshuffles mid-epoch, an RNG it does not "
                    "save; see the README on what each adapter preserves), or turn the rule "
                    "off (stop_rules.restart.enabled: false) to accept an inexact resume"
                ),
            )
    return None
