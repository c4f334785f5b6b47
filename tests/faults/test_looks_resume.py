"""A sequential campaign killed between two looks (the `after-look-1` crash point, not a sleep)
and rerun reaches the same decisions as one that ran straight through: the first look is kept
as recorded, the second starts where it would have, and every look decides the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ablations.process.crash_points import AFTER_LOOK_1, FAULT, FAULT_EXIT
from ablations.verify.folder import verify_folder
from tests.faults.conftest import Campaign, fault_plan

pytestmark = pytest.mark.slow


def looks_plan() -> dict[str, Any]:
    # width 16 is a little worse than 32 on digits, dropout 0.05 close to the control: at least
    # one of them is still open after the first look, so the kill falls between two looks.
    return fault_plan(
        factors={
            "width": {"category": "essential", "levels": [16]},
            "dropout": {"category": "useful", "levels": [0.05]},
        },
        seeds={"start": 3, "max": 5, "looks": [3, 4, 5], "spending": "pocock"},
        metric={"threshold": 0.1, "useful_effect": 0.01, "decision_rule": "non_inferiority"},
        pilot={"steps": 100, "variants": ["control"]},
    )


def decisions(out: Path) -> list[list[tuple[str, str, bool, int, float | None]]]:
    """Each look's judgements, without the time it was recorded."""
    looks = json.loads((out / "looks.json").read_text())["looks"]
    return [
        [
            (j["variant"], j["verdict"], j["decided"], j["n_pairs"], j["mean_diff"])
            for j in look["judgements"]
        ]
        for look in looks
    ]


def statuses(out: Path) -> dict[str, str]:
    runs = json.loads((out / "manifest.json").read_text())["runs"]
    return {r["run_id"]: r["status"] for r in runs}


def test_killed_between_looks_the_rerun_decides_as_an_uninterrupted_campaign(
    tmp_path: Path,
) -> None:
    home = tmp_path / "prefect-home"
    straight = Campaign(tmp_path / "straight", looks_plan(), home)
    result = straight.run(timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = decisions(straight.out)
    assert len(expected) >= 2, expected  # the design's second look was reached

    killed = Campaign(tmp_path / "killed", looks_plan(), home)
    died = killed.run(timeout=600, **{FAULT: AFTER_LOOK_1})
    assert died.returncode == FAULT_EXIT, died.stdout + died.stderr
    assert decisions(killed.out) == expected[:1]
    recorded = json.loads((killed.out / "looks.json").read_text())["looks"][0]

    rerun = killed.run(timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert decisions(killed.out) == expected
    # the first look is the one recorded before the kill, never re-decided
    assert json.loads((killed.out / "looks.json").read_text())["looks"][0] == recorded
    # the same runs ran, and the same were not needed (same plan: same run ids)
    assert statuses(killed.out) == statuses(straight.out)
    assert "unneeded" in statuses(killed.out).values()
    assert verify_folder(killed.out, check_store=False).problems == []
