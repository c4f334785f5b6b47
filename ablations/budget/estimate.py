"""Per-run estimates from the pilot's measured records, for projecting the main phase.

Each figure is a ratio of totals over the records that measured it, so it scales to the
main phase's step count through `project`:

- step: all training seconds / all steps done. Never one warm step's time (`step_seconds`,
  a median of warm windows), which leaves out the first steps' warm-up, the loss reads and
  the evaluation cadence's syncs, and so projects too little;
- evaluation: evaluation seconds / evaluations recorded;
- checkpoint: checkpoint seconds (the loop's stall, closing and resume) / saves;
- load and export: the mean over the runs that trained.

A figure nobody measured (no run trained, no run saved) falls back to the plan's
`budget.estimate`, so a partial pilot never turns into a zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean

from ablations.plan.model import Plan
from ablations.plan.offers import RunEstimate
from ablations.run.records import RunRecord


def estimate_from_records(records: Sequence[RunRecord], plan: Plan | None = None) -> RunEstimate:
    """A `RunEstimate` from measured records; unmeasured figures from the plan's estimate."""
    fallback = plan.budget.estimate if plan is not None else RunEstimate()
    # steps_trained, not steps_done: a main run resumed from its pilot timed only its own steps
    trained = [r for r in records if r.steps_trained > 0]
    if not trained:
        return fallback
    steps = sum(r.steps_trained for r in trained)
    train = sum(r.timings.train for r in trained)
    n_evals = sum(len(r.evaluations) for r in trained)
    saves = sum(r.checkpoint.saves for r in trained)
    return RunEstimate(
        load_seconds=fmean(r.timings.load for r in trained),
        step_seconds=train / steps if train > 0 else fallback.step_seconds,
        eval_seconds=(
            sum(r.timings.evaluate for r in trained) / n_evals if n_evals else fallback.eval_seconds
        ),
        checkpoint_seconds=(
            sum(r.timings.checkpoint for r in trained) / saves
            if saves
            else fallback.checkpoint_seconds
        ),
        export_seconds=fmean(r.timings.export for r in trained),
    )
