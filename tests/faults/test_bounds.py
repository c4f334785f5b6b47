"""Bounds on what a plan, a pasted plan, a flow run's name and `ablate budget` accept (issue
24): each refused in one line with exit 2, naming what is wrong, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.campaign.opening import run_name
from ablations.cli import main
from ablations.errors import PlanError
from ablations.plan.io import MAX_PLAN_BYTES, plan_text_of
from tests.faults.test_malformed_plans import DEMO, _assert_refused, _set


def _bomb(levels: int = 7) -> str:
    """A few hundred bytes that expand to 9**levels nodes in a plain `yaml.safe_load`."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        ref = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([ref] * 9)}]")
    lines.append(f"campaign: {{id: *a{levels - 1}}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("content", "field", "says"),
    [
        (_set(DEMO, "checkpoint.store", "file://../../elsewhere"), "checkpoint.store", "leads out"),
        (_set(DEMO, "checkpoint.store", "file://ckpt/../../x"), "checkpoint.store", "leads out"),
        (
            _set(_set(DEMO, "checkpoint.store", "s3://bucket/p"), "checkpoint.endpoint_url",
                 "https://s3.example.com/?X-Amz-Credential=AKIA"),
            "checkpoint.endpoint_url", "credentials through the environment",
        ),
        (
            _set(_set(DEMO, "checkpoint.store", "s3://bucket/p"), "checkpoint.endpoint_url",
                 "https://s3.example.com#token"),
            "checkpoint.endpoint_url", "fragment",
        ),
        (_set(DEMO, "resources.max_runs", 3), "resources.max_runs", "above its own resources"),
        (_set(DEMO, "seeds", list(range(60_000))), "seeds", "120000 runs" ),
        (_set(DEMO, "workload.steps", 10**8), "workload.steps", "above the 1000000 this"),
        (_set(DEMO, "workload.steps", 10**12), "workload.steps", "or equal to 1000000000"),
    ],
)  # fmt: skip
def test_plans_beyond_the_bounds_are_refused(
    content: Any, field: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if len(content["seeds"]) > 1000:  # two variants x 60 000 seeds
        content = _set(content, "factors", {"width": DEMO["factors"]["width"]})
        content["factors"]["width"]["levels"] = content["factors"]["width"]["levels"][:1]
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(content))
    code = main(["plan", str(plan)])
    captured = capsys.readouterr()
    _assert_refused(code, captured.err, captured.out, field)
    assert says in captured.err


def test_only_the_process_raises_its_cap_a_plan_only_lowers_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 000 runs: over the default cap of 10 000. `resources.max_runs: 1e9` in the plan
    changes nothing, and validate never says "valid" first; the operator's --max-runs (or
    ABLATE_MAX_RUNS) lets it through."""
    monkeypatch.setenv("ABLATE_MAX_RUNS", "10000")  # undone after: --max-runs installs its own
    content = _set(_set(DEMO, "seeds", list(range(10_000))), "resources.max_runs", 10**9)
    content = _set(content, "factors", {"width": DEMO["factors"]["width"]})
    content["factors"]["width"]["levels"] = content["factors"]["width"]["levels"][:1]
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(content))
    assert main(["validate", str(plan)]) == 2
    out, err = capsys.readouterr()
    assert "valid" not in out and "20000 runs" in err and "above the 10000 runs" in err
    assert main(["validate", str(plan), "--max-runs", "20000"]) == 0
    assert capsys.readouterr().out.startswith(f"{plan}: valid")
    monkeypatch.setenv("ABLATE_MAX_RUNS", "20000")
    assert main(["validate", str(plan)]) == 0
    capsys.readouterr()
    monkeypatch.setenv("ABLATE_MAX_RUNS", "lots")
    assert main(["validate", str(plan)]) == 2
    assert "ABLATE_MAX_RUNS: expected a whole number >= 1, got 'lots'" in capsys.readouterr().err


def test_the_run_name_of_an_alias_bomb_is_computed_bounded() -> None:
    bomb = _bomb()
    assert len(bomb) < 600
    assert run_name(bomb, "") == "invalid plan"  # refused by the bounded reader, not expanded
    assert run_name("campaign: {id: " + "x" * 5000 + "}\n", "") == "invalid plan: " + "x" * 64
    assert run_name("campaign: {id: pasted}\n", "") == "invalid plan: pasted"


def test_a_pasted_plan_has_the_file_cap() -> None:
    assert plan_text_of("campaign: {id: x}\n", "plan_yaml") == "campaign: {id: x}\n"
    with pytest.raises(PlanError, match=f"exceeds the limit of {MAX_PLAN_BYTES} bytes"):
        plan_text_of("#" * (MAX_PLAN_BYTES + 1), "plan_yaml")
    with pytest.raises(PlanError, match="exceeds the limit"):  # counted in bytes, not chars
        plan_text_of("é" * (MAX_PLAN_BYTES // 2 + 1), "plan_yaml")


def test_a_plan_error_never_echoes_more_than_a_short_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "-----BEGIN OPENSSH PRIVATE KEY----- " + "b3BlbnNzaC1rZXktdjEAAAAA" * 200
    plan = tmp_path / "id_ed25519"
    plan.write_text(secret + "\n")
    assert main(["validate", str(plan)]) == 2
    err = capsys.readouterr().err
    assert f"not a YAML mapping (text, {len(secret) + 1} bytes): not a plan" in err
    assert "PRIVATE KEY" not in err and "b3BlbnNz" not in err and len(err) < 300


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--lots", "10" + "0" * 40, "at most 1000"),
        ("--hours", "1e12", "at most 100000"),
        ("--days", "100000", "at most 3650"),
        ("--price", "1e15", "at most 1e+09"),
    ],
)
def test_budget_figures_beyond_sane_bounds_are_refused(
    flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["budget", "--gpu", "RTX 4090", "--hours", "78", flag, value]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be {says}" in err and "Traceback" not in err
    assert main(["budget", "--gpu", "RTX 4090", "--hours", "78", "--lots", "1000"]) == 0
