"""Seeds seen to diverge: the outlier test's critical values, its level on healthy variants
over the looks, what it catches, and what a look does with a variant it flags."""

from __future__ import annotations

import numpy as np
import pytest

from ablations.analysis.design import LookDesign
from ablations.analysis.sequential import judge_look
from ablations.analysis.simulate import run_campaigns
from ablations.analysis.stability import (
    LEVEL,
    critical_values,
    diverged,
    excluded_rate,
    flagged,
    look_level,
    withheld,
)
from ablations.analysis.verdicts import INTERVAL_VERDICTS
from ablations.plan.experiment import MetricSection
from ablations.plan.section import DecisionRule

LOOKS = (3, 5, 8, 12)


def metric(rule: DecisionRule = "non_inferiority", direction: str = "maximize") -> MetricSection:
    return MetricSection.model_validate(
        {"threshold": 0.0, "useful_effect": 1.0, "decision_rule": rule, "direction": direction}
    )


def test_the_first_critical_value_is_grubbs_one_sided() -> None:
    # Grubbs' one-sided 5% critical values (Grubbs & Beck 1972): 2.176 at 10, 2.462 at 15
    assert critical_values(10, 0.05)[0] == pytest.approx(2.176, abs=1e-3)
    assert critical_values(15, 0.05)[0] == pytest.approx(2.409, abs=1e-3)


def test_the_level_is_split_over_the_tested_looks_and_steps() -> None:
    assert look_level(LOOKS, 5) == pytest.approx(LEVEL / 3 / 2)  # looks of 5, 8, 12; 2 steps
    assert look_level((4, 12), 12) == pytest.approx(LEVEL / 2)


def test_a_healthy_variant_is_flagged_at_most_at_the_level_over_the_looks() -> None:
    rng = np.random.default_rng(7)
    for effect in (-1.0, 0.0):  # on the margin: half its seeds are usefully worse
        diffs = effect + rng.standard_normal((40_000, 1, 12)) * rng.uniform(0.5, 3.0)
        seen = np.zeros(40_000, dtype=bool)
        for n in LOOKS:
            seen |= flagged(diffs[..., :n], LOOKS, metric())[:, 0]
        assert 0.002 < seen.mean() <= LEVEL


@pytest.mark.parametrize("collapsed", [1, 2])
def test_one_or_two_collapsed_seeds_in_twelve_are_caught(collapsed: int) -> None:
    rng = np.random.default_rng(collapsed)
    diffs = rng.standard_normal((4000, 1, 12))
    diffs[..., :collapsed] -= 10.0
    marks = diverged(diffs, LOOKS, metric())
    assert flagged(diffs, LOOKS, metric()).mean() >= 0.95
    assert marks[..., collapsed:].mean() < 0.001  # the healthy seeds are not named


def test_a_seed_still_as_good_as_its_control_has_not_diverged() -> None:
    diffs = np.array([[[4.0, 4.02, 3.98, 4.01, 3.99, 4.0, 4.03, 3.97, 0.5]]])
    assert not flagged(diffs, LOOKS, metric()).any()  # far below its others, yet +0.5
    diffs[..., -1] = -1.5
    assert flagged(diffs, LOOKS, metric()).all()


def test_the_side_that_collapses_follows_the_metric_direction() -> None:
    up = np.array([[[0.0, 0.01, -0.01, 0.02, -0.02, 0.0, 0.01, 9.0]]])
    assert flagged(up, LOOKS, metric(direction="minimize")).all()  # a loss 9 higher
    assert not flagged(up, LOOKS, metric()).any()  # an accuracy 9 higher is no collapse


def test_fewer_than_five_seeds_are_not_tested() -> None:
    diffs = np.array([[[0.0, 0.01, -0.01, -50.0]]])
    assert not flagged(diffs, LOOKS, metric()).any()


def test_only_the_claims_to_adopt_are_withheld() -> None:
    codes = np.arange(len(INTERVAL_VERDICTS))
    kept = withheld(codes, np.ones(codes.shape, dtype=bool))
    assert [INTERVAL_VERDICTS[c] for c in kept] == [
        "inconclusive",
        "inconclusive",
        "worse",
        "inconclusive",
        "inconclusive",
    ]
    assert (withheld(codes, np.zeros(codes.shape, dtype=bool)) == codes).all()


def test_what_n_seeds_none_diverged_exclude() -> None:
    assert excluded_rate(12) == pytest.approx(0.221, abs=1e-3)
    assert excluded_rate(5) == pytest.approx(0.451, abs=1e-3)
    assert (1 - excluded_rate(8)) ** 8 == pytest.approx(0.05)


def test_a_look_continues_a_flagged_variant_and_its_last_look_leaves_it_unclaimed() -> None:
    design = LookDesign(looks=LOOKS, comparisons=2)
    steady = [0.02 * k for k in (1, -1, 2, -2, 0, 1, -1, 0)]
    collapsed = [*steady[:6], -10.0, steady[7]]
    diffs = {"steady": steady, "collapsed": collapsed}
    at_8 = judge_look(design, 2, metric(), diffs)
    assert at_8["steady"].verdict == "not worse" and at_8["steady"].decided
    assert at_8["collapsed"].verdict == "inconclusive"
    assert not at_8["collapsed"].decided and not at_8["collapsed"].futile
    assert at_8["collapsed"].model_dump()["diverged"] is True
    assert "diverged" not in at_8["steady"].model_dump()  # older looks read back unchanged
    more = [*collapsed, 0.01, -0.01, 0.0, 0.02]
    at_12 = judge_look(design, 3, metric(), {"collapsed": more}, claimed=1)
    assert at_12["collapsed"].decided and at_12["collapsed"].verdict == "unstable"


def test_simulated_campaigns_flag_a_collapse_and_end_it_unstable() -> None:
    rng = np.random.default_rng(3)
    diffs = rng.standard_normal((2000, 2, 12))
    diffs[:, 0, 9] = -10.0  # the first variant collapses on its tenth seed
    outcome = run_campaigns(LookDesign(looks=LOOKS, comparisons=2), metric(), diffs)
    in_view = outcome.seeds[:, 0] >= 10
    assert outcome.unstable[in_view, 0].mean() >= 0.95
    assert outcome.flagged[:, 1].mean() <= LEVEL
    assert not (outcome.verdict[outcome.unstable] > 0).any()
