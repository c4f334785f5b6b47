"""Terminal progress lines for `ablate run` (Prefect's own logs stay quiet)."""

from __future__ import annotations

import sys
import time

from ablations.records import RunRecord

_START = time.monotonic()


def say(text: str) -> None:
    """Print one progress line with the seconds since the campaign process started."""
    print(f"[{time.monotonic() - _START:7.1f}s] {text}", file=sys.stdout, flush=True)


def outcome(record: RunRecord) -> str:
    """A run's outcome in a few words: the stop, the rejection or the error, else its metrics."""
    from ablations.units import metric

    if record.stop is not None:
        return f"{record.stop.rule} at step {record.stop.step}: {record.stop.message}"
    if record.rejection is not None:
        return record.rejection.message
    if record.error is not None:
        return f"{record.error.type}: {record.error.message}"
    return ", ".join(f"{k}={metric(v)}" for k, v in record.metrics.items())


def record_rows(records: list[RunRecord], metric: str) -> list[dict[str, object]]:
    """Rows of a runs table (a Prefect table artifact): one small dict per run."""
    return [
        {
            "run": r.run_id,
            "variant": r.variant,
            "seed": r.seed,
            "status": r.status,
            metric: r.metrics.get(metric),
            "stop": f"{r.stop.rule}: {r.stop.message}" if r.stop else "",
            "reason": outcome(r) if r.status != "accepted" else "",
            "seconds": round(r.timings.total, 2),
            "slot": r.slot or "",
        }
        for r in records
    ]
