"""The looks of a campaign's main phase as records: what each look decided, and what follows.

A look judges every variant still open on its paired seeds so far and is recorded once
(`LookRecord`, in `looks.json` and the manifest); a later look never revisits an earlier one.
`judge_recorded_look` is the one entry point from the registered plan and the run records to
a look's judgements: the campaign (`campaign.looks.decide_look`) and `ablate verify`
(`campaign.looks.rejudged_looks`, every look again from a folder) both call it. From the
records follow which variants are still open, which registered runs no look needed, and each
variant's final judgement.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, model_serializer

from ablations.analysis.sequential import DIVERGED, Judgement, LookDesign, judge_look
from ablations.analysis.stability import named
from ablations.analysis.verdicts import runs_verdict
from ablations.plan.design import (
    alpha_of,
    boundaries_of,
    correction_of,
    futility_of,
    interim_share_of,
    spending_of,
)
from ablations.plan.experiment import MetricSection
from ablations.plan.model import Plan
from ablations.plan.variants import CONTROL, PlannedRun, variant_names
from ablations.run.records import RunRecord


def look_design(plan: Plan) -> LookDesign:
    """The plan's seed design as the statistics see it: looks, alpha, spending (and its
    interim share), correction, futility, and the number of variants compared with the
    control (every registered one: trimming a variant does not free its share of alpha)."""
    futility = futility_of(plan.seeds)
    return LookDesign(
        looks=plan.look_sizes,
        alpha=alpha_of(plan.seeds),
        spending=spending_of(plan.seeds),
        interim_share=interim_share_of(plan.seeds),
        comparisons=max(1, len(variant_names(plan.factors, plan.interactions)) - 1),
        correction=correction_of(plan.seeds),
        boundaries=boundaries_of(plan.seeds),
        futility=futility.threshold,
        futility_from=futility.from_look,
    )


class LookRecord(BaseModel):
    """One look of the main phase, as decided (never rewritten)."""

    model_config = ConfigDict(frozen=True)

    look: int
    """0-based index of the look in the design (shown 1-based)."""
    looks: int
    """Looks in the design."""
    seeds: int
    """Cumulative seeds per variant at this look."""
    alpha: float
    """The design's family-wise error rate over all looks and variants."""
    alpha_spent: float
    """Family-wise alpha spent up to and including this look."""
    level: float
    """The nominal two-sided level of each variant's interval at this look's first step (a
    claim at the look frees alpha for the others: each judgement has the level it had)."""
    comparisons: int | None = None
    """Variants this look's first step split its error among (None in looks recorded before
    it)."""
    rho: float | None = None
    """Correlation between the variants' statistics the split assumed."""
    judgements: list[Judgement]
    """Each variant open before this look, as judged at it."""
    budget_ended: list[str] = []
    """Variants left open here because the window (less its reserve) cannot hold the next
    look's runs: ended by the budget, not the data."""
    decided_at: float
    """Epoch seconds when the look was recorded."""

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: Any) -> dict[str, Any]:
        """Fields added since looks were first recorded are written only when set, so an
        older record is written back byte for byte."""
        data: dict[str, Any] = handler(self)
        for key in ("comparisons", "rho"):
            if key not in self.model_fields_set:
                data.pop(key, None)
        return data

    @property
    def still_open(self) -> list[str]:
        """Variants that go on to the next look."""
        ended = set(self.budget_ended)
        return [j.variant for j in self.judgements if not j.decided and j.variant not in ended]

    @property
    def claims(self) -> int:
        """Variants this look decided by a claim (each frees its share of alpha)."""
        return sum(j.claimed for j in self.judgements)


class Looks(BaseModel):
    """`looks.json`: every look recorded so far, in order."""

    model_config = ConfigDict(frozen=True)

    looks: list[LookRecord] = []

    def open_at(self, look: int, candidates: Sequence[str]) -> list[str]:
        """Variants (of `candidates`) still open when look `look` starts."""
        if look == 0 or not self.looks:
            return list(candidates)
        previous = self.looks[look - 1]
        keep = set(previous.still_open)
        return [v for v in candidates if v in keep]

    def claimed_before(self, look: int) -> int:
        """Variants decided by a claim at looks before `look`."""
        return sum(record.claims for record in self.looks[:look])

    def with_look(self, record: LookRecord) -> Looks:
        """These looks and the next one (looks are recorded in order, once)."""
        if record.look != len(self.looks):
            raise ValueError(f"look {record.look + 1} recorded after {len(self.looks)} looks")
        return Looks(looks=[*self.looks, record])

    def final_judgements(self) -> dict[str, Judgement]:
        """Each variant's judgement at the look that decided it (or its last look)."""
        final: dict[str, Judgement] = {}
        for record in self.looks:
            ended = set(record.budget_ended)
            for judgement in record.judgements:
                if judgement.variant in ended:
                    judgement = judgement.model_copy(
                        update={"decided": True, "note": budget_note(judgement)}
                    )
                final[judgement.variant] = judgement
        return final


