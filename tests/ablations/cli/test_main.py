"""The CLI as a user runs it: a real subprocess, exit codes, no tracebacks, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DEMO_PLAN, ROOT


def ablate(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ablations.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_validate_demo_plan() -> None:
    result = ablate("validate", str(DEMO_PLAN))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout and "plan hash" in result.stdout


def test_plan_json_lists_runs_with_the_plan_hash() -> None:
    result = ablate("plan", str(DEMO_PLAN), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert len(payload["plan_hash"]) == 64
    # the demo's sequential design registers every seed up to its max (6 variants x 12)
    assert payload["totals"]["main_runs"] == 72 and payload["totals"]["pilot_runs"] == 3
    assert {"run_id", "variant", "factor", "level", "seed", "category", "phase"} <= set(
        payload["runs"][0]
    )


def test_plan_and_budget_check_the_workload_without_importing_it() -> None:
    """As validate: what they print needs none of the workload's code, whose import cost every
    call torch's seconds (a LoRA recipe's transformers: 6.5 s of 7.5); a module that cannot be
    found is still refused (tests/ablations/plan/test_io.py)."""
    lora = ROOT / "ablations" / "recipes" / "lora.yaml"
    script = (
        "import sys\n"
        "from ablations.cli.ablate import main\n"
        f"assert main(['plan', {str(lora)!r}, '--json']) == 0\n"
        f"assert main(['budget', {str(lora)!r}, '--json']) == 0\n"
        "print(sorted({'torch', 'transformers', 'peft'} & set(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "[]"


def test_schema_describes_every_field() -> None:
    result = ablate("schema")
    schema = json.loads(result.stdout)
    missing = [
        f"{name}.{field}"
        for name, definition in schema["$defs"].items()
        for field, spec in definition.get("properties", {}).items()
        if not spec.get("description")
    ]
    missing += [f for f, spec in schema["properties"].items() if not spec.get("description")]
    assert missing == []
    # The decision fields are in the schema, with their fixed sets.
    metric = schema["$defs"]["MetricSection"]["properties"]
    assert metric["decision_rule"]["enum"] == ["superiority", "non_inferiority", "equivalence"]
    factor = schema["$defs"]["Factor"]["properties"]
    assert "hypothesis" in factor and "not worse" in json.dumps(factor["next_decisions"])
    assert "cost" in schema["$defs"]["Level"]["properties"]
    assert "hypothesis" in schema["$defs"]["CampaignSection"]["properties"]


def test_invalid_plan_exits_2_with_paths_and_no_traceback(
    tmp_path: Path, demo_data: dict[str, Any], write_plan: Any
) -> None:
    demo_data["seeds"] = [3, 3]
    demo_data["checkpoint"]["keep_lst"] = 1
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = ablate("validate", str(write_plan(demo_data)), cwd=workdir)
    assert result.returncode == 2
    assert "seeds:" in result.stderr and "checkpoint.keep_lst: unknown key" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert list(workdir.iterdir()) == []  # nothing written


def test_empty_file_exits_2(write_plan: Any) -> None:
    result = ablate("plan", str(write_plan("")))
    assert result.returncode == 2 and "empty" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_warns_when_the_pilot_is_shorter_than_the_warmup(
    demo_data: dict[str, Any], write_plan: Any
) -> None:
    demo_data["pilot"]["steps"] = 50  # warm-up 100, one evaluation every 50 steps
    result = ablate("validate", str(write_plan(demo_data)))
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.stderr
    assert "quality.warmup_steps (100)" in warnings[0]
    assert "valid" in result.stdout

    demo_data["pilot"]["steps"] = 100
    assert ablate("validate", str(write_plan(demo_data))).stderr == ""


def test_validate_states_what_each_interim_look_spends(
    demo_data: dict[str, Any], write_plan: Any
) -> None:
    demo_data["seeds"] = {"start": 3, "max": 12, "looks": [3, 5, 8, 12], "interim_share": 0.09}
    result = ablate("validate", str(write_plan(demo_data)))
    assert result.returncode == 0, result.stderr
    assert "spent haybittle-peto (9% per interim look)" in result.stdout


def test_a_pilot_ending_before_the_first_evaluation_exits_2_in_one_line(
    demo_data: dict[str, Any], write_plan: Any
) -> None:
    demo_data["pilot"]["steps"] = demo_data["workload"]["eval_every"] - 1
    for command in ("validate", "plan"):
        result = ablate(command, str(write_plan(demo_data)))
        assert result.returncode == 2, result.stdout
        head, *problems = result.stderr.strip().splitlines()  # as every invalid plan is shown
        assert head.endswith("invalid plan, 1 problem(s):") and len(problems) == 1, head
        assert "pilot.steps: ends before the first evaluation (workload.eval_every" in problems[0]


def test_plan_projects_on_the_slots_ablate_run_opens_here() -> None:
    """`ablate run` opens `local_slots_for(plan, path, --devices)`; `ablate plan` projects on
    the same (it projected the package's one card, where a CPU machine's run used two)."""
    from ablations.local.executor import local_slots_for
    from ablations.plan.io import load_plan

    recipe = ROOT / "ablations" / "recipes" / "command.yaml"
    here = len(local_slots_for(load_plan(recipe), recipe, None))
    for devices, expected in ((None, here), ("3", 3)):
        flags = ["--devices", devices] if devices else []
        result = ablate("plan", str(recipe), "--json", *flags)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["budget"]["slots"] == expected
    text = ablate("plan", str(recipe), "--devices", "3").stdout
    assert "on 3 slot(s) [cpu#0, cpu#1, cpu#2]" in text


def test_validate_warns_when_the_decision_and_the_decision_rule_disagree(
    demo_data: dict[str, Any], write_plan: Any
) -> None:
    """Issue 34: "cheapest ... not usefully worse" judged by superiority without a word."""
    del demo_data["metric"]["decision_rule"]  # the demo's decision reads as non-inferiority
    result = ablate("validate", str(write_plan(demo_data)))
    assert result.returncode == 0, result.stderr
    assert (
        'warning: campaign.decision reads as non-inferiority ("not usefully worse") but '
        "metric.decision_rule is superiority (the default)"
    ) in result.stderr
    demo_data["metric"]["decision_rule"] = "non_inferiority"
    assert "campaign.decision" not in ablate("validate", str(write_plan(demo_data))).stderr


@pytest.mark.slow  # three `ablate plan`s, each sizing by simulation: 12-14 s
def test_plan_warns_when_the_seeds_cannot_decide_a_useful_effect(
    demo_data: dict[str, Any], write_plan: Any
) -> None:
    """Issue 34: the LoRA recipe (2 seeds, 4 variants) could decide nothing, silently."""
    lora = ablate("plan", str(ROOT / "ablations" / "recipes" / "lora.yaml"))
    assert lora.returncode == 0, lora.stderr
    assert "warning: 2 seeds per variant can decide a useful effect only if the paired " in (
        lora.stderr
    )
    demo = ablate("plan", str(DEMO_PLAN))
    assert "power at 2x the useful effect with max 12" in demo.stdout and "80% needs max" in (
        demo.stdout
    )
    assert "warning" not in demo.stderr
    # five useful effects of seed-to-seed spread: hopeless at 12 seeds
    demo_data["seeds"] = {"start": 3, "max": 12, "looks": [3, 5, 8, 12], "expected_sd": 0.05}
    noisy = ablate("plan", str(write_plan(demo_data)))
    assert "warning: 12 seeds per variant cannot decide a useful effect" in noisy.stderr


def test_a_reader_that_stops_reading_ends_ablate_quietly() -> None:
    """`ablate schema | head -1`: the pipe closes while ablate writes. Not a disk fault: no
    error line, no traceback from the final flush, the shell's code for a closed pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    done = subprocess.run(
        [sys.executable, "-c", "from ablations.cli.ablate import console; console()", "schema"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141
