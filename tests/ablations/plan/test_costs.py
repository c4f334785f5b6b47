"""A factor without a cost (#44): the non-inferiority rule compares declared costs only when
the control and every candidate has one, so one level without a cost sets them all aside for
measured step time. `ablate validate` and `ablate plan` say so before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ablations.plan.model import parse_plan
from ablations.plan.runs import cost_warnings
from tests.conftest import DEMO_PLAN, ROOT


def _demo() -> dict[str, Any]:
    return yaml.safe_load(DEMO_PLAN.read_text())


def test_the_demo_declares_every_cost_and_is_not_warned() -> None:
    assert cost_warnings(parse_plan(_demo())) == []


def test_a_level_without_a_cost_is_named_with_what_the_decision_uses() -> None:
    data = _demo()
    del data["factors"]["width"]["levels"][1]["cost"]  # width=128
    [warning] = cost_warnings(parse_plan(data))
    assert "not for width=128:" in warning
    assert "measured step time" in warning and "Declare a cost" in warning
    data["control"].pop("cost")
    [warning] = cost_warnings(parse_plan(data))
    assert "not for control, width=128:" in warning


def test_costs_under_a_rule_that_compares_none_are_named() -> None:
    data = _demo()
    data["metric"]["decision_rule"] = "superiority"
    [warning] = cost_warnings(parse_plan(data))
    assert "metric.decision_rule superiority compares no costs" in warning
    for factor in data["factors"].values():
        for level in factor["levels"]:
            level.pop("cost", None)
    data["control"].pop("cost")
    assert cost_warnings(parse_plan(data)) == []  # nothing declared: nothing to set aside


def test_validate_prints_it_as_a_warning(tmp_path: Path) -> None:
    data = _demo()
    del data["factors"]["depth"]["levels"][0]["cost"]
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "validate", str(plan)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    variants = 1 + sum(len(factor["levels"]) for factor in data["factors"].values())
    assert (
        f"warning: costs are declared for {variants - 1} of {variants} variants (the control "
        "counted), not for depth=1: whenever one of those"
    ) in done.stderr
