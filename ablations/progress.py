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
    """What a finished run's progress line says in brackets: its stop rule, why it failed, or
    its metrics; and where it resumed from when a checkpoint of an earlier attempt was used."""
    detail: str
    if record.stop:
        detail = record.stop.rule
    elif record.error:
        detail = str(record.error) + (" (retried by a rerun)" if record.lost else "")
    else:
        detail = ", ".join(f"{k}={v:.4f}" for k, v in record.metrics.items())
    step = record.checkpoint.resumed_from_step
    return detail + (f"; resumed {record.run_id} from step {step}" if step else "")


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
            "seconds": round(r.timings.total, 2),
            "slot": r.slot or "",
        }
        for r in records
    ]
