"""The restart check for code that runs its own loop (a command, Lightning, a Trainer).

The built-in check (`ablations.preflight.restart_check`) drives a workload step by step; an
adapter's framework owns its loop, so the check runs the framework three times on a short run
of `2 k` steps (k = `stop_rules.restart.check_steps`), through the same `Session` and store a
real run uses: straight through; to step k, committing the checkpoint there (as a pilot
does); and resumed from that checkpoint to `2 k`. All three evaluate at the same steps (k and
2 k), so an evaluation's own random draws (a validation loader's seed) are the same on both
sides and only the resume is judged. The continuation's training losses must equal the
straight run's, bit for bit, else the run is stopped with the `restart` rule, naming the first
step that differs, the cause found and the fix in the user's framework:

- `nondeterministic`: the run to step k already differs from the straight run before the
  resume (or its state at k does): the training is not reproducible, whatever the checkpoint;
- `batches`: the batches after the resume are not the straight run's (a loader that restarts
  its epoch with a fresh shuffle);
- `state`: the model or optimizer restored is not the one trained to step k;
- `random`: the same batches and the same state give another loss: a random draw (dropout's,
  a generator of the user's) the checkpoint does not restore;
- `unknown`: a command's program, whose batches and state the check cannot see.

The adapters record the batches and the state (`ablations.byo.trace`); each names its fixes
as `resume_fixes` (cause -> what to change, in its framework's words). All three runs happen
in this process: the framework is built anew for each, so no state is shared but what the
checkpoint carries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ablations.byo import ExternalWorkload
from ablations.byo.session import Session
from ablations.byo.trace import RestartTrace
from ablations.checkpoint.commit import Identity, remove_writer
from ablations.checkpoint.manager import CheckpointManager
from ablations.checkpoint.store import open_store
from ablations.errors import Interrupted
from ablations.run.records import RunSpec, Stop

Cause = Literal["nondeterministic", "batches", "state", "random", "unknown"]

CAUSES: dict[Cause, str] = {
    "nondeterministic": "the run to step {k} already differs from the run straight through "
    "before any resume (at step {first}): the training is not reproducible from its seed",
    "batches": "the training batches after the resume differ from the straight run's (from "
    "step {first}): the data loader does not continue where the checkpoint left it",
    "state": "the model or optimizer state restored at step {k} is not the one trained to step {k}",
    "random": "the same batches and the same model and optimizer state give another loss: a "
    "random draw (dropout, noise, a generator of your own) is not restored by the checkpoint",
    "unknown": "the framework does not resume exactly",
}
"""What each cause means, as the stop's message says it (`{k}`: the middle step, `{first}`:
the first step found different)."""

FIXES: dict[Cause, str] = {
    "nondeterministic": "seed every random source from the run's seed and avoid "
    "non-deterministic kernels",
    "batches": "make the loader resumable (it saves and restores its position)",
    "state": "save and restore every part of the training state",
    "random": "save and restore the random generators with the checkpoint",
    "unknown": "save and restore everything the next steps depend on: the model, the "
    "optimizer, the data position and the random generators",
}
"""The fixes when the adapter names none of its own (`resume_fixes`)."""


@dataclass
class _Run:
    losses: dict[int, float]
    trace: RestartTrace


def _run(spec: RunSpec, factory: ExternalWorkload, middle: int) -> _Run:
    """Run `spec` through the framework; its reported training losses and its trace."""
    session = Session(spec, CheckpointManager(spec) if spec.checkpoint is not None else None)
    session.trace = RestartTrace(middle)
    try:
        factory.run_external(spec, session)
    finally:
        session.close()
    if session.interrupted_at is not None:  # a terminate request: no verdict, no next run
        raise Interrupted(session.interrupted_at, saved=False)
    if session.stop is not None:
        raise _Stopped(session.stop)
    return _Run(dict(session.losses), session.trace)


class _Stopped(Exception):
    def __init__(self, stop: Stop) -> None:
        super().__init__(stop.message)
        self.stop = stop


def external_restart_check(spec: RunSpec, factory: ExternalWorkload) -> Stop | None:
    """None when a run resumed at step k continues exactly as the run straight through; a
    `restart` stop naming the first differing step, its cause and the fix otherwise (or why
    no check was possible)."""
    spec = spec.for_restart_check()  # never the run's own folder (nor a pool's pointer in it)
    k = spec.stop_rules.restart.check_steps
    total = 2 * k
    # short, evaluated at k and at its end on every side: the losses are what is compared
    short = spec.with_workload(eval_every=k).model_copy(update={"steps": total, "out_dir": None})
    straight = short.model_copy(update={"run_id": f"{spec.run_id}-straight", "checkpoint": None})
    first = short.model_copy(update={"until": k, "phase": "pilot"})
    resumed = short.model_copy(update={"until": None, "phase": "main"})
    assert spec.checkpoint is not None, "the restart check needs a checkpoint section"
    # The check's saves, under its own run id: an earlier check's are never resumed, and
    # none is left behind.
    store = open_store(spec.checkpoint)
    identity = Identity(spec.campaign_id, spec.run_id, spec.plan_hash)
    remove_writer(store, identity)
    try:
        reference = _run(straight, factory, k)
        before = _run(first, factory, k)
        continued = _run(resumed, factory, k)
    except _Stopped as stopped:  # a rule fired within 2 k steps: no restart can be judged
        return None if stopped.stop.rule != "restart" else stopped.stop
    finally:
        remove_writer(store, identity)
    later = sorted((step, loss) for step, loss in continued.losses.items() if step > k)
    if not later:
        return Stop(
            rule="restart",
            step=k,
            message=f"the training code reported no loss after resuming at step {k}",
        )
    for step, loss in later:
        expected = reference.losses.get(step)
        if expected != loss:
            cause, at = diagnose(k, reference, before, continued)
            fixes = {**FIXES, **getattr(factory, "resume_fixes", {})}
            return Stop(
                rule="restart",
                step=step,
                message=(
                    f"resumed at step {k}, the training loss at step {step} is {loss!r}, not "
                    f"{expected!r} as straight through: "
                    f"{CAUSES[cause].format(k=k, first=at if at is not None else step)}. "
                    f"Fix: {fixes[cause]}; or turn the rule off "
                    "(stop_rules.restart.enabled: false) to accept an inexact resume"
                ),
            )
    return None


def diagnose(k: int, straight: _Run, first: _Run, resumed: _Run) -> tuple[Cause, int | None]:
    """Why the resumed run differs from the straight one, and the first step showing it."""
    early = [s for s, loss in sorted(first.losses.items()) if loss != straight.losses.get(s)]
    if early:
        return "nondeterministic", early[0]
    traced = resumed.trace.state_digest is not None or bool(resumed.trace.batches)
    if not traced:
        return "unknown", None
    if first.trace.state_digest != straight.trace.state_digest:
        return "nondeterministic", k
    moved = [
        step
        for step in sorted(resumed.trace.batches)
        if step > k and resumed.trace.batches[step] != straight.trace.batches.get(step)
    ]
    if moved:
        return "batches", moved[0]
    if resumed.trace.state_digest != straight.trace.state_digest:
        return "state", k
    return "random", None
