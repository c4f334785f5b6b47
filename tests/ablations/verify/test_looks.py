"""`ablate verify` judges every look again from the records (`ablations.verify.looks`): a
verdict, an interval, an alpha or a look changed in looks.json and the manifest alike is
refused, naming the file, the look, the variant and the field; the untouched looks pass.

The end-to-end cases (a real campaign's folder, through `ablate verify`) are in
tests/flows/test_output_folder.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ablations.analysis.looks import LookRecord
from ablations.campaign.campaign import Campaign
from ablations.campaign.looks import decide_look, look_runs, recorded_looks
from ablations.campaign.manifest import Manifest
from ablations.files.names import LOOKS
from ablations.plan.model import plan_hash
from ablations.verify.looks import check_looks
from tests.ablations.campaign.test_looks import finish, folder, sequential_plan


@pytest.fixture
def decided(tmp_path: Path) -> Campaign:
    """Every look decided from records: width=16 worse at the first, width=128 at the last."""
    campaign = folder(tmp_path, sequential_plan())
    for look in (0, 1, 2):
        finish(campaign, look_runs(campaign, look))
        decide_look(campaign, look, slots=1)
    return campaign


def _check(campaign: Campaign, looks: list[LookRecord]) -> list[str]:
    """Write `looks` to looks.json and the manifest alike; the problems `check_looks` finds."""
    (campaign.out_dir / LOOKS).write_text(json.dumps({"looks": [x.model_dump() for x in looks]}))
    manifest = Manifest.model_construct(looks=looks)
    plan = campaign.plan
    return [str(p) for p in check_looks(campaign.out_dir, plan, plan_hash(plan), manifest)]


def _judged(look: LookRecord, variant: str, **changes: Any) -> LookRecord:
    judgements = [
        j.model_copy(update=changes) if j.variant == variant else j for j in look.judgements
    ]
    return look.model_copy(update={"judgements": judgements})


TAMPERS: dict[str, tuple[Callable[[list[LookRecord]], list[LookRecord]], str]] = {
    "verdict": (
        lambda x: [_judged(x[0], "width=16", verdict="better"), *x[1:]],
        "look 1, width=16: verdict is 'better', the records judge 'worse'",
    ),
    "alpha x10": (
        lambda x: [look.model_copy(update={"alpha": look.alpha * 10}) for look in x],
        "look 1: alpha is 0.5, the records judge 0.05",
    ),
    "interval narrowed": (
        lambda x: [
            x[0],
            _judged(
                x[1],
                "width=128",
                ci_low=x[1].judgements[0].mean_diff - 1e-4,
                ci_high=x[1].judgements[0].mean_diff + 1e-4,
            ),
            x[2],
        ],
        "look 2, width=128: ci_low is",
    ),
    "level": (
        lambda x: [x[0].model_copy(update={"level": 0.5}), *x[1:]],
        "look 1: level is 0.5, the records judge",
    ),
    "look dropped": (lambda x: x[:2], "ends at look 2 of 3 with width=128 still open"),
    "variant removed": (
        lambda x: [x[0], x[1].model_copy(update={"judgements": []}), x[2]],
        "look 2 leaves out width=128, the records do not",
    ),
    "budget ends a decided variant": (
        lambda x: [x[0].model_copy(update={"budget_ended": ["width=16"]}), *x[1:]],
        "look 1: the budget ended width=16, which the look decided",
    ),
}


def test_the_looks_as_recorded_pass(decided: Campaign) -> None:
    assert _check(decided, recorded_looks(decided).looks) == []


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_a_look_changed_alike_in_looks_json_and_the_manifest_is_refused(
    decided: Campaign, tamper: str
) -> None:
    change, expected = TAMPERS[tamper]
    lines = _check(decided, change(recorded_looks(decided).looks))
    # a missing last look is said once, of looks.json: the same records judge both
    sources = ("looks.json",) if tamper == "look dropped" else ("looks.json", "manifest.json")
    for source in sources:
        assert any(line.startswith(f"{source}: {expected}") for line in lines), lines
