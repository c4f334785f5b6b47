"""`ablations.budget.projection`: what tests/ablations/budget/test_budget.py does not pin.

There: the window fit, LPT packing, a `{steps: N}` checkpoint interval and every part of a
projection. Here: saves under a `{seconds: S}` and an `auto` interval, the evaluation count's
rounding, an exact fit despite float noise, and the slot count for each `resources` form.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from ablations.budget.projection import checkpoints, evaluations, fit_window, slot_count
from ablations.checkpoint.interval import BOOTSTRAP_STEPS, young_daly
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.model import parse_plan
from ablations.plan.offers import RunEstimate

ESTIMATE = RunEstimate(
    load_seconds=0, step_seconds=1, eval_seconds=0, checkpoint_seconds=4, export_seconds=0
)


@pytest.mark.parametrize(
    ("steps", "every", "expected"), [(100, 50, 2), (101, 50, 3), (49, 50, 1), (1, 1, 1)]
)
def test_evaluations_happen_every_n_steps_and_at_the_last(
    steps: int, every: int, expected: int
) -> None:
    assert evaluations(steps, every) == expected


def test_steps_interval_counts_whole_intervals() -> None:
    section = CheckpointSection.model_validate({"interval": {"steps": 30}})
    assert checkpoints(100, 1e6, ESTIMATE, section) == 3  # training time is irrelevant


def test_seconds_interval_counts_from_training_time() -> None:
    section = CheckpointSection.model_validate({"interval": {"seconds": 60}})
    assert checkpoints(10, 59.9, ESTIMATE, section) == 0
    assert checkpoints(10, 180.0, ESTIMATE, section) == 3
    assert checkpoints(10_000, 150.0, ESTIMATE, section) == 2  # steps are irrelevant


def test_auto_interval_is_one_bootstrap_save_then_young_daly() -> None:
    section = CheckpointSection.model_validate(
        {"mtbf_hours": 2.0, "max_loss_minutes": 30.0}
    )  # interval auto
    assert section.interval.is_auto
    assert checkpoints(BOOTSTRAP_STEPS - 1, 1e6, ESTIMATE, section) == 0  # too short to save
    tau = young_daly(4.0, 2 * 3600.0, 30 * 60.0)
    assert tau == pytest.approx(math.sqrt(2 * 4 * 7200))  # below the 30 min cap
    train = 10 * tau + 1.0
    assert checkpoints(BOOTSTRAP_STEPS, train, ESTIMATE, section) == 1 + 10
    capped = CheckpointSection.model_validate({"mtbf_hours": 2.0, "max_loss_minutes": 1.0})
    assert checkpoints(BOOTSTRAP_STEPS, 600.0, ESTIMATE, capped) == 1 + 10  # every 60 s


def test_auto_interval_survives_a_zero_checkpoint_estimate() -> None:
    free = ESTIMATE.model_copy(update={"checkpoint_seconds": 0.0})
    section = CheckpointSection.model_validate({"mtbf_hours": 1.0, "max_loss_minutes": 10.0})
    tau = young_daly(1e-6, 3600.0, 600.0)  # the floor the module puts on C
    assert checkpoints(BOOTSTRAP_STEPS, 100.0, free, section) == 1 + math.floor(100.0 / tau)


def test_an_exact_fit_despite_float_noise_fits_with_nothing_unused() -> None:
    wall = sum([16.0] * 2 + [1e-12, 16.0])  # 48 h summed with float noise on top
    fit = fit_window(wall, 24.0, 72.0)
    assert wall + 24.0 > 72.0  # the noise is real
    assert fit.fits and fit.unused_hours == 0.0 and fit.overrun_hours == 0.0
    over = fit_window(48.0 + 1e-6, 24.0, 72.0)  # a microhour is no longer noise
    assert not over.fits and over.overrun_hours == pytest.approx(1e-6)


@pytest.mark.parametrize(
    ("resources", "cards", "expected"),
    [
        ({"devices": 3}, 8, 3),
        ({"devices": 3, "slots_per_device": 2}, 8, 6),
        ({"devices": 2, "slots_per_device": "auto"}, 8, 2),  # auto counts 1 when projecting
        ({"devices": ["cuda:0", "cuda:1"], "slots_per_device": 3}, 8, 6),
        ({"devices": "auto"}, 5, 5),
    ],
)
def test_slot_count_for_each_form_of_resources(
    demo_data: dict[str, Any], resources: dict[str, Any], cards: int, expected: int
) -> None:
    demo_data["resources"] = resources
    assert slot_count(parse_plan(demo_data), cards) == expected
