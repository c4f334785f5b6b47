"""Paired-seed effects: numbers against scipy and by hand, every verdict, exclusions."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ablations.analysis.paired import (
    effects_frame,
    excluded_runs,
    metric_table,
    paired_effects,
    verdict_of,
)
from ablations.plan.experiment import MetricSection
from ablations.run.records import RunRecord
from tests.ablations.analysis.synthetic import CONTROL, DIFFS, STOP_MESSAGE, write_synthetic

METRIC = MetricSection(name="accuracy", threshold=0.5, useful_effect=0.01)


def rec(variant: str, seed: int, value: float, **kw: object) -> RunRecord:
    fields: dict = {
        "run_id": f"{variant}-s{seed}-{kw.get('phase', 'main')}",
        "variant": variant,
        "seed": seed,
        "category": "essential",
        "phase": "main",
        "status": "accepted",
        "metrics": {"accuracy": value},
        **kw,
    }
    return RunRecord.model_validate(fields)


def pairs(control: list[float], variant: list[float], name: str = "v") -> list[RunRecord]:
    return [rec("control", s, c) for s, c in enumerate(control)] + [
        rec(name, s, v) for s, v in enumerate(variant)
    ]


def test_numbers_match_ttest_rel_and_a_hand_computation() -> None:
    control = [0.81, 0.84, 0.80, 0.83]
    variant = [0.85, 0.86, 0.83, 0.88]
    (effect,) = paired_effects(pairs(control, variant), METRIC)

    # By hand: d = 0.04, 0.02, 0.03, 0.05; mean 0.035; sd sqrt(sum((d-m)^2)/3) = sqrt(0.0005/3)
    sd = math.sqrt(0.0005 / 3)
    half = 3.182446305284263 * sd / 2  # t(0.975, df=3) * sd / sqrt(4)
    assert effect.n_pairs == 4
    assert effect.seeds == [0, 1, 2, 3]
    assert effect.mean_diff == pytest.approx(0.035)
    assert effect.sd == pytest.approx(sd)
    assert effect.ci_low == pytest.approx(0.035 - half)
    assert effect.ci_high == pytest.approx(0.035 + half)
    assert effect.control_mean == pytest.approx(0.82)
    assert effect.variant_mean == pytest.approx(0.855)

    reference = stats.ttest_rel(variant, control)
    interval = reference.confidence_interval(0.95)
    assert effect.t == pytest.approx(reference.statistic)
    assert effect.p_value == pytest.approx(reference.pvalue)
    assert (effect.ci_low, effect.ci_high) == pytest.approx((interval.low, interval.high))
    assert effect.verdict == "better"  # 0.035 - 0.0115 = 0.0235 >= 0.01


@pytest.mark.parametrize(
    ("low", "high", "direction", "verdict"),
    [
        (0.02, 0.05, "maximize", "better"),
        (0.01, 0.05, "maximize", "better"),  # the band edge itself counts as useful
        (-0.05, -0.02, "maximize", "worse"),
        (-0.005, 0.009, "maximize", "equivalent"),
        (-0.02, 0.005, "maximize", "inconclusive"),  # crosses -u
        (0.005, 0.03, "maximize", "inconclusive"),  # crosses +u: maybe useful, maybe not
        (-0.03, 0.03, "maximize", "inconclusive"),  # spans the whole band
        (-0.05, -0.02, "minimize", "better"),  # smaller is better: a drop is a gain
        (0.02, 0.05, "minimize", "worse"),
        (-0.009, 0.009, "minimize", "equivalent"),
    ],
)
def test_verdict_branches(low: float, high: float, direction: str, verdict: str) -> None:
    metric = METRIC.model_copy(update={"direction": direction})
    assert verdict_of(low, high, metric) == verdict


@pytest.mark.parametrize(
    ("diffs", "verdict"),
    [
        ([0.03, 0.04, 0.035], "better"),
        ([-0.05, -0.06, -0.055], "worse"),
        ([0.001, -0.002, 0.0], "equivalent"),
        ([0.02, -0.01, 0.03], "inconclusive"),
    ],
)
def test_each_verdict_end_to_end(diffs: list[float], verdict: str) -> None:
    control = [0.90, 0.92, 0.91]
    (effect,) = paired_effects(
        pairs(control, [c + d for c, d in zip(control, diffs, strict=True)]), METRIC
    )
    assert effect.verdict == verdict
    assert effect.mean_diff == pytest.approx(np.mean(diffs))


def test_minimize_metric_reads_a_drop_as_better() -> None:
    metric = MetricSection(name="accuracy", direction="minimize", threshold=1.0, useful_effect=0.1)
    (effect,) = paired_effects(pairs([1.0, 1.2, 1.1], [0.5, 0.6, 0.55]), metric)
    assert effect.mean_diff == pytest.approx(-0.55)
    assert effect.verdict == "better"


def test_single_seed_gives_a_difference_and_no_interval() -> None:
    (effect,) = paired_effects(pairs([0.90], [0.95]), METRIC)
    assert effect.n_pairs == 1
    assert effect.mean_diff == pytest.approx(0.05)
    assert effect.sd is None and effect.ci_low is None and effect.ci_high is None
    assert effect.p_value is None
    assert effect.verdict == "inconclusive"
    assert "single seed" in effect.note


def test_zero_spread_collapses_the_interval_to_the_mean() -> None:
    # Binary-exact values, so every difference is exactly 0.125 and the spread exactly zero.
    (effect,) = paired_effects(pairs([0.5, 0.25, 0.75], [0.625, 0.375, 0.875]), METRIC)
    assert effect.sd == 0.0
    assert (effect.ci_low, effect.ci_high) == (0.125, 0.125)
    assert effect.verdict == "better"
    assert "zero spread" in effect.note


def test_stopped_and_failed_runs_never_enter_an_effect(tmp_path: Path) -> None:
    synthetic = write_synthetic(tmp_path)
    effects = {e.variant: e for e in paired_effects(synthetic.records, synthetic.plan.metric)}

    narrow = effects["width=16"]  # seed 2 was stopped: only seeds 0 and 1 pair
    assert narrow.seeds == [0, 1]
    assert narrow.mean_diff == pytest.approx(np.mean([DIFFS["width=16"][0], DIFFS["width=16"][1]]))
    assert narrow.control_mean == pytest.approx((CONTROL[0] + CONTROL[1]) / 2)
    # A seed stopped by the quality rule decides the verdict; the interval is still shown.
    assert narrow.verdict == "fails threshold"
    assert narrow.note.startswith("1/3 seeds stopped: quality below the threshold at step 50")
    assert narrow.ci_low is not None  # over the two accepted pairs
    assert effects["dropout=0.3"].n_pairs == 1  # seeds 1 and 2 failed
    assert effects["dropout=0.3"].verdict == "failed"
    assert effects["dropout=0.3"].note.startswith("2/3 seeds failed: RuntimeError: CUDA error")
    assert effects["width=128"].verdict == "better"
    assert effects["depth=1"].verdict == "worse"
    assert effects["optimizer=sgd"].verdict == "equivalent"

    apart = {(x.variant, x.seed): x for x in excluded_runs(synthetic.records)}
    assert set(apart) == {("width=16", 2), ("dropout=0.3", 1), ("dropout=0.3", 2)}
    assert apart[("width=16", 2)].status == "stopped"
    assert STOP_MESSAGE in apart[("width=16", 2)].reason
    assert "quality at step 50" in apart[("width=16", 2)].reason
    assert apart[("dropout=0.3", 1)].reason.startswith("RuntimeError: CUDA error")


def test_pilot_runs_are_never_paired() -> None:
    records = [*pairs([0.9, 0.9], [0.95, 0.95]), rec("control", 0, 0.1, phase="pilot")]
    (effect,) = paired_effects(records, METRIC)
    assert effect.control_mean == pytest.approx(0.9)
    assert metric_table(records, "accuracy").loc[0, "control"] == pytest.approx(0.9)


def test_no_pairs_when_the_control_never_succeeded() -> None:
    records = [
        rec("control", 0, 0.0, status="failed", metrics={}),
        rec("v", 0, 0.9),
    ]
    (effect,) = paired_effects(records, METRIC)
    assert effect.n_pairs == 0 and effect.mean_diff is None
    assert effect.verdict == "inconclusive"
    assert "no seed" in effect.note


def test_a_duplicated_accepted_run_is_refused() -> None:
    records = [*pairs([0.9], [0.95]), rec("v", 0, 0.96).model_copy(update={"run_id": "again"})]
    with pytest.raises(ValueError, match="two accepted main runs of 'v' on seed 0"):
        paired_effects(records, METRIC)


def test_effects_frame_has_one_row_per_variant(tmp_path: Path) -> None:
    synthetic = write_synthetic(tmp_path)
    frame = effects_frame(paired_effects(synthetic.records, synthetic.plan.metric))
    assert list(frame["variant"]) == [
        "width=16",
        "width=128",
        "depth=1",
        "dropout=0.3",
        "optimizer=sgd",
    ]
    assert frame.set_index("variant").loc["width=128", "n_pairs"] == 3


def test_an_inconclusive_note_comes_from_the_corrected_interval() -> None:
    """Issue 34: "Inconclusive: sched=constant (; about 5 seeds would decide it)". The
    uncorrected 95% interval of `v` lies above the band (a claim, so it had no note) while
    the corrected one, which gives the verdict, crosses its edge: the note says so. The
    other variants are too noisy to claim, so the step-down never loosens `v`'s bound."""
    control = [0.90, 0.92, 0.91, 0.93]
    offsets = {
        "v": [0.015, 0.025, 0.0175, 0.0225],
        "a": [0.0, 0.02, -0.01, 0.03],
        "b": [0.02, 0.0, 0.03, -0.01],
        "c": [-0.01, 0.03, 0.0, 0.02],
    }
    records = [rec("control", s, c) for s, c in enumerate(control)]
    for name, diffs in offsets.items():
        records += [
            rec(name, s, c + d) for s, (c, d) in enumerate(zip(control, diffs, strict=True))
        ]
    uncorrected = stats.ttest_1samp(offsets["v"], 0.0).confidence_interval(0.95)
    assert uncorrected.low > METRIC.useful_effect  # on its own, a claim
    effect = next(e for e in paired_effects(records, METRIC) if e.variant == "v")
    assert effect.verdict == "inconclusive"
    assert effect.ci_low is not None and effect.ci_low < METRIC.useful_effect
    assert effect.note.startswith("the adjusted interval crosses an edge of the useful-effect band")
    assert not effect.note.startswith(";")
