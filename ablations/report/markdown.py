"""REPORT.md from `ReportInputs`: pure text, no disk, no plotting."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ablations.analysis.flips import ErrorAnalysis
from ablations.analysis.paired import Effect, run_reason
from ablations.analysis.stability import WHAT_TO_DO
from ablations.files.names import CURVES_PNG, EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG
from ablations.report.decision import decision_reached, evidence_table
from ablations.report.inputs import ReportInputs, ReportRun
from ablations.text.units import metric, significant

__all__ = ["decision_reached", "render_report", "table"]

MAX_FLIPS_SHOWN = 8
"""Input ids listed per variant and seed; the full lists are in the error analysis model."""


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _num(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else metric(value)


def _signed(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.{digits}f}"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; cells are escaped."""
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _decided_at(inputs: ReportInputs, look: int | None) -> str:
    if look is None or not inputs.looks:
        return "-"
    record = inputs.looks[min(look, len(inputs.looks) - 1)]
    return f"look {look + 1}/{record.looks} ({record.seeds} seeds)"


def _error_control(inputs: ReportInputs) -> str:
    """The one sentence that says what every claim's error is."""
    if not inputs.looks:
        return (
            "Intervals are corrected across the variants (their share of 5% split jointly, "
            "from the correlation the shared control induces), so every claim holds with "
            "family-wise error at most 5%."
        )
    last = inputs.looks[-1]
    alpha = last.alpha
    looks = "one look" if last.looks == 1 else f"{last.looks} looks"
    return (
        f"Every claim (better, not worse, worse, equivalent) holds with family-wise error at "
        f"most {alpha:g} across all variants and {looks}: each interval is the repeated "
        "confidence interval of the look that decided it (alpha spent over the looks"
        f"{f' by {inputs.spending}' if inputs.spending and last.looks > 1 else ''}, "
        "split among the variants, each interval on the variant's own spread)."
    )


def _effects_section(inputs: ReportInputs, plots: set[str]) -> list[str]:
    m = inputs.metric
    out = [
        "## Effects",
        "",
        f"{m.name} ({m.direction}), variant - control paired by seed, accepted main-phase runs "
        f"only. Useful-effect band: ±{m.useful_effect:g}; decision rule: "
        f"{m.decision_rule.replace('_', '-')}. {_error_control(inputs)} A verdict other than "
        "better, worse, not worse or equivalent comes from the variant's runs (see the note).",
        "",
    ]
    if not inputs.effects:
        return [*out, "No variant was compared with the control.", ""]
    rows = [
        [
            e.variant,
            e.category,
            e.n_pairs,
            _num(e.control_mean),
            _num(e.variant_mean),
            _signed(e.mean_diff),
            _num(e.sd),
            f"[{_signed(e.ci_low)}, {_signed(e.ci_high)}]" if e.ci_low is not None else "-",
            _decided_at(inputs, e.look),
            "-" if e.alpha_spent is None else significant(e.alpha_spent, 3),
            f"**{e.label}**",
            e.note + (f" (about {e.seeds_needed} seeds needed)" if _open(e) else ""),
        ]
        for e in inputs.effects
    ]
    header = [
        "Variant",
        "Category",
        "Pairs",
        "Control",
        "Variant mean",
        "Mean diff",
        "SD",
        "Adjusted interval",
        "Decided at",
        "Alpha spent",
        "Verdict",
        "Note",
    ]
    out += [table(header, rows), ""]
    if EFFECTS_PNG in plots:
        out += [
            f"![Effects with adjusted intervals against the useful-effect band]({EFFECTS_PNG})",
            "",
        ]
    return out


def _open(effect: Effect) -> bool:
    """An interval verdict left open, whose note does not already name the seeds it needs."""
    return (
        effect.verdict == "inconclusive"
        and effect.seeds_needed is not None
        and "seeds" not in effect.note
    )


def _looks_section(inputs: ReportInputs) -> list[str]:
    """Each look: seeds, alpha spent, and what it decided."""
    if not inputs.looks:
        return []
    rows = []
    for record in inputs.looks:
        decided = [
            f"{j.variant}: {j.verdict}" + (" (futile)" if j.futile else "")
            for j in record.judgements
            if j.decided
        ]
        rows.append(
            [
                record.look + 1,
                record.seeds,
                significant(record.alpha_spent, 3),
                significant(1 - record.level, 3),
                "; ".join(decided) or "-",
                ", ".join(record.still_open) or "-",
                ", ".join(record.budget_ended) or "-",
            ]
        )
    header = [
        "Look",
        "Seeds",
        "Alpha spent",
        "Alpha per variant",
        "Decided",
        "Open",
        "Ended by the budget",
    ]
    return ["## Looks", "", table(header, rows), ""]


