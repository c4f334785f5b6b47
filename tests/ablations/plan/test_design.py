"""The seed design: a list is one look; a sequential design registers every seed up to `max`,
each in the batch of its look, and refuses looks that do not run from `start` to `max`."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ablations.errors import PlanError
from ablations.plan.design import SequentialSeeds, look_of_seed, spending_words
from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs


def problems_of(data: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        parse_plan(data)
    return [str(p) for p in info.value.problems]


def test_a_list_is_one_look_at_its_length(demo_data: dict[str, Any]) -> None:
    plan = parse_plan(demo_data)
    assert plan.sequential is None
    assert plan.look_sizes == (3,) and plan.seed_list == [0, 1, 2]
    assert {r.look for r in planned_runs(plan, plan_hash(plan))} == {0}


def test_a_sequential_design_registers_each_seed_in_its_looks_batch(
    demo_data: dict[str, Any],
) -> None:
    demo_data["seeds"] = {"start": 3, "max": 8, "looks": [3, 5, 8], "first": 10}
    del demo_data["pilot"]["seeds"]  # the default: the first seed
    plan = parse_plan(demo_data)
    assert plan.look_sizes == (3, 5, 8)
    assert plan.seed_list == list(range(10, 18))
    main = [r for r in planned_runs(plan, plan_hash(plan)) if r.phase == "main"]
    looks = {r.seed: r.look for r in main if r.variant == "control"}
    assert looks == {10: 0, 11: 0, 12: 0, 13: 1, 14: 1, 15: 2, 16: 2, 17: 2}
    assert len(main) == 6 * 8  # every variant up to max: the looks decide what runs
    assert plan.pilot_seeds == [10]


def test_default_looks_grow_by_about_half_and_end_at_max() -> None:
    assert SequentialSeeds(start=3, max=12).look_sizes == (3, 5, 8, 12)
    assert SequentialSeeds(start=2, max=2).look_sizes == (2,)
    # issue 53: max 15 had 3/4/6/9/14/15, a near-duplicate last look
    assert SequentialSeeds(start=3, max=15).look_sizes == (3, 5, 8, 12, 15)
    assert SequentialSeeds(start=3, max=14).look_sizes == (3, 5, 8, 14)
    for most in range(4, 200):
        looks = SequentialSeeds(start=3, max=most).look_sizes
        assert looks[0] == 3 and looks[-1] == most
        if len(looks) > 1:
            assert looks[-1] >= 1.25 * looks[-2] or len(looks) == 2  # no near-duplicate
            assert all(b > a for a, b in itertools.pairwise(looks))
    design = SequentialSeeds(start=3, max=12, looks=[3, 6, 12])
    assert [look_of_seed(design, i) for i in (0, 2, 3, 5, 6, 11)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("seeds", "fragment"),
    [
        ({"start": 5, "max": 3}, "start (5) is above max (3)"),
        ({"start": 3, "max": 12, "looks": [3, 8, 5, 12]}, "looks must increase"),
        ({"start": 3, "max": 12, "looks": [4, 8, 12]}, "from start (3) to max (12)"),
        ({"start": 3, "max": 12, "looks": [3, 8]}, "from start (3) to max (12)"),
        ({"start": 3, "max": 12, "alpha": 0.5}, "less than or equal to 0.2"),
        ({"start": 3, "max": 12, "spending": "haybittle"}, "obrien_fleming"),
        ({"start": 3, "max": 12, "expected_sd": -1}, "greater than 0"),
        ({"start": 3, "max": 12, "interim_share": 0.5}, "less than or equal to 0.3"),
        ({"start": 3, "max": 12, "interim_share": 0}, "greater than 0"),
        (
            {"start": 3, "max": 12, "spending": "pocock", "interim_share": 0.1},
            "interim_share applies to spending haybittle_peto only; spending is pocock",
        ),
        ({"start": 3, "max": 12, "extra": 1}, "unknown key"),
    ],
)
def test_bad_designs_name_the_field(
    demo_data: dict[str, Any], seeds: dict[str, Any], fragment: str
) -> None:
    demo_data["seeds"] = seeds
    problems = problems_of(demo_data)
    assert any(p.startswith("seeds") and fragment in p for p in problems), problems


def test_pilot_seeds_must_be_in_the_first_look(demo_data: dict[str, Any]) -> None:
    demo_data["seeds"] = {"start": 3, "max": 8}
    demo_data["pilot"]["seeds"] = [0, 4]
    problems = problems_of(demo_data)
    assert any("pilot.seeds: pilot seeds must be the first look's seeds" in p for p in problems)


def test_the_design_is_part_of_the_hash(demo_data: dict[str, Any]) -> None:
    demo_data["seeds"] = {"start": 3, "max": 12}
    first = plan_hash(parse_plan(demo_data))
    demo_data["seeds"] = {"start": 3, "max": 12, "spending": "pocock"}
    assert plan_hash(parse_plan(demo_data)) != first


def test_the_interim_share_is_registered_with_the_plan(demo_data: dict[str, Any]) -> None:
    """What a look may spend is frozen with the plan: a campaign resumed by a newer release
    still judges by the share it registered, and another share is another campaign."""
    from ablations.analysis.looks import look_design

    demo_data["seeds"] = {"start": 3, "max": 12, "looks": [3, 5, 8, 12]}
    default = parse_plan(demo_data)
    demo_data["seeds"]["interim_share"] = 0.09
    chosen = parse_plan(demo_data)
    assert plan_hash(chosen) != plan_hash(default)
    spent = [b.alpha_spent for b in (look_design(chosen).boundary(k) for k in range(4))]
    few = 0.05e-6  # what the look of 3 seeds spends: next to nothing
    assert spent == pytest.approx([few, few + 0.05 * 0.09, few + 0.05 * 0.18, 0.05], abs=1e-12)
    assert look_design(default).boundary(1).alpha_spent == pytest.approx(few + 0.05 * 0.12)
    assert spending_words(chosen.seeds) == "haybittle-peto (9% per interim look)"
    assert spending_words([0, 1, 2]) == "obrien-fleming"  # one look: nothing to spend over


def test_the_boundaries_are_registered_with_the_plan(demo_data: dict[str, Any]) -> None:
    """`boundaries: exact` reaches the looks' statistics and is another campaign; a list of
    seeds has one look, where the two agree."""
    from ablations.analysis.looks import look_design

    demo_data["seeds"] = {"start": 3, "max": 12, "spending": "obrien_fleming"}
    union = parse_plan(demo_data)
    demo_data["seeds"]["boundaries"] = "exact"
    exact = parse_plan(demo_data)
    assert plan_hash(exact) != plan_hash(union)
    assert look_design(union).boundaries == "union" and look_design(exact).boundaries == "exact"
    assert look_design(exact).last_boundary().level < look_design(union).last_boundary().level
    assert spending_words(exact.seeds) == "obrien-fleming, exact group-sequential bounds"
    demo_data["seeds"]["boundaries"] = "joint"
    assert any("seeds.boundaries" in p for p in problems_of(demo_data))
