"""`ablate budget` as a user runs it: figures or a plan, text or JSON, exit 2 on bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ablations.campaign.state import save_record
from ablations.cli import main
from ablations.run.records import RunRecord, Timings
from tests.conftest import DEMO_PLAN, ROOT

CONTRACT = {"window_hours", "fits", "unused_hours", "overrun_hours", "price_usd",
            "cost_per_accepted_usd", "suggestions"}  # fmt: skip


def budget_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["budget", *args, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert set(out) >= CONTRACT
    return out


def test_figures_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    out = budget_json(
        capsys, "--gpu", "RTX 4090", "--hours", "48", "--lots", "2", "--accepted", "2"
    )
    assert (out["window_hours"], out["fits"], out["unused_hours"], out["overrun_hours"]) == (
        72.0, True, 24.0, 0.0
    )  # fmt: skip
    assert out["price_usd"] == 94.28 and out["cost_per_accepted_usd"] == 47.14
    assert out["suggestions"] == []


def test_figures_that_overrun_point_to_the_7_day_package(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = budget_json(capsys, "--gpu", "RTX 4090", "--hours", "78")
    assert (out["fits"], out["overrun_hours"], out["unused_hours"]) == (False, 6.0, 0.0)
    assert out["cost_per_accepted_usd"] is None  # no --accepted
    [s] = out["suggestions"]
    assert (s["kind"], s["days"], s["price_usd"], s["unused_hours"]) == ("package", 7, 110.0, 90.0)
    assert main(["budget", "--gpu", "RTX 4090", "--hours", "78"]) == 0
    text = capsys.readouterr().out
    assert "6.00 h over the window" in text and "for 7 days (110.00 USD)" in text


def test_zero_accepted_shows_the_spend_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    out = budget_json(capsys, "--gpu", "RTX 4090", "--hours", "10", "--accepted", "0")
    assert out["cost_per_accepted_usd"] is None and out["total_usd"] == 47.14
    assert main(["budget", "--gpu", "RTX 4090", "--hours", "10", "--accepted", "0"]) == 0
    text = capsys.readouterr().out
    assert "undefined (no run was accepted)" in text and "47.14 USD" in text


def test_unpriced_card_shows_no_cost(capsys: pytest.CaptureFixture[str]) -> None:
    out = budget_json(capsys, "--gpu", "B200", "--hours", "10", "--accepted", "4")
    assert out["cards"] == 2 and out["price_usd"] is None and out["cost_per_accepted_usd"] is None
    out = budget_json(capsys, "--gpu", "B200", "--hours", "10", "--price", "500", "--accepted", "4")
    assert out["price_usd"] == 500.0 and out["cost_per_accepted_usd"] == 125.0


def test_demo_plan(capsys: pytest.CaptureFixture[str]) -> None:
    out = budget_json(capsys, str(DEMO_PLAN))
    assert out["fits"] is True and out["window_hours"] == 72.0 and out["prep_hours"] == 2.0
    assert out["price_usd"] == 47.14 and out["source"] == "plan estimate"


def test_plan_with_campaign_records(
    capsys: pytest.CaptureFixture[str],
    demo_data: dict[str, Any],
    write_plan: Callable[[Any], Path],
    tmp_path: Path,
) -> None:
    demo_data["budget"]["other_costs"] = [{"name": "storage", "usd": 2.86}]
    plan = write_plan(demo_data)
    out_dir = tmp_path / "out"
    for run_id, phase, status in [
        ("p-s0-1", "pilot", "accepted"),
        ("m-s0-1", "main", "accepted"),
        ("m-s1-1", "main", "accepted"),
        ("m-s2-1", "main", "failed"),
    ]:
        save_record(out_dir, RunRecord(run_id=run_id, variant="control", seed=0,
                                       category="essential", phase=phase, status=status,
                                       steps_done=100, timings=Timings(train=1.0)))  # fmt: skip
    out = budget_json(capsys, str(plan), "--records", str(out_dir))
    assert out["source"] == "pilot records" and out["accepted"] == 2
    assert out["total_usd"] == 50.0 and out["cost_per_accepted_usd"] == 25.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "H100", "--hours", "3"], "unknown GPU 'H100'.*known cards are B200, RTX 4090"),
        (["--gpu", "RTX 4090"], "give a plan file, or figures"),
        ([str(DEMO_PLAN), "--gpu", "RTX 4090"], "--gpu describe figures without a plan"),
        (["--gpu", "RTX 4090", "--hours", "3", "--records", "x"], "--records reads a campaign"),
        (["--gpu", "RTX 4090", "--hours", "-1"], "--hours: must be a finite number >= 0"),
        (
            ["--gpu", "RTX 4090", "--hours", "3", "--lots", "0"],
            "--lots: must be a whole number >= 1",
        ),
    ],
)
def test_bad_input_exits_2_with_a_message(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse errors exit through SystemExit
        sys.exit(main(["budget", *args]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "Traceback" not in err


def test_module_entry_point_runs_budget_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "budget", "--gpu", "nope", "--hours", "1"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "unknown GPU 'nope'" in result.stderr and "Traceback" not in result.stderr