def _findings_section(inputs: ReportInputs) -> list[str]:
    """Per factor: hypothesis, levels, verdicts and the next decision each verdict selects."""
    if not inputs.factors:
        return []
    effects = {e.variant: e for e in inputs.effects}
    out = ["## Findings by factor", ""]
    for factor in inputs.factors:
        out += [f"### {factor.name}", ""]
        out += [f"Hypothesis: {factor.hypothesis or 'none written in the plan.'}", ""]
        rows = []
        for variant, level in factor.levels.items():
            effect = effects.get(variant)
            verdict = effect.verdict if effect else None
            rows.append(
                [
                    level,
                    variant,
                    f"**{effect.label}**" if effect else "not reached",
                    effect.note if effect else "",
                    (factor.next_decision(variant, verdict) or _default_next(verdict))
                    if verdict
                    else "-",
                ]
            )
        out += [table(["Level", "Variant", "Verdict", "Why", "Next decision"], rows), ""]
    return out


def _default_next(verdict: str) -> str:
    """The next decision where the plan names none: what to do with an `unstable` variant."""
    return WHAT_TO_DO if verdict == "unstable" else "-"


def _not_accepted_section(runs: Sequence[ReportRun]) -> list[str]:
    rows = [
        [
            r.record.run_id,
            r.planned.variant,
            r.planned.seed,
            r.planned.phase,
            r.record.status,
            r.record.steps_done,
            run_reason(r.record),
        ]
        for r in runs
        if r.record is not None and r.record.status != "accepted"
    ]
    out = ["## Stopped, failed, rejected and trimmed runs", ""]
    if not rows:
        return [*out, "None: every finished run was accepted.", ""]
    header = ["Run", "Variant", "Seed", "Phase", "Status", "Steps done", "Reason"]
    return [*out, "These enter no effect.", "", table(header, rows), ""]


def _pilot_section(inputs: ReportInputs) -> list[str]:
    pilot = [r for r in inputs.runs if r.planned.phase == "pilot"]
    if not pilot:
        return []
    rows = [
        [
            r.planned.run_id,
            r.planned.variant,
            r.planned.seed,
            r.planned.steps,
            r.record.status if r.record else "pending",
            _num(r.record.metrics.get(inputs.metric.name)) if r.record else "-",
        ]
        for r in pilot
    ]
    header = ["Run", "Variant", "Seed", "Steps", "Status", inputs.metric.name]
    return [
        "## Pilot runs",
        "",
        "Shorter runs that informed the gate; they enter no effect.",
        "",
        table(header, rows),
        "",
    ]


def _errors_section(errors: ErrorAnalysis | None, plots: set[str], control: str) -> list[str]:
    out = ["## Error analysis", ""]
    if errors is None:
        return [*out, "No class predictions were exported: no error analysis.", ""]
    if errors.per_class_change:
        out += [
            f"Per-class accuracy change versus {control} (mean over paired seeds):",
            "",
            table(
                ["Variant", *errors.labels],
                [
                    [v, *(_signed(c.get(label), 3) for label in errors.labels)]
                    for v, c in errors.per_class_change.items()
                ],
            ),
            "",
        ]
    if PER_CLASS_PNG in plots:
        out += [f"![Per-class accuracy change]({PER_CLASS_PNG})", ""]
    if errors.flips:
        rows = []
        for f in errors.flips:
            shown = ", ".join(
                f"{x.input_id} ({x.label}->{x.variant_predicted})"
                for x in f.regressions[:MAX_FLIPS_SHOWN]
            )
            rows.append([f.variant, f.seed, len(f.regressions), len(f.improvements), shown])
        out += [
            f"Held-out inputs {control} gets right and the variant wrong (regressions), and the "
            "reverse (improvements):",
            "",
            table(["Variant", "Seed", "Regressions", "Improvements", "First regressions"], rows),
            "",
        ]
    out += ["<details><summary>Confusion matrices (rows: true, columns: predicted)</summary>", ""]
    for run_id, matrix in errors.confusion.items():
        rows = [[label, *row] for label, row in zip(errors.labels, matrix, strict=True)]
        out += [f"**{run_id}**", "", table(["", *errors.labels], rows), ""]
    return [*out, "</details>", ""]


