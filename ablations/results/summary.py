"""A finished campaign in a few lines for the Prefect UI: the main runs' table (the runs that
never ran included) and the decision sentence, from the manifest."""

from __future__ import annotations

from ablations.campaign.manifest import Manifest
from ablations.campaign.progress import record_rows

_NOT_RUN = {
    "trimmed": "trimmed at the gate",
    "unneeded": "not needed: its variant was decided at an earlier look",
    "pending": "not finished",
}


def final_rows(manifest: Manifest, metric: str) -> list[dict[str, object]]:
    """The main phase's runs table for the UI, the runs that never ran included (trimmed at the
    gate, or not needed by a look) with why."""
    rows: list[dict[str, object]] = []
    for run in manifest.runs:
        planned = run.planned
        if planned.phase != "main":
            continue
        record = run.record()
        if record is not None and run.status != "trimmed":
            rows += record_rows([record], metric)
            continue
        rows.append(
            {
                "run": planned.run_id,
                "variant": planned.variant,
                "seed": planned.seed,
                "status": run.status,
                metric: None,
                "stop": "",
                "reason": _NOT_RUN.get(run.status, ""),
                "seconds": 0.0,
                "slot": "",
            }
        )
    return rows


def decision_sentence(manifest: Manifest) -> str:
    """The campaign's outcome in one sentence: the report's decision, else the gate's."""
    if manifest.decision_reached:
        return manifest.decision_reached
    gate = manifest.gate
    if gate is None:
        return "no decision was reached"
    return f"gate decided {gate.decision}: {gate.reason}"
