from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ablations.errors import PlanError
from ablations.plan.io import load_plan, parse_yaml
from ablations.plan.model import parse_plan, plan_hash
from tests.conftest import DEMO_PLAN


def problems_of(data: Any) -> list[str]:
    with pytest.raises(PlanError) as info:
        parse_plan(data)
    return [str(p) for p in info.value.problems]


def test_demo_plan_loads_with_defaults() -> None:
    plan = load_plan(DEMO_PLAN)
    assert plan.campaign.id == "digits-demo"
    assert plan.checkpoint.interval.is_auto
    assert plan.pilot_steps == 100
    assert plan.pilot_seeds == [0]
    assert {f.category for f in plan.factors.values()} == {"essential", "useful", "exploratory"}


@pytest.mark.parametrize(
    ("mutate", "path", "fragment"),
    [
        (lambda d: d["campaign"].update(id="../escape"), "campaign.id", "cannot escape"),
        (lambda d: d["campaign"].update(id="a/b"), "campaign.id", "cannot escape"),
        (lambda d: d.update(seeds=[]), "seeds", "at least 1"),
        (lambda d: d.update(seeds=[1, 1, 2]), "seeds", "repeated: [1]"),
        (
            lambda d: d["factors"]["width"].update(levels=[16, 16]),
            "factors.width",
            "duplicate level",
        ),
        (
            lambda d: d["factors"]["width"].update(levels=[64]),
            "factors.width.levels[0].value",
            "equals the control",
        ),
        (
            lambda d: d["factors"]["width"].update(category="vital"),
            "factors.width.category",
            "essential",
        ),
        (lambda d: d["workload"].update(steps=0), "workload.steps", "greater than 0"),
        (
            lambda d: d["checkpoint"].update(interval={"steps": -5}),
            "checkpoint.interval.steps",
            "greater than 0",
        ),
        (
            lambda d: d["checkpoint"].update(interval={"seconds": 0}),
            "checkpoint.interval.seconds",
            "greater than 0",
        ),
        (
            lambda d: d["checkpoint"].update(store="ftp://host/x"),
            "checkpoint.store",
            "file, memory, s3",
        ),
        (lambda d: d["checkpoint"].update(store="s3://"), "checkpoint.store", "needs a path"),
        (lambda d: d["checkpoint"].update(store="/no/scheme"), "checkpoint.store", "URL"),
        (
            lambda d: d["checkpoint"].update(store="s3://AKIA:secret@bucket/x"),
            "checkpoint.store",
            "must not embed credentials",
        ),
        (
            lambda d: d["checkpoint"].update(endpoint_url="http://key:secret@127.0.0.1:9000"),
            "checkpoint.endpoint_url",
            "must not embed credentials",
        ),
        (lambda d: d["resources"].update(devices=["gpu0"]), "resources.devices", "unknown device"),
        (
            lambda d: d["resources"].update(devices=["cuda:0", "cuda:0"]),
            "resources.devices",
            "twice",
        ),
        (lambda d: d["pilot"].update(variants=["widht=16"]), "pilot.variants[0]", "did you mean"),
        (lambda d: d["pilot"].update(steps=10_000), "pilot.steps", "longer than"),
        (lambda d: d.pop("metric"), "metric", "Field required"),
        (
            lambda d: d.update(interactions=[{"set": {"width": 16, "depth": 3}}]),
            "interactions[0].set.depth",
            "not a level",
        ),
        (
            lambda d: d["metric"].update(decision_rule="noninferiority"),
            "metric.decision_rule",
            "'non_inferiority'",
        ),
        (
            lambda d: d["factors"]["width"].update(next_decisions={"wrose": "x"}),
            "factors.width.next_decisions.wrose.[key]",
            "'not worse'",
        ),
        (
            lambda d: d["control"].update(cost=-1),
            "control.cost",
            "greater than or equal to 0",
        ),
    ],
)
def test_bad_values_name_their_path(
    demo_data: dict[str, Any], mutate: Any, path: str, fragment: str
) -> None:
    mutate(demo_data)
    problems = problems_of(demo_data)
    assert any(p.startswith(path + ":") and fragment in p for p in problems), problems


