"""A campaign's progress lines: a run's outcome, the looks' lines and the tables of runs, for the
terminal and the Prefect UI."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the analysis package imports pandas and scipy, which every
    # slot worker (it prints its runs' lines) would otherwise load for nothing
    from ablations.analysis.looks import LookRecord
    from ablations.run.records import RunRecord


def _significant(value: float | None) -> float | None:
    """4 significant figures: what a table in the UI can show (the folder keeps them all)."""
    return None if value is None else float(f"{value:.4g}")


def outcome(record: RunRecord) -> str:
    """A run's outcome in a few words: the stop, the rejection or the error (and whether a rerun
    retries it), else its metrics; and the step it started from when a checkpoint was used: its
    pilot's (the plan) or an interrupted attempt's (a recovery)."""
    from ablations.text.units import metric

    if record.stop is not None:
        detail = f"{record.stop.rule} at step {record.stop.step}: {record.stop.message}"
    elif record.rejection is not None:
        detail = record.rejection.message
    elif record.error is not None:
        detail = str(record.error) + (" (retried by a rerun)" if record.lost else "")
    else:
        detail = ", ".join(f"{k}={metric(v)}" for k, v in record.metrics.items())
    step = record.checkpoint.resumed_from_step
    if not step:
        return detail
    if step == record.checkpoint.pilot_step:  # the plan: a main run continues its pilot
        return f"{detail}; continued its pilot from step {step}"
    return f"{detail}; resumed {record.run_id} from step {step}"  # after an interruption


def record_rows(records: list[RunRecord], metric: str) -> list[dict[str, object]]:
    """Rows of a runs table (a Prefect table artifact): one small dict per run."""
    return [
        {
            "run": r.run_id,
            "variant": r.variant,
            "seed": r.seed,
            "status": r.status,
            metric: _significant(r.metrics.get(metric)),
            "stop": f"{r.stop.rule}: {r.stop.message}" if r.stop else "",
            "reason": outcome(r) if r.status != "accepted" else "",
            "seconds": round(r.timings.total, 2),
            "slot": r.slot or "",
        }
        for r in records
    ]


def _interval(low: float | None, high: float | None) -> str:
    return "no interval" if low is None or high is None else f"[{low:+.4g}, {high:+.4g}]"


def look_lines(record: LookRecord, metric: str) -> list[str]:
    """One progress line per variant judged at a look: its verdict or what comes next."""
    head = f"look {record.look + 1}/{record.looks} ({record.seeds} seeds, alpha spent "
    head += f"{record.alpha_spent:.3g})"
    ended = set(record.budget_ended)
    lines = []
    for j in record.judgements:
        diff = "" if j.mean_diff is None else f" {metric} {j.mean_diff:+.4g}"
        shown = f"{head}: {j.variant}{diff} {_interval(j.ci_low, j.ci_high)} over {j.n_pairs}"
        shown += " pairs: "
        if j.variant in ended:
            shown += "inconclusive, ended by the budget"
        elif j.diverged:  # the seeds named, and what follows (`analysis.stability`)
            shown += j.note
        elif j.decided:
            shown += j.verdict + (" (cannot be decided by the last look)" if j.futile else "")
        else:
            shown += "open, continues"
        if j.seeds_needed and (j.futile or j.variant in ended or j.look + 1 == record.looks):
            shown += f"; would need about {j.seeds_needed} seeds"
        lines.append(shown)
    return lines


def look_markdown(record: LookRecord) -> str:
    """A look as a Prefect markdown artifact: one row per variant judged."""
    rows = [
        "| Variant | Pairs | Mean diff | Adjusted interval | Verdict | Decided | Seeds needed |",
        "|---|---|---|---|---|---|---|",
    ]
    for j in record.judgements:
        diff = "-" if j.mean_diff is None else f"{j.mean_diff:+.4g}"
        decided = "budget" if j.variant in record.budget_ended else ("yes" if j.decided else "no")
        rows.append(
            f"| {j.variant} | {j.n_pairs} | {diff} | {_interval(j.ci_low, j.ci_high)} | "
            f"{j.verdict} | {decided} | {j.seeds_needed or '-'} |"
        )
    head = (
        f"### Look {record.look + 1} of {record.looks}: {record.seeds} seeds per variant\n\n"
        f"Alpha spent so far {record.alpha_spent:.3g} of {record.alpha:g}; each interval at "
        f"level {record.level:.3g}.\n\n"
    )
    return head + "\n".join(rows)
