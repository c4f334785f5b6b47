"""The report's decision sentence: the plan's decision rule answered exactly, runs named.

In order, the first that applies is the headline:
1. the gate said `fix` (preflight found a defect): the defect, to be fixed;
2. the gate said `reframe`: the question must be revised, and why;
3. the control failed (stopped, rejected or crashed) on some main-phase seeds: which seeds,
   which rule at which step and why; fix the control or the threshold (more seeds cannot help);
4. the answer to `metric.decision_rule`: superiority (adopt the best usefully better variant),
   non-inferiority (adopt the cheapest variant not usefully worse: declared `cost` when the
   control and every candidate have one, else the measured median step time) or equivalence
   (the variants interchangeable with the control).
Then the other verdicts, grouped, so negative results are stated as findings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ablations.analysis.paired import Effect, run_reason
from ablations.plan.sections import MetricSection
from ablations.report.inputs import ReportInputs
from ablations.units import significant

ADOPTABLE = ("better", "not worse")
"""Verdicts that make a variant a candidate under non-inferiority."""


def _signed(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.4f}"


def _names(effects: Sequence[Effect]) -> str:
    return ", ".join(e.variant for e in effects)


def _runs(ids: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids)


def _evidence(effect: Effect, metric: MetricSection) -> str:
    """The difference, its interval and the runs behind it, in words."""
    if effect.ci_low is None:
        interval = "no interval"
    elif effect.level is None:
        interval = f"95% interval {_signed(effect.ci_low)} to {_signed(effect.ci_high)}"
    else:
        interval = f"adjusted interval {_signed(effect.ci_low)} to {_signed(effect.ci_high)}"
        if effect.look is not None:
            interval += f", decided at look {effect.look + 1}"
    return (
        f"{metric.name} {_signed(effect.mean_diff)} versus the control over {effect.n_pairs} "
        f"paired seeds ({interval}; runs {_runs(effect.runs)} against the control's "
        f"{_runs(effect.control_runs)})"
    )


def control_failure(inputs: ReportInputs) -> str | None:
    """The headline when main-phase control runs were stopped, rejected or failed."""
    runs = [
        r.record
        for r in inputs.runs
        if r.record is not None
        and r.planned.phase == "main"
        and r.planned.variant == inputs.control
        and r.record.status != "trimmed"
    ]
    bad = sorted((r for r in runs if r.status != "accepted"), key=lambda r: r.seed)
    if not bad:
        return None
    reasons = "; ".join(f"seed {r.seed}, {r.status}: {run_reason(r)}" for r in bad)
    return (
        f"The control failed on {len(bad)}/{len(runs)} seeds: {reasons} (runs "
        f"{_runs([r.run_id for r in bad])}). Fix the control or the threshold: no variant can "
        "be judged against a control that fails, and more seeds would not change that."
    )


def _cost_of(inputs: ReportInputs, candidates: Sequence[Effect]) -> tuple[dict[str, float], str]:
    """Costs of the control and the candidates: declared if all have one, else measured."""
    names = [inputs.control, *(e.variant for e in candidates)]
    if all(n in inputs.declared_costs for n in names):
        return inputs.declared_costs, "declared cost"
    return inputs.measured_costs, "s per step, measured"


def _superiority(inputs: ReportInputs, effects: Sequence[Effect]) -> str:
    m = inputs.metric
    better = [e for e in effects if e.verdict == "better"]
    if better:
        sign = 1 if m.direction == "maximize" else -1
        best = max(better, key=lambda e: sign * (e.mean_diff or 0.0))
        return (
            f"Adopt **{best.variant}**: {_evidence(best, m)}, at least the useful effect "
            f"{m.useful_effect:g} better."
        )
    return (
        f"Keep the control: no variant is shown usefully better (by {m.useful_effect:g} or more)."
    )


def _non_inferiority(inputs: ReportInputs, effects: Sequence[Effect]) -> str:
    m = inputs.metric
    candidates = [e for e in effects if e.verdict in ADOPTABLE and not e.from_pilot]
    if not candidates:
        undecided = any(e.verdict == "inconclusive" for e in effects)
        return (
            f"Keep the control{' for now' if undecided else ''}: no variant is shown not "
            f"usefully worse than it (no interval's lower end lies above -{m.useful_effect:g})."
        )
    costs, unit = _cost_of(inputs, candidates)
    priced = sorted((e for e in candidates if e.variant in costs), key=lambda e: costs[e.variant])
    control_cost = costs.get(inputs.control)
    if not priced or control_cost is None:
        return (
            f"Not usefully worse than the control: {_names(candidates)}; no {unit} is known "
            "for the control and these, so the cheapest cannot be named."
        )
    cheapest = priced[0]
    cost = costs[cheapest.variant]
    if cost < control_cost:
        return (
            f"Adopt **{cheapest.variant}**, the cheapest configuration not usefully worse than "
            f"the control: {_evidence(cheapest, m)}, its lower end above "
            f"-{m.useful_effect:g}; cost {significant(cost, 3)} against the control's "
            f"{significant(control_cost, 3)} ({unit})."
        )
    return (
        f"Keep the control: it is the cheapest configuration ({significant(control_cost, 3)}, "
        f"{unit}); not usefully worse but no cheaper: {_names(priced)}."
    )


def _equivalence(inputs: ReportInputs, effects: Sequence[Effect]) -> str:
    m = inputs.metric
    same = [e for e in effects if e.verdict == "equivalent"]
    if not same:
        return f"No variant is shown interchangeable with the control within ±{m.useful_effect:g}."
    runs = [run for e in same for run in e.runs]
    return (
        f"Interchangeable with the control within ±{m.useful_effect:g}: {_names(same)} "
        f"(runs {_runs(runs)})."
    )


def findings(effects: Sequence[Effect]) -> str:
    """Every verdict, grouped, with its reason: negative results are kept as findings."""
    groups: dict[str, list[Effect]] = {}
    for e in effects:
        groups.setdefault(e.label, []).append(e)
    out = []
    for label, members in groups.items():
        notes = {e.note for e in members}
        if len(notes) == 1:  # one shared reason, said once
            note = notes.pop()
            out.append(
                f"{label.capitalize()}: {_names(members)}" + (f" ({note})." if note else ".")
            )
        else:
            shown = "; ".join(e.variant + (f" ({e.note})" if e.note else "") for e in members)
            out.append(f"{label.capitalize()}: {shown}.")
    return " ".join(out)


def decision_reached(inputs: ReportInputs) -> str:
    """The decision the campaign supports, answering the plan's decision rule."""
    if inputs.gate_decision == "fix":
        return (
            f"Fix the workload or its data before spending more: preflight found a defect "
            f"({inputs.gate_reason}). The question stands; a rerun repeats the preflight."
        )
    if inputs.gate_decision == "reframe":
        return f"Reframe: the question must be revised before spending more ({inputs.gate_reason})."
    headline = control_failure(inputs)
    if headline is not None:
        return headline
    if not inputs.effects:
        return "No decision: no variant was compared with the control."
    rule = inputs.metric.decision_rule
    answer = {
        "superiority": _superiority,
        "non_inferiority": _non_inferiority,
        "equivalence": _equivalence,
    }[rule](inputs, inputs.effects)
    return f"{answer} {findings(inputs.effects)}".strip()
