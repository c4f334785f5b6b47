"""Sequential decisions: spending, boundaries, critical values, the look logic, sizing, and a
small simulation that fails when the family-wise error is no longer controlled."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats
from statsmodels.stats.power import TTestPower

from ablations.analysis.pooling import bartlett_p, critical_value
from ablations.analysis.sequential import (
    LookDesign,
    fixed_design,
    judge_look,
    seeds_for_power,
)
from ablations.analysis.spending import nominal_errors, spent, spent_by_look
from ablations.plan.sections import DecisionRule, MetricSection

U = 0.01
LOOKS = (3, 5, 8, 12)


def metric(rule: DecisionRule = "superiority", direction: str = "maximize") -> MetricSection:
    return MetricSection.model_validate(
        {"threshold": 0.5, "useful_effect": U, "decision_rule": rule, "direction": direction}
    )


@pytest.mark.parametrize("spending", ["obrien_fleming", "pocock", "equal"])
def test_spending_is_monotone_and_reaches_alpha_at_the_last_look(spending: str) -> None:
    cumulative = spent_by_look(spending, 0.05, LOOKS)  # type: ignore[arg-type]
    assert all(b > a for a, b in pairwise(cumulative))
    assert cumulative[-1] == 0.05
    assert cumulative[0] > 0.0


def test_each_spending_function_has_its_known_values() -> None:
    # Lan-DeMets O'Brien-Fleming-like, alpha/2 to each side: 4 - 4 Phi(z_{1-a/4} / sqrt(t))
    z = stats.norm.ppf(1 - 0.05 / 4)
    assert spent("obrien_fleming", 0.05, 0.5, 0, 3) == pytest.approx(
        4 * stats.norm.sf(z / math.sqrt(0.5)), rel=1e-9
    )
    assert spent("obrien_fleming", 0.05, 0.5, 0, 3) == pytest.approx(0.00305, abs=1e-5)
    assert spent("pocock", 0.05, 0.5, 0, 3) == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 2))
    assert spent("equal", 0.05, 0.5, 1, 4) == pytest.approx(0.025)  # look 2 of 4: half


def test_boundaries_match_the_published_obrien_fleming_values() -> None:
    # Lan-DeMets O'Brien-Fleming, 4 equally spaced looks, alpha 0.05 two-sided (gsDesign's
    # R's ldbounds, gsDesign's sfLDOF at alpha/2 per side): z = 4.333, 2.963, 2.359, 2.014.
    errors = nominal_errors("obrien_fleming", 0.05, (1, 2, 3, 4))
    z = [stats.norm.isf(e / 2) for e in errors]
    assert z == pytest.approx([4.333, 2.963, 2.359, 2.014], abs=0.01)


def test_boundaries_are_at_least_the_spending_increments() -> None:
    cumulative = spent_by_look("pocock", 0.0125, LOOKS)
    increments = np.diff((0.0, *cumulative))
    errors = nominal_errors("pocock", 0.0125, LOOKS)
    assert errors[0] == pytest.approx(increments[0])
    assert all(e >= i * 0.999 for e, i in zip(errors, increments, strict=True))
    assert errors[-1] > increments[-1] * 1.05  # the joint normal is worth something


def test_design_boundary_spends_alpha_over_m_per_variant() -> None:
    design = LookDesign(looks=LOOKS, comparisons=4)
    bounds = [design.boundary(k) for k in range(4)]
    assert [b.seeds for b in bounds] == list(LOOKS)
    assert bounds[-1].alpha_spent == pytest.approx(0.05)
    assert [b.alpha_spent for b in bounds] == sorted(b.alpha_spent for b in bounds)
    errors = nominal_errors("obrien_fleming", 0.05 / 4, LOOKS)
    assert [1 - b.level for b in bounds] == pytest.approx(list(errors))


@pytest.mark.parametrize("df", [2, 4.5, 11, 25.3])
@pytest.mark.parametrize("level", [0.95, 0.9875, 0.99999])
def test_critical_values_are_scipy_t_quantiles(df: float, level: float) -> None:
    assert critical_value(df, level) == pytest.approx(stats.t.ppf(0.5 + level / 2, df), rel=1e-9)


def test_bartlett_matches_scipy() -> None:
    rng = np.random.default_rng(3)
    groups = [rng.normal(0, s, 8) for s in (1.0, 1.3, 0.8, 2.5)]
    variances = [float(np.var(g, ddof=1)) for g in groups]
    assert bartlett_p(variances, 8) == pytest.approx(stats.bartlett(*groups).pvalue, rel=1e-9)


def test_a_fixed_design_is_the_bonferroni_corrected_paired_t() -> None:
    control = np.array([0.90, 0.92, 0.91, 0.93, 0.89])
    variant = control + np.array([0.012, 0.018, 0.009, 0.021, 0.015])
    design = fixed_design(5, comparisons=4)
    j = judge_look(design, 0, metric(), {"v": list(variant - control)})["v"]
    expected = stats.ttest_rel(variant, control).confidence_interval(1 - 0.05 / 4)
    assert (j.ci_low, j.ci_high) == pytest.approx((expected.low, expected.high), rel=1e-9)
    assert j.level == pytest.approx(1 - 0.05 / 4)
    assert j.decided and not j.futile and j.df == 4 and not j.pooled
    assert j.verdict == "inconclusive"  # low end 0.0077 < u
    assert j.seeds_needed is not None and j.seeds_needed > 5


def test_agreeing_spreads_are_pooled_with_satterthwaite_df() -> None:
    rng = np.random.default_rng(0)
    control = rng.normal(0, U, 8)
    diffs = {f"v{i}": list(rng.normal(0, U, 8) - control) for i in range(4)}
    judged = judge_look(fixed_design(8, 4), 0, metric(), diffs)
    sds = {j.sd for j in judged.values()}
    assert all(j.pooled for j in judged.values()) and len(sds) == 1
    pooled = math.sqrt(np.mean([np.var(d, ddof=1) for d in diffs.values()]))
    assert sds.pop() == pytest.approx(pooled)
    j = judged["v0"]
    assert j.df is not None and 7 < j.df < 28  # shared control: less than 4 x 7
    assert j.ci_low is not None and j.ci_high is not None and j.sd is not None
    half = stats.t.ppf(0.5 + j.level / 2, j.df) * j.sd / math.sqrt(8)
    assert (j.ci_high - j.ci_low) / 2 == pytest.approx(half, rel=1e-9)


def test_a_variant_with_a_far_larger_spread_is_not_pooled() -> None:
    rng = np.random.default_rng(1)
    diffs = {f"v{i}": list(rng.normal(0, U, 8)) for i in range(3)}
    diffs["wide"] = list(rng.normal(0, 6 * U, 8))
    judged = judge_look(fixed_design(8, 4), 0, metric(), diffs)
    assert not any(j.pooled for j in judged.values())
    assert judged["wide"].df == 7


def test_a_clear_effect_is_decided_early_and_a_null_one_runs_to_the_end() -> None:
    design = LookDesign(looks=LOOKS, comparisons=4)
    rng = np.random.default_rng(7)
    clear = 6 * U + rng.normal(0, 0.3 * U, 12)
    # A true effect of 1.6u: never far enough from the margin to decide, never hopeless.
    unclear = np.array([2.7, 0.7] * 6) * U
    decided_at = {}
    last = {}
    open_ = {"clear": clear, "unclear": unclear}
    for k, seeds in enumerate(LOOKS):
        judged = judge_look(design, k, metric(), {n: list(d[:seeds]) for n, d in open_.items()})
        for name, j in judged.items():
            last[name] = j
            if j.decided:
                decided_at[name] = k
                del open_[name]
    assert decided_at["clear"] < 3 and last["clear"].verdict == "better"
    assert decided_at["unclear"] == 3 and last["unclear"].verdict == "inconclusive"
    assert not last["unclear"].futile
    needed = last["unclear"].seeds_needed
    assert needed is not None and needed > 12
    # at that count, this mean and spread decide at the last look's level (and not one less)
    level, sd, gain = last["unclear"].level, np.std(unclear, ddof=1), unclear.mean()
    for n, decides in ((needed, True), (needed - 1, False)):
        assert bool(gain - stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n) >= U) is decides
    assert "would need about" in last["unclear"].note


def test_a_variant_on_the_margin_stops_for_futility() -> None:
    design = LookDesign(looks=LOOKS, comparisons=4)
    on_margin = [U * x for x in (1.5, 0.4, 1.1, 0.9, 1.1)]  # mean exactly u
    j = judge_look(design, 1, metric(), {"v": on_margin})["v"]
    assert j.decided and j.futile and j.verdict == "inconclusive"
    assert j.seeds_needed is None  # the mean sits on the edge: no count decides it
    assert "chance of a claim" in j.note


def test_minimize_flips_the_sign_and_open_variants_continue() -> None:
    design = LookDesign(looks=(3, 6), comparisons=1, spending="pocock")
    lower_is_better = [-3.1 * U, -2.9 * U, -3.0 * U]
    j = judge_look(design, 0, metric(direction="minimize"), {"v": lower_is_better})["v"]
    assert j.verdict == "better" and j.decided
    wobbly = [1.5 * U, 4.5 * U, 3.0 * U]
    j = judge_look(design, 0, metric(), {"v": wobbly})["v"]
    assert not j.decided and j.note == "open: continues to 6 seeds"
    assert j.seeds_needed is None


def test_a_single_pair_gives_no_interval() -> None:
    j = judge_look(fixed_design(3, 2), 0, metric(), {"a": [U], "b": []})
    assert j["a"].ci_low is None and j["a"].mean_diff == U and j["a"].decided
    assert j["b"].mean_diff is None and j["b"].verdict == "inconclusive"


def test_bad_designs_are_refused() -> None:
    with pytest.raises(ValidationError, match="increasing"):
        LookDesign(looks=(3, 3, 8), comparisons=2)
    with pytest.raises(ValidationError, match="alpha must be between 0 and 1"):
        LookDesign(looks=(3,), comparisons=2, alpha=1.5)
    with pytest.raises(ValueError, match="outside the design"):
        judge_look(fixed_design(3, 1), 1, metric(), {"v": [U, U, U]})


@pytest.mark.parametrize("sd", [0.5 * U, U, 2 * U])
def test_seeds_for_power_is_statsmodels_one_sided_t(sd: float) -> None:
    design = LookDesign(looks=LOOKS, comparisons=4)
    error = 1 - design.boundary(3).level
    n = seeds_for_power(sd, metric(), design)
    exact = TTestPower().solve_power(U / sd, alpha=error / 2, power=0.8, alternative="larger")
    assert n == math.ceil(exact)
    assert seeds_for_power(sd, metric(), design, effect_multiple=4.0) < n


def test_seeds_for_power_flags_the_unreachable() -> None:
    design = fixed_design(12, 4)
    assert seeds_for_power(1000 * U, metric(), design) == 10_000
    with pytest.raises(ValueError, match="effect_multiple must exceed 1"):
        seeds_for_power(U, metric(), design, effect_multiple=1.0)


@pytest.mark.parametrize("rule", ["superiority", "non_inferiority"])
def test_family_wise_false_claims_stay_controlled_at_the_margin(rule: DecisionRule) -> None:
    """300 campaigns of 4 variants exactly on the margin -u, shared control noise. Uncorrected
    95% intervals at every look make a false claim in about 40% of them."""
    design = LookDesign(looks=LOOKS, comparisons=4)
    rng = np.random.default_rng(2024)
    arms = rng.standard_normal((300, 5, 12)) * U / math.sqrt(2)
    diffs = -U + arms[:, 1:] - arms[:, :1]
    false = 0
    for campaign in diffs.tolist():
        open_ = set(range(4))
        claims = []
        for k, seeds in enumerate(LOOKS):
            judged = judge_look(
                design, k, metric(rule), {str(v): campaign[v][:seeds] for v in sorted(open_)}
            )
            for name, j in judged.items():
                if j.decided:
                    open_.discard(int(name))
                    claims.append(j.verdict)
        # on the margin every claim is false, boundary claims included
        false += any(c in ("better", "not worse", "worse", "equivalent") for c in claims)
    assert false / 300 <= 0.09  # 5% target; 0.09 is 3.5 binomial SDs above it
