"""The command recipe of docs/own-code.md: its plan validates, its placeholders are checked,
its PyTorch script resumes from a committed folder to the same result as straight through,
and the page shows the script as it is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ablations.byo.command import CommandWorkload
from ablations.byo.run import execute
from ablations.checkpoint.manager import CheckpointManager
from ablations.errors import InputError
from ablations.plan.infrastructure import CheckpointSection
from ablations.plan.io import load_plan
from ablations.plan.workload import COMMAND_ENTRY
from tests.conftest import ROOT
from tests.specs import bare_spec

RECIPE = ROOT / "ablations" / "recipes" / "command.yaml"
SCRIPT = ROOT / "ablations" / "recipes" / "command" / "train.py"
PAGE = ROOT / "docs" / "own-code.md"


def test_the_page_shows_the_recipe_as_it_is() -> None:
    """The page quotes the script's loop (eliding with `...`) and counts its lines of code."""
    page = PAGE.read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    (excerpt,) = [block for block in blocks if "ablate.report(" in block]
    script = {line.strip() for line in SCRIPT.read_text().splitlines()}
    quoted = [line.strip() for line in excerpt.splitlines() if line.strip()]
    assert len(quoted) > 10
    for line in quoted:
        assert "..." in line or line in script, (
            f"{PAGE.name} quotes a line {SCRIPT.name} lacks: {line}"
        )
    code = [
        line
        for line in SCRIPT.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert f"`ablations/recipes/command/train.py`, {len(code)} lines of code" in page
    for line in RECIPE.read_text().splitlines():
        if line.lstrip().startswith("command:"):
            assert line.strip() in page, "the page shows another command line than the recipe's"


def test_the_recipe_validates_as_the_command_entry() -> None:
    plan = load_plan(RECIPE)
    assert plan.workload.entry == COMMAND_ENTRY
    assert plan.workload.command is not None and "{width}" in plan.workload.command


def test_an_unknown_placeholder_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "plan.yaml"
    bad.write_text(RECIPE.read_text().replace('"{width}"', '"{widht}"'))
    with pytest.raises(InputError, match=r"workload.command\[5\].*\{widht\} is no parameter"):
        load_plan(bad)


@pytest.mark.slow
def test_the_recipe_script_resumes_to_the_straight_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = load_plan(RECIPE)
    monkeypatch.chdir(ROOT)  # the recipe's command path is relative to the repository root
    fields = dict(
        run_id="control-s0", campaign_id="recipe", plan_hash="0" * 16, variant="control",
        category="essential", phase="main", seed=0, params=plan.control.params, steps=60,
        eval_every=30, entry=COMMAND_ENTRY, command=plan.workload.command, metric="mse",
        direction="minimize", threshold=10.0,
    )  # fmt: skip
    straight = execute(bare_spec(**fields), CommandWorkload)
    store = CheckpointSection(store=f"file://{tmp_path}/store", interval={"steps": 20})
    pilot = bare_spec(**{**fields, "checkpoint": store, "until": 30})
    assert execute(pilot, CommandWorkload, CheckpointManager(pilot)).steps_done == 30
    main = bare_spec(**{**fields, "checkpoint": store})
    resumed = execute(main, CommandWorkload, CheckpointManager(main))
    assert resumed.checkpoint.resumed_from_step == 30
    assert resumed.status == straight.status == "accepted"
    assert resumed.metrics == straight.metrics


def test_the_recipe_script_runs_bare_with_the_import_line_as_written(tmp_path: Path) -> None:
    """`import ablate_report as ablate` with no campaign: not on any PYTHONPATH ablate set,
    from another folder; every call a no-op (no report printed, no reply awaited)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ABLATE_")}
    env.pop("PYTHONPATH", None)
    script = ROOT / "ablations" / "recipes" / "command" / "train.py"
    done = subprocess.run(
        [sys.executable, str(script), "--width", "4"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # no JSON line: nothing reported
    assert list(tmp_path.iterdir()) == []  # and nothing saved


@pytest.mark.slow
def test_a_pilot_shorter_than_the_evaluation_cadence_evaluates_at_its_last_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ABLATE_UNTIL tells the script where this process stops: the pilot evaluates there (the
    gate reads it), though its step is no multiple of eval_every."""
    plan = load_plan(RECIPE)
    monkeypatch.chdir(ROOT)
    spec = bare_spec(
        run_id="control-s0", campaign_id="recipe", plan_hash="0" * 16, variant="control",
        category="essential", phase="pilot", seed=0, params=plan.control.params, steps=100,
        until=30, eval_every=50, entry=COMMAND_ENTRY, command=plan.workload.command,
        metric="mse", direction="minimize", threshold=10.0,
    )  # fmt: skip
    record = execute(spec, CommandWorkload)
    assert record.status == "accepted" and record.steps_done == 30, record
    assert [e["step"] for e in record.evaluations] == [30]
