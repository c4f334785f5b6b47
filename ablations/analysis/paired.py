"""Paired-seed effects: each variant against the control on the same seeds.

For a variant with n seeds where both it and the control were accepted, the differences
d_i = variant_i - control_i (metric units) give the mean, the sample standard deviation, a
two-sided 95% t interval and the paired t-test (the same numbers as `scipy.stats.ttest_rel`).

Every variant gets a verdict (`ablations.analysis.verdicts` documents how: from its runs when
any was stopped, rejected or failed; `not run` when trimmed; else from its interval under the
plan's decision rule). Only accepted main-phase runs enter an interval; the others are listed
apart with their reasons (`excluded_runs`), and pilot runs are never paired.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict
from scipy import special

from ablations.analysis.looks import BUDGET_ENDED, seeds_named
from ablations.analysis.sequential import Judgement, fixed_design, judge_look
from ablations.analysis.verdicts import interval_verdict, runs_verdict, trimmed_note
from ablations.plan.experiment import MetricSection
from ablations.plan.section import Category, Verdict
from ablations.run.records import RunRecord, RunStatus

CONFIDENCE = 0.95
verdict_of = interval_verdict
"""The interval's verdict (kept under its earlier name)."""


class Effect(BaseModel):
    """One variant's paired difference from the control on one metric."""

    model_config = ConfigDict(frozen=True)

    variant: str
    category: Category
    metric: str
    direction: Literal["maximize", "minimize"]
    useful_effect: float
    n_pairs: int
    """Seeds on which both the variant and the control were accepted."""
    seeds: list[int]
    control_mean: float | None = None
    variant_mean: float | None = None
    mean_diff: float | None = None
    """Mean of variant - control over the pairs, in metric units (None without pairs)."""
    sd: float | None = None
    """Sample standard deviation of the differences (None below two pairs)."""
    ci_low: float | None = None
    ci_high: float | None = None
    """95% t interval of the mean difference (None below two pairs)."""
    t: float | None = None
    p_value: float | None = None
    verdict: Verdict
    note: str = ""
    """Why the verdict is what it is, in words (single seed, seeds stopped, trimmed...)."""
    from_pilot: bool = False
    """The verdict comes from the variant's pilot runs (its main runs were trimmed)."""
    runs: list[str] = []
    """Run ids the verdict rests on: the paired variant runs, or the runs that failed."""
    control_runs: list[str] = []
    """Run ids of the control runs paired with `runs` (interval verdicts only)."""
    look: int | None = None
    """The look (0-based) that decided it, or its last look; None without looks."""
    level: float | None = None
    """The nominal two-sided level of the interval shown (the look's, corrected across
    variants and looks); None for an uncorrected 95% interval."""
    alpha_spent: float | None = None
    """Family-wise alpha spent up to that look."""
    seeds_needed: int | None = None
    """For a variant left open: about how many seeds it would need to be decided."""
    futile: bool = False
    """Decided because no claim was reachable by the design's last look."""

    @property
    def label(self) -> str:
        """The verdict as shown: `input truncated in the pilot` for a verdict from the pilot."""
        return f"{self.verdict} in the pilot" if self.from_pilot else self.verdict


