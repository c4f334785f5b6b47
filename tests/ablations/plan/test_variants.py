from __future__ import annotations

import re
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ablations.plan.model import parse_plan, plan_hash
from ablations.plan.runs import planned_runs, variants
from ablations.plan.variants import run_id
from tests.conftest import DEMO_PLAN


def test_variants_are_control_then_one_factor_at_a_time(demo_data: dict[str, Any]) -> None:
    demo_data["interactions"] = [{"set": {"width": 16, "dropout": 0.3}, "category": "exploratory"}]
    names = [v.name for v in variants(parse_plan(demo_data))]
    assert names == [
        "control",
        "width=16",
        "width=128",
        "depth=1",
        "dropout=0.3",
        "keep_pixels=32",
        "width=16+dropout=0.3",
    ]


def test_every_variant_runs_every_seed_and_pilot_defaults_to_essentials(
    demo_data: dict[str, Any],
) -> None:
    plan = parse_plan(demo_data)
    runs = planned_runs(plan, plan_hash(plan))
    main = [r for r in runs if r.phase == "main"]
    pilot = [r for r in runs if r.phase == "pilot"]
    assert len(main) == len(variants(plan)) * len(plan.seed_list)
    assert {r.variant for r in pilot} == {"control", "width=16", "width=128"}
    assert {r.seed for r in pilot} == {0} and {r.steps for r in pilot} == {100}
    assert len({r.run_id for r in runs}) == len(runs)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", r.run_id) for r in runs)


def test_level_category_overrides_factor_category(demo_data: dict[str, Any]) -> None:
    demo_data["factors"]["width"]["levels"] = [16, {"value": 256, "category": "exploratory"}]
    cats = {v.name: v.category for v in variants(parse_plan(demo_data))}
    assert cats["width=16"] == "essential" and cats["width=256"] == "exploratory"


scalars = st.one_of(
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=8),
)


@settings(max_examples=200, deadline=None)
@given(
    params=st.dictionaries(st.text(min_size=1, max_size=6), scalars, min_size=1, max_size=5),
    seed=st.integers(0, 2**32 - 1),
)
def test_run_id_is_stable_under_key_order(params: dict[str, Any], seed: int) -> None:
    reordered = dict(reversed(list(params.items())))
    assert run_id("h", params, seed, 10, "v") == run_id("h", reordered, seed, 10, "v")


@settings(max_examples=200, deadline=None)
@given(
    params=st.dictionaries(st.text(min_size=1, max_size=6), scalars, min_size=1, max_size=5),
    seed=st.integers(0, 2**32 - 2),
    key=st.data(),
)
def test_run_id_changes_with_any_value(params: dict[str, Any], seed: int, key: Any) -> None:
    base = run_id("h", params, seed, 10, "v")
    name = key.draw(st.sampled_from(sorted(params)))
    changed = {**params, name: key.draw(scalars.filter(lambda v: repr(v) != repr(params[name])))}
    assert run_id("h", changed, seed, 10, "v") != base
    assert run_id("h", params, seed + 1, 10, "v") != base
    assert run_id("h2", params, seed, 10, "v") != base
    assert run_id("h", params, seed, 11, "v") != base


@settings(max_examples=50, deadline=None)
@given(threshold=st.floats(0.0, 0.99), effect=st.floats(0.001, 0.5))
def test_plan_hash_changes_with_metric_values(threshold: float, effect: float) -> None:
    demo_data = yaml.safe_load(DEMO_PLAN.read_text())
    base = plan_hash(parse_plan(demo_data))
    demo_data["metric"].update(threshold=threshold, useful_effect=effect)
    changed = plan_hash(parse_plan(demo_data))
    assert (changed == base) == (threshold == 0.85 and effect == 0.01)


def test_run_ids_rendered_per_variant_equal_the_plain_json_ones(demo_data: dict[str, Any]) -> None:
    from ablations.plan.model import parse_plan, plan_hash
    from ablations.plan.runs import planned_runs
    from ablations.plan.variants import run_id

    demo_data["workload"]["params"]["note"] = 'é "quoted"'  # escaping must match too
    plan = parse_plan(demo_data)
    digest = plan_hash(plan)
    runs = planned_runs(plan, digest)
    assert len(runs) > 10
    for run in runs:
        prefix = f"{'pilot-' if run.phase == 'pilot' else ''}{run.variant}"
        until = run.steps if run.phase == "pilot" else None
        assert run.run_id == run_id(digest, run.params, run.seed, run.length, prefix, until)


def test_variant_names_are_the_variants_names(demo_data: dict[str, Any]) -> None:
    from ablations.plan.variants import variant_names

    plan = parse_plan(demo_data)
    assert variant_names(plan.factors, plan.interactions) == [v.name for v in variants(plan)]
