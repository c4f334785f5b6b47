"""The report's inputs from a manifest, and `ablate report DIR`: rebuild REPORT.md and its plots
from the output folder alone.

The report is built from a manifest (campaign id, plan hash, ledger URL, gate, one row per
run: the planned run's fields plus its record's) and the registered plan, plus the
predictions the rows' artifacts name: the results step passes the manifest it has just
built (`manifest_inputs`); `ablate report` reads `DIR/manifest.json` and `DIR/plan.yaml`
(`report_inputs`). Nothing outside the folder is consulted, so a copied folder rebuilds too.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ablations.campaign.manifest import BudgetSummary, Manifest, ManifestRun, read_manifest
from ablations.errors import ReportError
from ablations.files.names import MANIFEST, PLAN
from ablations.plan.io import load_plan
from ablations.plan.model import Plan
from ablations.report.build import REPORT_FILE, build_report
from ablations.report.inputs import ReportInputs, ReportRun, assemble_inputs


def run_from_row(row: ManifestRun) -> ReportRun:
    """A manifest row (planned fields + record fields) as a `ReportRun`; no record if pending."""
    return ReportRun(planned=row.planned, record=row.record(), unneeded=row.status == "unneeded")


def _budget_markdown(budget: BudgetSummary | None) -> str | None:
    if budget is None:
        return None
    if budget.markdown is not None:
        return budget.markdown
    items = (budget.model_extra or {}).items()
    rows = "\n".join(f"| {k} | {v} |" for k, v in items if not isinstance(v, (dict, list)))
    return f"| Item | Value |\n|---|---|\n{rows}" if rows else None


def rebuild_report(out_dir: Path) -> Path:
    """Rewrite `out_dir/REPORT.md` and its PNGs from the folder; return the report's path."""
    build_report(out_dir, report_inputs(out_dir))
    return Path(out_dir) / REPORT_FILE


def report_inputs(out_dir: Path) -> ReportInputs:
    """What the report is built from, read from the folder's manifest and plan alone."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    plan_path = out_dir / PLAN
    if not plan_path.exists():
        raise ReportError(f"{plan_path} does not exist; the registered plan is needed")
    plan = load_plan(plan_path, workload="skip")
    gate = manifest.gate
    # A gate written without its `source` (older folders) names nobody, not the default.
    source = gate.source if gate and "source" in gate.model_fields_set else None
    return manifest_inputs(out_dir, plan, manifest, gate_source=source)


def manifest_inputs(
    out_dir: Path, plan: Plan, manifest: Manifest, *, gate_source: str | None
) -> ReportInputs:
    """What the report of the folder `out_dir` is built from: the registered `plan` and the
    `manifest` (its `files` ignored), as the results step built it or as read from the
    folder; `gate_source`: who decided the gate, None to name nobody."""
    try:
        runs = [run_from_row(row) for row in manifest.runs]
    except ValidationError as exc:
        raise ReportError(f"{out_dir / MANIFEST}: a run row is malformed: {exc}") from exc
    gate = manifest.gate
    inputs = assemble_inputs(
        out_dir,
        plan,
        runs,
        campaign_id=manifest.campaign_id,
        plan_hash=manifest.plan_hash,
        gate_decision=gate.decision if gate else None,
        gate_reason=gate.reason if gate else None,
        gate_source=gate_source,
        budget_markdown=_budget_markdown(manifest.budget),
        planned_vs_realized_markdown=manifest.planned_vs_realized_markdown,
        ledger_url=manifest.ledger_url,
        looks=manifest.looks,
        code=code_sentence(manifest),
    )
    return inputs


def code_sentence(manifest: Manifest) -> str | None:
    """`train/ (3 files, sha256 ...), run by ablate 0.1.0 (commit 0123456789ab)`, or None
    for a manifest without its code version."""
    version = manifest.code_version
    if version is None:
        return None
    commit = f" (commit {version.git_commit[:12]})" if version.git_commit else ""
    ablate = f"ablate {version.package}{commit}"
    if version.workload is None:
        return f"{ablate}, its own workload"
    return f"{version.workload.line()}, run by {ablate}"
