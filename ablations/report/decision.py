"""The report's decision sentence: the plan's decision rule answered, in plain words.

In order, the first that applies is the headline:
1. the gate said `fix` (preflight found a defect): the defect, to be fixed;
2. the gate said `reframe`: the question must be revised, and why;
3. the control failed (stopped, rejected or crashed) on some main-phase seeds: which seeds,
   which rule at which step; fix the control or the threshold (more seeds cannot help);
4. the answer to `metric.decision_rule`: superiority (adopt the best usefully better variant),
   non-inferiority (adopt the cheapest variant not usefully worse: declared `cost` when the
   control and every candidate have one, else the measured median step time) or equivalence
   (the variants interchangeable with the control).
Then the other verdicts, grouped by name, so negative results are stated as findings.

The sentence is what a notification, the flow run's state message and `ablate run`'s last
line show: plain text (no Markdown) of at most `MAX_CHARS` characters. The run ids behind it
and every variant's reasons are REPORT.md's tables (`evidence_table`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ablations.analysis.paired import Effect, run_reason
from ablations.plan.experiment import MetricSection
from ablations.report.inputs import ReportInputs
from ablations.text.units import significant

ADOPTABLE = ("better", "not worse")
"""Verdicts that make a variant a candidate under non-inferiority."""
MAX_CHARS = 300
"""The decision sentence's length at most: a notification's, a state message's line."""
MORE = " (more in REPORT.md)"


def _signed(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:+.4f}"


def _names(effects: Sequence[Effect]) -> str:
    return ", ".join(e.variant for e in effects)


def _fit(text: str, room: int = MAX_CHARS) -> str:
    """`text`, cut at a word before `room` characters and pointing to the report when cut."""
    if len(text) <= room:
        return text
    cut = text[: room - len(MORE) - 1].rsplit(" ", 1)[0].rstrip(",;:(")
    return f"{cut}…{MORE}"


def _evidence(effect: Effect, metric: MetricSection) -> str:
    """The difference and its interval, in words (the runs are in the report's table)."""
    if effect.ci_low is None:
        interval = "no interval"
    else:
        kind = "95% interval" if effect.level is None else "adjusted interval"
        interval = f"{kind} {_signed(effect.ci_low)} to {_signed(effect.ci_high)}"
    return f"{metric.name} {_signed(effect.mean_diff)} over {effect.n_pairs} seeds ({interval})"


def _near_end(metric: MetricSection) -> tuple[str, str]:
    """The end of an interval that must clear the margin to show `not usefully worse`, and
    the side it must lie on: the lower end above -u when larger is better, the upper end
    below +u when smaller is (a loss)."""
    u = f"{metric.useful_effect:g}"
    if metric.direction == "maximize":
        return "lower end", f"above -{u}"
    return "upper end", f"below +{u}"


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
    head = f"The control failed on {len(bad)}/{len(runs)} seeds: "
    tail = (
        ". Fix the control or the threshold: no variant can be judged against a control that "
        "fails, and more seeds would not change that."
    )
    reasons = "; ".join(f"seed {r.seed}, {r.status}: {run_reason(r)}" for r in bad)
    return head + _fit(reasons, MAX_CHARS - len(head) - len(tail)) + tail


def _cost_of(inputs: ReportInputs, candidates: Sequence[Effect]) -> tuple[dict[str, float], str]:
    """Costs of the control and the candidates: declared if all have one, else measured."""
    names = [inputs.control, *(e.variant for e in candidates)]
    if all(n in inputs.declared_costs for n in names):
        return inputs.declared_costs, "declared cost"
    return inputs.measured_costs, "s/step, measured"


def adopted(inputs: ReportInputs) -> Effect | None:
    """The variant the decision adopts, if any (its runs head the report's evidence table)."""
    effects = inputs.effects
    if inputs.metric.decision_rule == "superiority":
        better = [e for e in effects if e.verdict == "better"]
        sign = 1 if inputs.metric.direction == "maximize" else -1
        return max(better, key=lambda e: sign * (e.mean_diff or 0.0)) if better else None
    if inputs.metric.decision_rule == "non_inferiority":
        candidates = [e for e in effects if e.verdict in ADOPTABLE and not e.from_pilot]
        if not candidates:
            return None
        costs, _ = _cost_of(inputs, candidates)
        priced = sorted(
            (e for e in candidates if e.variant in costs), key=lambda e: costs[e.variant]
        )
        control_cost = costs.get(inputs.control)
        if priced and control_cost is not None and costs[priced[0].variant] < control_cost:
            return priced[0]
    return None