def _planned_vs_realized(inputs: ReportInputs) -> list[str]:
    out = ["## Planned vs realized", ""]
    if inputs.planned_vs_realized_markdown:
        return [*out, inputs.planned_vs_realized_markdown.strip(), ""]
    statuses = ["accepted", "rejected", "stopped", "failed", "trimmed", "unneeded", "pending"]
    rows = []
    for phase in ("pilot", "main"):
        runs = [r for r in inputs.runs if r.planned.phase == phase]
        if not runs:
            continue
        counts = [sum(r.status == s for r in runs) for s in statuses]
        # Steps this phase trains: a main run's first steps are its pilot's, counted there.
        planned_steps = sum(r.planned.trained_steps for r in runs)
        done = sum(max(0, r.record.steps_done - r.planned.start_step) for r in runs if r.record)
        rows.append([phase, len(runs), *counts, planned_steps, done])
    header = ["Phase", "Registered", *statuses, "Steps planned", "Steps done"]
    return [*out, table(header, rows), ""]


def _frameworks(inputs: ReportInputs) -> str:
    """`lightning 2.6.6` (versions that differed between runs joined by `/`), or empty."""
    seen: dict[str, set[str]] = {}
    for record in inputs.records:
        for name, version in (record.environment.frameworks if record.environment else {}).items():
            seen.setdefault(name, set()).add(version)
    return ", ".join(f"{name} {' / '.join(sorted(seen[name]))}" for name in sorted(seen))


def render_report(inputs: ReportInputs, plots: Sequence[str] = ()) -> str:
    """REPORT.md's text; `plots` names the PNGs that exist beside it (others are not linked)."""
    shown = set(plots)
    out = [
        f"# Campaign {inputs.campaign_id}",
        "",
        f"**Question.** {inputs.question}",
        "",
        f"**Decision it feeds.** {inputs.decision}",
        "",
        f"**Decision reached.** {decision_reached(inputs)}",
        "",
    ]
    evidence = evidence_table(inputs)
    if evidence:  # the ids stay out of the sentence, which notifications carry
        out += [
            "Runs behind it, paired by seed:",
            "",
            table(["Variant", "Seeds", "Runs"], evidence),
            "",
        ]
    if inputs.hypothesis:
        out += [f"**Hypothesis.** {inputs.hypothesis}", ""]
    if inputs.plan_hash:
        out += [f"Plan hash `{inputs.plan_hash}`.", ""]
    frameworks = _frameworks(inputs)
    if frameworks:  # an adapter's runs: the framework's loop is part of the result
        out += [f"**Frameworks.** {frameworks} (as the runs imported them).", ""]
    if inputs.code:
        out += [f"**Code.** {inputs.code}.", ""]
    if inputs.verification:
        out += [f"**Verification.** {inputs.verification}", ""]
    out += ["## Gate", ""]
    if inputs.gate_decision is None:
        out += ["No gate decision was recorded.", ""]
    else:
        who = f" ({inputs.gate_source})" if inputs.gate_source else ""
        out += [
            f"**{inputs.gate_decision}**{who}: {inputs.gate_reason or 'no reason given'}",
            "",
        ]
    out += _effects_section(inputs, shown)
    out += _looks_section(inputs)
    if CURVES_PNG in shown:
        out += [
            "## Learning curves",
            "",
            "Per variant against the control (grey): training loss, "
            f"{inputs.metric.name} at each evaluation, and the paired difference to the control "
            "with the useful-effect band shaded. Lines: the mean over seeds; bands: min to max "
            "over seeds (runs that trained to the end); dashed with an x: a stopped or failed "
            "run, ending where its rule stopped it. Pilot steps are part of their main run.",
            "",
            f"![Learning curves per variant, seeds as bands]({CURVES_PNG})",
            "",
        ]
    out += _findings_section(inputs)
    out += _not_accepted_section(inputs.runs)
    out += _pilot_section(inputs)
    out += _errors_section(inputs.errors, shown, inputs.control)
    out += [
        "## Budget",
        "",
        (inputs.budget_markdown or "Not available for this campaign.").strip(),
        "",
    ]
    out += _planned_vs_realized(inputs)
    if TIMELINE_PNG in shown:
        out += ["## Timeline", "", f"![Runs per slot over time]({TIMELINE_PNG})", ""]
    if inputs.ledger_url:
        out += [
            "## Ledger",
            "",
            f"Optuna study `{inputs.campaign_id}` at `{inputs.ledger_url}` (relative to this "
            f"folder): `optuna-dashboard {inputs.ledger_url}` from inside the folder.",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"