BUDGET_ENDED = "ended by the budget, not the data"
"""How the note of a variant the window could no longer pay for begins."""


def budget_note(judgement: Judgement) -> str:
    """Why a variant the budget ended has no claim, and what it would have needed."""
    need = f"; it would need about {judgement.seeds_needed} seeds" if judgement.seeds_needed else ""
    return f"ended by the budget, not the data: the window could not hold the next look{need}"


def unneeded_runs(looks: Looks, main_runs: Iterable[PlannedRun], finished: set[str]) -> set[str]:
    """Main runs without a record that no look needed: their variant was decided (or, for the
    control, every variant was) at a look before theirs, so they never start."""
    decided: list[set[str]] = []  # decided[k]: variants decided at looks 0..k
    still_open: list[bool] = []
    so_far: set[str] = set()
    for record in looks.looks:
        so_far |= {j.variant for j in record.judgements} - set(record.still_open)
        decided.append(set(so_far))
        still_open.append(bool(record.still_open))
    unneeded = set()
    for run in main_runs:
        if run.run_id in finished or run.look == 0 or not decided:
            continue
        before = run.look - 1  # the look that decides whether this run starts
        if before >= len(decided):
            if still_open[-1]:
                continue  # that look is not recorded yet: pending, not unneeded
            before = len(decided) - 1  # every variant ended earlier: no later look comes
        if run.variant == CONTROL:
            if not still_open[before]:
                unneeded.add(run.run_id)
        elif run.variant in decided[before]:
            unneeded.add(run.run_id)
    return unneeded


def diffs_by_variant(
    values: Mapping[str, Mapping[int, float]], variants: Iterable[str], seeds: Iterable[int]
) -> dict[str, list[float]]:
    """Paired differences variant - control on the given seeds where both have a value."""
    control = values.get(CONTROL, {})
    seeds = list(seeds)
    out: dict[str, list[float]] = {}
    for variant in variants:
        mine = values.get(variant, {})
        out[variant] = [mine[s] - control[s] for s in seeds if s in mine and s in control]
    return out


def look_candidates(plan: Plan, dropped: Collection[str], main: Iterable[PlannedRun]) -> list[str]:
    """Variants the looks judge: every one compared with the control, unless the gate
    dropped all its main runs (`dropped`: run ids)."""
    kept: dict[str, bool] = {}
    for run in main:
        if run.variant != CONTROL:
            kept[run.variant] = kept.get(run.variant, False) or run.run_id not in dropped
    return [name for name, keep in kept.items() if keep]


def judge_recorded_look(
    plan: Plan,
    records: Iterable[RunRecord],
    look: int,
    open_now: Sequence[str],
    claimed: int,
) -> list[Judgement]:
    """The judgements of `look` from the registered plan and the run records: every variant
    of `open_now` (open before this look), decided by its runs when any of its main runs of
    the look's seeds was stopped, rejected or failed, else by its paired interval on those
    seeds (`judge_look`, `claimed` variants decided by a claim at earlier looks). Runs of
    later seeds are never read."""
    design = look_design(plan)
    seeds = set(plan.seed_list[: design.looks[look]])
    metric = plan.metric.name
    by_variant: dict[str, list[RunRecord]] = {}
    for record in records:
        if record.phase == "main" and record.seed in seeds and record.status != "trimmed":
            by_variant.setdefault(record.variant, []).append(record)
    by_runs: dict[str, Judgement] = {}
    values: dict[str, dict[int, float]] = {}
    for variant in [CONTROL, *open_now]:
        finished = by_variant.get(variant, [])
        failure = runs_verdict(finished) if variant != CONTROL else None
        if failure is not None:
            verdict, note = failure
            by_runs[variant] = Judgement.without_interval(
                variant,
                look,
                design.boundary(look, claimed=claimed),
                verdict=verdict,
                decided=True,
                note=note,
            )
            continue
        values[variant] = {
            r.seed: r.metrics[metric]
            for r in finished
            if r.status == "accepted" and metric in r.metrics
        }
    judged = [v for v in open_now if v not in by_runs]
    diffs = diffs_by_variant(values, judged, sorted(seeds))
    intervals = judge_look(design, look, plan.metric, diffs, claimed) if judged else {}
    return [
        by_runs.get(v)
        or seeds_named(intervals[v], values[v], values[CONTROL], design.looks, plan.metric)
        for v in open_now
    ]


def seeds_named(
    judgement: Judgement,
    variant: Mapping[int, float],
    control: Mapping[int, float],
    looks: tuple[int, ...],
    metric: MetricSection,
) -> Judgement:
    """`judgement` with the seeds it saw diverge named in its note, with their runs' values
    (`variant`, `control`: metric by seed)."""
    if not judgement.diverged:
        return judgement
    words = named(variant, control, looks, metric) or DIVERGED
    return judgement.model_copy(update={"note": judgement.note.replace(DIVERGED, words)})
