"""`ablate report DIR`: rebuild REPORT.md and its plots from the output folder alone.

Reads `DIR/manifest.json` (campaign id, plan hash, ledger URL, gate, one row per run: the
planned run's fields plus its record's) and `DIR/plan.yaml`, plus the predictions the rows'
artifacts name. Nothing outside the folder is consulted, so a copied folder rebuilds too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ablations.campaign_state import MANIFEST, read_manifest
from ablations.errors import InputError
from ablations.plan_io import load_plan
from ablations.records import RunRecord
from ablations.report.build import REPORT_FILE, build_report
from ablations.report.inputs import ReportInputs, ReportRun, assemble_inputs
from ablations.variants import PlannedRun


class ReportError(InputError):
    """The output folder lacks what a report is rebuilt from."""


def run_from_row(row: dict[str, Any]) -> ReportRun:
    """A manifest row (planned fields + record fields) as a `ReportRun`; no record if pending."""
    planned = PlannedRun.model_validate({k: row[k] for k in PlannedRun.model_fields if k in row})
    if row.get("status") in (None, "pending"):
        return ReportRun(planned=planned)
    fields = {k: row[k] for k in RunRecord.model_fields if k in row and row[k] is not None}
    if isinstance(fields.get("artifacts"), list):  # manifest format 2: hashed entries
        fields["artifacts"] = {
            a["kind"]: a["path"] for a in fields["artifacts"] if a["kind"] != "record"
        }
    return ReportRun(planned=planned, record=RunRecord.model_validate(fields))


def _budget_markdown(budget: Any) -> str | None:
    if not isinstance(budget, dict) or not budget:
        return None
    if isinstance(budget.get("markdown"), str):
        return str(budget["markdown"])
    rows = "\n".join(f"| {k} | {v} |" for k, v in budget.items() if not isinstance(v, (dict, list)))
    return f"| Item | Value |\n|---|---|\n{rows}" if rows else None


def rebuild_report(out_dir: Path) -> Path:
    """Rewrite `out_dir/REPORT.md` and its PNGs from the folder; return the report's path."""
    build_report(out_dir, report_inputs(out_dir))
    return Path(out_dir) / REPORT_FILE


def report_inputs(out_dir: Path) -> ReportInputs:
    """What the report is built from, read from the folder's manifest and plan alone."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    plan_path = out_dir / "plan.yaml"
    if not plan_path.exists():
        raise ReportError(f"{plan_path} does not exist; the registered plan is needed")
    plan = load_plan(plan_path, check_workload=False)
    try:
        runs = [run_from_row(row) for row in manifest["runs"]]
    except (ValidationError, KeyError, TypeError) as exc:
        raise ReportError(f"{out_dir / MANIFEST}: a run row is malformed: {exc}") from exc
    gate = manifest.get("gate") or {}
    inputs = assemble_inputs(
        out_dir,
        plan,
        runs,
        campaign_id=manifest.get("campaign_id"),
        plan_hash=manifest.get("plan_hash"),
        gate_decision=gate.get("decision"),
        gate_reason=gate.get("reason"),
        gate_source=gate.get("source"),
        budget_markdown=_budget_markdown(manifest.get("budget")),
        planned_vs_realized_markdown=manifest.get("planned_vs_realized_markdown"),
        ledger_url=manifest.get("ledger_url"),
    )
    return inputs
