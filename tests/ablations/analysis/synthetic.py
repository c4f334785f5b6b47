"""A small synthetic campaign written into a folder: plan, records, predictions, manifest.

Reused by the analysis, report and ledger tests, so every number they check comes from here.
Main-phase accuracy, by variant and seed (control 0.90 / 0.92 / 0.91):

- width=128: +0.034 +0.036 +0.035 -> better (interval above +0.01)
- depth=1:   -0.054 -0.056 -0.055 -> worse
- optimizer=sgd: +0.001 -0.001 0.000 -> equivalent (superiority, the default rule)
  (spreads alike and small: three seeds decide even corrected across the five variants)
- width=16:  -0.050 -0.060, seed 2 stopped by the quality rule -> fails threshold (2 pairs)
- dropout=0.3: seed 0 accepted, seeds 1 and 2 failed -> failed (a single pair)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ablations.plan.model import Plan, parse_plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.plan.variants import PlannedRun
from ablations.run.records import RunError, RunRecord, Stop

if TYPE_CHECKING:  # imported late: spawned ledger writers stay free of pandas and scipy
    from ablations.report.inputs import ReportRun

PLAN: dict[str, Any] = {
    "campaign": {
        "id": "synthetic",
        "question": "Does width matter for held-out accuracy?",
        "decision": "Keep the cheapest configuration that is not usefully worse.",
    },
    "workload": {"params": {"batch_size": 64}, "steps": 100, "eval_every": 50},
    "control": {"params": {"width": 64, "depth": 2, "dropout": 0.1, "optimizer": "adam"}},
    "factors": {
        "width": {"category": "essential", "levels": [16, 128]},
        "depth": {"category": "useful", "levels": [1]},
        "dropout": {"category": "useful", "levels": [0.3]},
        "optimizer": {"category": "exploratory", "levels": ["sgd"]},
    },
    "seeds": [0, 1, 2],
    "metric": {"name": "accuracy", "threshold": 0.5, "useful_effect": 0.01},
    "pilot": {"variants": ["control"], "seeds": [0], "steps": 50},
}

CONTROL = {0: 0.90, 1: 0.92, 2: 0.91}
DIFFS: dict[str, dict[int, float]] = {
    "width=128": {0: 0.034, 1: 0.036, 2: 0.035},
    "depth=1": {0: -0.054, 1: -0.056, 2: -0.055},
    "optimizer=sgd": {0: 0.001, 1: -0.001, 2: 0.0},
    "width=16": {0: -0.050, 1: -0.060},
    "dropout=0.3": {0: 0.020},
}
STOPPED = {("width=16", 2)}
FAILED = {("dropout=0.3", 1), ("dropout=0.3", 2)}
STOP_MESSAGE = "accuracy 0.31 below the threshold 0.5"
ERROR = RunError(type="RuntimeError", message="CUDA error: an illegal memory access")

# Six held-out inputs, classes 0/1/2. Control: wrong on input 'e'. width=128: right on 'e',
# wrong on 'b' (a regression and an improvement). Everyone else predicts like the control.
LABELS = ["0", "0", "1", "1", "2", "2"]
INPUTS = ["a", "b", "c", "d", "e", "f"]
CONTROL_PRED = ["0", "0", "1", "1", "1", "2"]
WIDE_PRED = ["0", "1", "1", "1", "2", "2"]


@dataclass
class Synthetic:
    """The folder's plan, hash and runs (planned + record)."""

    plan: Plan
    plan_hash: str
    runs: list[ReportRun]

    @property
    def records(self) -> list[RunRecord]:
        return [r.record for r in self.runs if r.record is not None]

    def run(self, variant: str, seed: int, phase: str = "main") -> ReportRun:
        return next(
            r
            for r in self.runs
            if (r.planned.variant, r.planned.seed, r.planned.phase) == (variant, seed, phase)
        )


def _csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [",".join(header), *(",".join(str(c) for c in row) for row in rows)]
    path.write_text("\n".join(lines) + "\n")


def _record(out_dir: Path, planned: PlannedRun, start: float, slot: str) -> RunRecord:
    key = (planned.variant, planned.seed)
    base = CONTROL[planned.seed]
    if planned.phase == "pilot":
        value = 0.5  # a short run: deliberately unlike the main control, never paired
    elif planned.variant == "control":
        value = base
    else:
        value = base + DIFFS[planned.variant].get(planned.seed, -0.6)
    common: dict[str, Any] = {
        "run_id": planned.run_id,
        "variant": planned.variant,
        "seed": planned.seed,
        "category": planned.category,
        "phase": planned.phase,
        "slot": slot,
        "started_at": start,
        "ended_at": start + 60.0,
    }
    if key in FAILED and planned.phase == "main":
        return RunRecord(**common, status="failed", error=ERROR, steps_done=20)
    evaluations = [{"step": float(planned.steps // 2), "accuracy": value - 0.1}]
    if key in STOPPED and planned.phase == "main":
        stop = Stop(rule="quality", message=STOP_MESSAGE, step=50, value=0.31)
        return RunRecord(
            **common, status="stopped", stop=stop, steps_done=50, evaluations=evaluations
        )
    evaluations.append({"step": float(planned.steps), "accuracy": value})
    predicted = WIDE_PRED if planned.variant == "width=128" else CONTROL_PRED
    artifacts = {"predictions": f"predictions/{planned.run_id}.csv"}
    _csv(
        out_dir / artifacts["predictions"],
        ["input_id", "label", "predicted"],
        [list(row) for row in zip(INPUTS, LABELS, predicted, strict=True)],
    )
    return RunRecord(
        **common,
        status="accepted",
        steps_done=planned.steps,
        metrics={"accuracy": value, "loss": 0.3},
        evaluations=evaluations,
        artifacts=artifacts,
    )


def manifest_row(run: ReportRun) -> dict[str, Any]:
    """A manifest row as `ablations.results.write` writes it: planned fields plus the record's."""
    row: dict[str, Any] = run.planned.model_dump(mode="json")
    if run.record is None:
        row["status"] = "pending"
    else:
        exclude = {"variant", "seed", "category", "phase"}
        row.update(run.record.model_dump(mode="json", exclude=exclude))
    return row


def write_synthetic(
    out_dir: Path, *, ledger_url: str | None = None, gate: dict[str, str] | None = None
) -> Synthetic:
    """Write plan.yaml, predictions and manifest.json of the synthetic campaign."""
    from ablations.report.inputs import ReportRun

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "plan.yaml").write_text(yaml.safe_dump(PLAN, sort_keys=False))
    plan = parse_plan(PLAN)
    digest = plan_hash(plan)
    runs = []
    for i, planned in enumerate(planned_runs(plan, digest)):
        slot = f"cpu-{i % 2}"
        runs.append(
            ReportRun(planned=planned, record=_record(out_dir, planned, 1000.0 + 30 * i, slot))
        )
    manifest = {
        "campaign_id": plan.campaign.id,
        "plan_hash": digest,
        "ledger_url": ledger_url,
        "gate": gate or {"decision": "continue", "reason": "the pilot was healthy"},
        "runs": [manifest_row(r) for r in runs],
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return Synthetic(plan=plan, plan_hash=digest, runs=runs)
