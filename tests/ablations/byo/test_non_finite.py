"""A diverged run is stopped by the non-finite rule in any language (#44): JSON has no NaN or
infinity, so the JSON-lines protocol reads `NaN`/`Infinity` tokens, strings ("nan", "inf")
and `null` (what JavaScript's JSON.stringify writes for both) as a non-finite loss."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from ablations.byo.command import CommandWorkload, number
from ablations.byo.run import execute
from ablations.errors import WorkloadError
from ablations.plan.workload import COMMAND_ENTRY
from ablations.run.records import RunRecord
from tests.specs import bare_spec

HERE = Path(__file__).parent


@pytest.mark.parametrize(
    "written", ["NaN", "Infinity", "-Infinity", '"nan"', '"NaN"', '"inf"', '"-Infinity"', "null"]
)
def test_every_spelling_of_a_non_finite_value_is_read_as_one(written: str) -> None:
    assert not math.isfinite(number(json.loads(f"[{written}]")[0], "loss"))


@pytest.mark.parametrize(("written", "value"), [("0.25", 0.25), ("3", 3.0), ('"0.5"', 0.5)])
def test_a_number_is_read_as_it_is(written: str, value: float) -> None:
    assert number(json.loads(written), "loss") == value


@pytest.mark.parametrize("written", ["true", '"lots"', "[1]", '{"a": 1}'])
def test_anything_else_fails_the_run_naming_the_value(written: str) -> None:
    shown = json.dumps(json.loads(written))
    with pytest.raises(WorkloadError, match=re.escape(f"reported loss {shown} is not a number")):
        number(json.loads(written), "loss")


def _run(command: list[str], lr: float, tmp_path: Path) -> RunRecord:
    spec = bare_spec(
        entry=COMMAND_ENTRY, command=[*command, "--lr", "{lr}"], metric="mse",
        direction="minimize", threshold=0.5, params={"lr": lr}, steps=100, eval_every=25,
        out_dir=str(tmp_path / "out"),
    )  # fmt: skip
    return execute(spec, CommandWorkload, None)


def _first_infinite_step(lr: float) -> int:
    """The step at which `loss *= lr` from 1.0 leaves the doubles, as the scripts compute it."""
    loss, step = 1.0, 0
    while math.isfinite(loss):
        loss, step = loss * lr, step + 1
    return step


def _check(record: RunRecord, lr: float) -> None:
    if lr < 1:
        assert record.status == "accepted", record
        assert record.steps_done == 100
        return
    expected = _first_infinite_step(lr)
    assert record.status == "stopped", record
    assert record.stop is not None and record.stop.rule == "non_finite_loss"
    assert record.stop.step == expected < 100
    assert f"training loss is nan at step {expected}" in record.stop.message
    assert record.steps_done == expected


@pytest.mark.parametrize("lr", [0.5, 1e6])
def test_a_python_script_writing_null_is_stopped_by_the_non_finite_rule(
    lr: float, tmp_path: Path
) -> None:
    _check(_run(["python", str(HERE / "diverging_script.py")], lr, tmp_path), lr)


@pytest.mark.skipif(shutil.which("node") is None, reason="node (Node.js) is not installed")
@pytest.mark.parametrize("lr", [0.5, 1e6])
def test_a_nodejs_script_diverging_is_stopped_by_the_non_finite_rule(
    lr: float, tmp_path: Path
) -> None:
    """JSON.stringify(Infinity) is "null": the run the issue saw accepted at lr=1e6."""
    _check(_run(["node", str(HERE / "diverging_script.js")], lr, tmp_path), lr)


def test_the_python_helper_sends_a_nan_loss_as_non_finite_and_no_loss_as_none(
    tmp_path: Path,
) -> None:
    """`ablate_report` writes NaN as the NaN token; a step without a loss leaves it out (in
    a batch, `losses`), never `null`: the campaign reads `null` as non-finite."""
    script = tmp_path / "helper_script.py"
    script.write_text(
        "import ablate_report as ablate\n"
        "for step in range(1, 101):\n"
        "    loss = float('nan') if step == 70 else (0.5 if step % 4 == 0 else None)\n"
        "    if ablate.report(step, loss, **({'mse': 0.1} if step % 25 == 0 else {})).stop:\n"
        "        break\n"
    )
    record = _run([sys.executable, str(script)], 0.5, tmp_path)
    assert record.status == "stopped", record
    assert record.stop is not None and record.stop.rule == "non_finite_loss"
    assert record.stop.step == 70
    assert [step for step, _ in record_losses(tmp_path, record)] == [*range(4, 70, 4), 70]


def record_losses(tmp_path: Path, record: RunRecord) -> list[tuple[int, float]]:
    """The (step, loss) rows of the run's steps file."""
    with (tmp_path / "out" / record.artifacts["steps"]).open() as handle:
        rows = list(csv.DictReader(handle))
    return [(int(row["step"]), float(row["loss"])) for row in rows if row.get("loss")]