def _superiority(inputs: ReportInputs, effects: Sequence[Effect]) -> str:
    m = inputs.metric
    best = adopted(inputs)
    if best is not None:
        return (
            f"Adopt {best.variant}: {_evidence(best, m)}, at least the useful effect "
            f"{m.useful_effect:g} better than the control."
        )
    return (
        f"Keep the control: no variant is shown usefully better (by {m.useful_effect:g} or more)."
    )


def _non_inferiority(inputs: ReportInputs, effects: Sequence[Effect]) -> str:
    m = inputs.metric
    end, side = _near_end(m)
    candidates = [e for e in effects if e.verdict in ADOPTABLE and not e.from_pilot]
    if not candidates:
        undecided = any(e.verdict in ("inconclusive", "unstable") for e in effects)
        return (
            f"Keep the control{' for now' if undecided else ''}: no variant is shown not "
            f"usefully worse than it (no adjusted interval's {end} lies {side})."
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
            f"Adopt {cheapest.variant}, the cheapest not usefully worse than the control: "
            f"{_evidence(cheapest, m)}, its {end} {side}; cost {significant(cost, 3)} against "
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
    return f"Interchangeable with the control within ±{m.useful_effect:g}: {_names(same)}."


def findings(effects: Sequence[Effect], room: int = MAX_CHARS, but: str | None = None) -> str:
    """Every verdict with its variants, grouped (`Worse: depth=1.`), but the adopted
    variant `but`, in at most `room` characters: negative results are findings. Each
    variant's reason is in the report."""
    groups: dict[str, list[Effect]] = {}
    for e in effects:
        if e.variant != but:
            groups.setdefault(e.label, []).append(e)
    said = [f"{label.capitalize()}: {_names(members)}." for label, members in groups.items()]
    kept: list[str] = []
    for i, group in enumerate(said):  # whole groups, while they fit with the pointer
        left = len(said) - i - 1
        tail = f" (+{left} more in REPORT.md)" if left else ""
        if len(" ".join([*kept, group])) + len(tail) > room:
            break
        kept.append(group)
    omitted = len(said) - len(kept)
    if omitted:
        kept.append(f"(+{omitted} more in REPORT.md)")
    return _fit(" ".join(kept), room)


def decision_reached(inputs: ReportInputs) -> str:
    """The decision the campaign supports, answering the plan's decision rule: plain text of
    at most `MAX_CHARS` characters."""
    if inputs.gate_decision == "fix":
        head, tail = (
            "Fix the workload or its data before spending more: preflight found a defect (",
            ("). The question stands; a rerun repeats the preflight."),
        )
        return head + _fit(inputs.gate_reason or "", MAX_CHARS - len(head) - len(tail)) + tail
    if inputs.gate_decision == "reframe":
        head, tail = "Reframe: the question must be revised before spending more (", ")."
        return head + _fit(inputs.gate_reason or "", MAX_CHARS - len(head) - len(tail)) + tail
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
    answer = _fit(answer)
    room = MAX_CHARS - len(answer) - 1
    chosen = adopted(inputs)
    but = chosen.variant if chosen else None
    rest = findings(inputs.effects, room, but) if room > len(MORE) + 20 else ""
    return f"{answer} {rest}".strip()


def evidence_table(inputs: ReportInputs) -> list[list[str]]:
    """REPORT.md's rows of the runs behind the decision: the adopted variant's and the
    control's paired runs (`variant | seeds | runs`); none without an adopted variant."""
    chosen = adopted(inputs)
    if chosen is None:
        return []
    return [
        [chosen.variant, ", ".join(str(s) for s in chosen.seeds), ", ".join(chosen.runs)],
        [inputs.control, ", ".join(str(s) for s in chosen.seeds), ", ".join(chosen.control_runs)],
    ]