class ExcludedRun(BaseModel):
    """A main-phase run that enters no effect, and why."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    variant: str
    seed: int
    status: RunStatus
    reason: str


def run_reason(record: RunRecord) -> str:
    """Why a run is not an accepted result, in one line."""
    if record.stop is not None:
        return f"{record.stop.rule} at step {record.stop.step}: {record.stop.message}"
    if record.error is not None:
        return f"{record.error.type}: {record.error.message}"
    if record.status == "trimmed":
        return "trimmed at the gate"
    if record.status == "rejected":
        if record.rejection is not None:
            return record.rejection.message
        return "rejected before reasons were recorded (see its final metric)"
    return record.status


def excluded_runs(records: Sequence[RunRecord]) -> list[ExcludedRun]:
    """Main-phase runs that are not accepted, with their reasons."""
    return [
        ExcludedRun(
            run_id=r.run_id, variant=r.variant, seed=r.seed, status=r.status, reason=run_reason(r)
        )
        for r in records
        if r.phase == "main" and r.status != "accepted"
    ]


def metric_table(records: Sequence[RunRecord], metric: str) -> pd.DataFrame:
    """Accepted main-phase values: one row per seed, one column per variant (NaN: no value)."""
    rows = [
        {"seed": r.seed, "variant": r.variant, "value": r.metrics[metric]}
        for r in records
        if r.phase == "main"
        and r.status == "accepted"
        and metric in r.metrics
        and math.isfinite(r.metrics[metric])
    ]
    if not rows:
        return pd.DataFrame(dtype=float)
    frame = pd.DataFrame(rows)
    if frame.duplicated(["seed", "variant"]).any():
        dup = frame[frame.duplicated(["seed", "variant"], keep=False)].iloc[0]
        raise ValueError(
            f"two accepted main runs of {dup['variant']!r} on seed {dup['seed']}; "
            "each variant runs each seed once"
        )
    return frame.pivot(index="seed", columns="variant", values="value").sort_index()


def _effect(
    variant: str,
    category: Category,
    pairs: pd.DataFrame,
    metric: MetricSection,
) -> Effect:
    common = {
        "variant": variant,
        "category": category,
        "metric": metric.name,
        "direction": metric.direction,
        "useful_effect": metric.useful_effect,
        "n_pairs": len(pairs),
        "seeds": [int(s) for s in pairs.index],
    }
    if pairs.empty:
        return Effect(
            **common,
            verdict="inconclusive",
            note="no seed on which both this variant and the control were accepted",
        )
    diff = pairs["variant"] - pairs["control"]
    n = len(diff)
    mean = float(diff.mean())
    means = {
        "control_mean": float(pairs["control"].mean()),
        "variant_mean": float(pairs["variant"].mean()),
    }
    if n == 1:
        return Effect(
            **common,
            **means,
            mean_diff=mean,
            verdict="inconclusive",
            note="single seed: one difference, no interval; add seeds to decide",
        )
    sd = float(diff.std(ddof=1))
    note = ""
    if sd == 0.0:
        low = high = mean  # every pair moved by the same amount: the interval collapses
        t_stat = math.copysign(math.inf, mean) if mean else math.nan
        p = 0.0 if mean else 1.0
        note = "every pair differs by the same amount: zero spread, the interval is a point"
    else:
        se = sd / math.sqrt(n)
        t_stat = mean / se
        # Student's t quantile and tail from scipy.special, which scipy.stats.t calls
        # itself: the same numbers, without a second of importing scipy.stats.
        half = float(special.stdtrit(n - 1, 0.5 + CONFIDENCE / 2)) * se
        low, high = mean - half, mean + half
        p = float(2 * special.stdtr(n - 1, -abs(t_stat)))
    verdict = interval_verdict(low, high, metric)
    if verdict == "inconclusive" and not note:
        note = "the interval crosses an edge of the useful-effect band; more seeds would narrow it"
    return Effect(
        **common,
        **means,
        mean_diff=mean,
        sd=sd,
        ci_low=low,
        ci_high=high,
        t=t_stat if math.isfinite(t_stat) else None,
        p_value=p,
        verdict=verdict,
        note=note,
    )


def paired_effects(
    records: Sequence[RunRecord],
    metric: MetricSection,
    control: str = "control",
    *,
    trimmed_source: str | None = None,
    trimmed_reason: str | None = None,
    judgements: Mapping[str, Judgement] | None = None,
) -> list[Effect]:
    """One effect per variant (in order of first appearance), paired with `control` by seed.

    `trimmed_source` and `trimmed_reason` (the gate's `source` and `reason`) explain the
    verdict of a variant whose main runs were all trimmed. `judgements` (each variant's
    judgement at the look that decided it) give the corrected interval and verdict on the
    seeds that look saw; without them, every variant is judged once on all its pairs,
    corrected across the variants (`fixed_design`)."""
    table = metric_table(records, metric.name)
    names: dict[str, Category] = {}
    for r in records:
        if r.phase == "main" and r.variant != control:
            names.setdefault(r.variant, r.category)
    effects = []
    for name, category in names.items():
        if control in table and name in table:
            pairs = table[[control, name]].dropna()
            pairs.columns = pd.Index(["control", "variant"])
        else:
            pairs = pd.DataFrame(columns=["control", "variant"], dtype=float)
        effect = _effect(name, category, pairs, metric)
        effects.append(effect)
    if judgements is None:
        judgements = _judged_once(effects, table, control, metric)
    return [
        _with_runs(
            _with_judgement(e, judgements.get(e.variant)),
            records,
            control,
            trimmed_source,
            trimmed_reason,
        )
        for e in effects
    ]


def _judged_once(
    effects: Sequence[Effect], table: pd.DataFrame, control: str, metric: MetricSection
) -> dict[str, Judgement]:
    """Every variant judged once on all its pairs, corrected across the variants (a folder
    without looks: written before them)."""
    if control not in table or not effects:
        return {}
    diffs = {
        e.variant: [float(d) for d in (table[e.variant] - table[control]).dropna()]
        for e in effects
        if e.variant in table
    }
    most = max((len(d) for d in diffs.values()), default=0)
    if most == 0:
        return {}
    design = fixed_design(most, comparisons=len(effects))
    values = {name: table[name].dropna().to_dict() for name in [control, *diffs]}
    return {
        name: seeds_named(judgement, values[name], values[control], design.looks, metric)
        for name, judgement in judge_look(design, 0, metric, diffs).items()
    }


ACROSS_AN_EDGE = "the adjusted interval crosses an edge of the useful-effect band"
"""Why an interval verdict is `inconclusive` (the interval the verdict comes from: corrected
across the variants and looks, never the uncorrected 95% one, which may itself claim)."""


def _note(effect: Effect, judgement: Judgement) -> str:
    """Why the verdict is what it is, from the same corrected interval as the verdict: the
    looks' own note when they ended the variant early (futility, the budget); for an open
    one, the band's edge it crosses and the seeds it would need."""
    if judgement.futile or judgement.note.startswith(BUDGET_ENDED):
        return judgement.note
    if judgement.n_pairs < 2:
        return effect.note  # a single seed or none: no interval to speak of
    if effect.sd == 0.0:
        return effect.note  # every pair moved alike: the interval is a point
    if judgement.verdict != "inconclusive" or judgement.diverged:
        return judgement.note  # its seeds and what they rule out, or the seeds that diverged
    if judgement.seeds_needed:
        return f"{ACROSS_AN_EDGE}; about {judgement.seeds_needed} seeds would decide it"
    return f"{ACROSS_AN_EDGE}; its mean sits on the edge, so more seeds may not decide it"


def _with_judgement(effect: Effect, judgement: Judgement | None) -> Effect:
    """The effect on the seeds its deciding look saw, with that look's corrected interval."""
    if judgement is None:
        return effect
    update: dict[str, object] = {
        "look": judgement.look,
        "level": judgement.level,
        "alpha_spent": judgement.alpha_spent,
        "seeds_needed": judgement.seeds_needed,
        "futile": judgement.futile,
        "verdict": judgement.verdict,
        "note": _note(effect, judgement),
    }
    if judgement.n_pairs:
        update.update(
            n_pairs=judgement.n_pairs,
            mean_diff=judgement.mean_diff,
            sd=judgement.sd,
            ci_low=judgement.ci_low,
            ci_high=judgement.ci_high,
        )
    return effect.model_copy(update=update)


def _with_runs(
    effect: Effect,
    records: Sequence[RunRecord],
    control: str,
    trimmed_source: str | None,
    trimmed_reason: str | None,
) -> Effect:
    """The effect with the runs behind it, and the verdict its runs impose (if any)."""
    main = [r for r in records if r.phase == "main" and r.variant == effect.variant]
    finished = [r for r in main if r.status != "trimmed"]
    by_seed = {r.seed: r.run_id for r in main}
    controls = {r.seed: r.run_id for r in records if r.phase == "main" and r.variant == control}
    paired = [by_seed[s] for s in effect.seeds]
    effect = effect.model_copy(
        update={"runs": paired, "control_runs": [controls[s] for s in effect.seeds]}
    )
    failure = runs_verdict(finished)
    if failure is not None:
        verdict, note = failure
        if effect.ci_low is not None:
            note += f"; the interval is over the {effect.n_pairs} accepted pairs only"
        failed = [r.run_id for r in finished if r.status != "accepted"]
        return effect.model_copy(update={"verdict": verdict, "note": note, "runs": failed + paired})
    if main and not finished:
        why = trimmed_note(trimmed_source, trimmed_reason)
        pilot = [r for r in records if r.phase == "pilot" and r.variant == effect.variant]
        failure = runs_verdict(pilot)
        if failure is None:
            return effect.model_copy(update={"verdict": "not run", "note": why})
        verdict, note = failure
        return effect.model_copy(
            update={
                "verdict": verdict,
                "note": f"pilot: {note}; {why}",
                "from_pilot": True,
                "runs": [r.run_id for r in pilot],
            }
        )
    return effect


def effects_frame(effects: Sequence[Effect]) -> pd.DataFrame:
    """The effects as a DataFrame, one row per variant."""
    columns = list(Effect.model_fields)
    return pd.DataFrame([e.model_dump() for e in effects], columns=columns)