@pytest.mark.parametrize(
    ("mutate", "path", "suggestion"),
    [
        (lambda d: d.update(factros=d.pop("factors")), "factros", "did you mean 'factors'"),
        (lambda d: d["checkpoint"].update(keep_lst=3), "checkpoint.keep_lst", "'keep_last'"),
        (
            lambda d: d["stop_rules"]["quality"].update(warmup=5),
            "stop_rules.quality.warmup",
            "'warmup_steps'",
        ),
        (
            lambda d: d["factors"]["width"]["levels"].append({"value": 8, "categry": "useful"}),
            "factors.width.levels[2].categry",
            "'category'",
        ),
    ],
)
def test_unknown_keys_are_refused_with_the_closest_name(
    demo_data: dict[str, Any], mutate: Any, path: str, suggestion: str
) -> None:
    mutate(demo_data)
    problems = problems_of(demo_data)
    assert any(p.startswith(path + ": unknown key") and suggestion in p for p in problems), problems


def test_problems_are_gathered_not_first_only(demo_data: dict[str, Any]) -> None:
    demo_data["seeds"] = []
    demo_data["workload"]["steps"] = -1
    demo_data["checkpoint"]["store"] = "nope"
    paths = {p.split(":")[0] for p in problems_of(demo_data)}
    assert {"seeds", "workload.steps", "checkpoint.store"} <= paths


def test_empty_and_non_mapping_documents() -> None:
    """The plan as a whole: the problem alone, the error's head names the file (#44: never
    a literal `<plan>`)."""
    assert problems_of(None) == ["the plan is empty"]
    assert problems_of([1, 2]) == ["not a YAML mapping (a list of 2 items): not a plan"]
    assert problems_of({"notes": "my password is hunter2"}) == [
        "a YAML mapping with none of a plan's keys (campaign, factors, seeds, metric): not a plan"
    ]


def test_a_file_that_is_not_a_plan_is_never_quoted(write_plan: Any) -> None:
    """A private note given by mistake: its size is said, none of its content."""
    note = "Dear diary, my password is hunter2, key AKIAABCDEFGHIJKLMNOP.\nsee you"
    for text, said in [
        (note, f"not a YAML mapping (text, {len(note)} bytes): not a plan"),
        ("- hunter2\n- AKIAABCDEFGHIJKLMNOP\n", "not a YAML mapping (a list of 2 items, 33 bytes)"),
        ("secret_note: hunter2\n", "a YAML mapping of 21 bytes with none of a plan's keys"),
        ("a: b: hunter2\n", "not valid YAML at line 1, column 5: mapping values are not allowed"),
    ]:
        with pytest.raises(PlanError) as caught:
            load_plan(write_plan(text))
        assert said in str(caught.value)
        assert "hunter2" not in str(caught.value) and "AKIA" not in str(caught.value)


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(PlanError, match="aliases expand"):
        parse_yaml("\n".join(lines))


def test_duplicate_yaml_keys_are_refused() -> None:
    with pytest.raises(PlanError, match="seeds: duplicate key"):
        parse_yaml("seeds: [1]\nseeds: [2]\n")


def test_workload_that_does_not_import_is_named(demo_data: dict[str, Any], write_plan: Any) -> None:
    demo_data["workload"]["entry"] = "no_such_module_xyz:Thing"
    with pytest.raises(PlanError, match="no_such_module_xyz"):
        load_plan(write_plan(demo_data))
    demo_data["workload"]["entry"] = "ablations.workloads.digits:Missing"
    with pytest.raises(PlanError, match="has no 'Missing'"):
        load_plan(write_plan(demo_data))


def test_missing_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="cannot read"):
        load_plan(tmp_path / "absent.yaml")
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (2 << 20))
    with pytest.raises(PlanError, match="limit"):
        load_plan(big)


def test_hash_ignores_style_but_not_values(demo_data: dict[str, Any]) -> None:
    digest = plan_hash(parse_plan(demo_data))
    reordered = dict(reversed(list(demo_data.items())))
    assert plan_hash(parse_plan(reordered)) == digest
    demo_data["metric"]["threshold"] = 0.86
    assert plan_hash(parse_plan(demo_data)) != digest


def test_yaml_comments_and_flow_style_do_not_change_the_hash(write_plan: Any) -> None:
    text = DEMO_PLAN.read_text()
    restyled = "# a new comment\n" + text.replace("seeds: [0, 1, 2]", "seeds:\n  - 0\n  - 1\n  - 2")
    assert restyled != text
    a = load_plan(write_plan(text, "a.yaml"), workload="skip")
    b = load_plan(write_plan(restyled, "b.yaml"), workload="skip")
    assert plan_hash(a) == plan_hash(b)
