"""The demo campaign as `make demo` runs it, judged by today's statistics: width=16 is still
decided `worse`, the decision line is short plain text, and the looks judged again from the
folder's plan and records (`rejudge_looks`, what a verifier calls) are the recorded ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ablations.analysis.looks import LookRecord, rejudge_looks
from ablations.plan.io import load_plan
from ablations.plan.model import plan_hash
from ablations.plan.variants import planned_runs
from ablations.records import RunRecord
from tests.conftest import DEMO_PLAN
from tests.faults.conftest import Campaign

pytestmark = pytest.mark.slow


def test_the_demo_decides_width_16_worse_in_a_short_plain_sentence(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "demo", yaml.safe_load(DEMO_PLAN.read_text()), tmp_path / "h")
    result = campaign.run(timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((campaign.out / "manifest.json").read_text())

    looks = [LookRecord.model_validate(look) for look in manifest["looks"]]
    final = {j.variant: j for look in looks for j in look.judgements if j.decided}
    assert final["width=16"].verdict == "worse", final["width=16"]

    sentence = manifest["decision_reached"]
    assert len(sentence) <= 300, sentence
    assert "`" not in sentence and "**" not in sentence and "-s0-" not in sentence
    assert f"decision: {sentence}\n" in result.stdout

    plan = load_plan(campaign.out / "plan.yaml")
    records = [RunRecord.model_validate_json(p.read_text()) for p in campaign.finished()]
    main = [r for r in planned_runs(plan, plan_hash(plan)) if r.phase == "main"]
    again = rejudge_looks(
        plan,
        records,
        main,
        dropped=manifest["gate"]["drop"],
        budget_ended=[look.budget_ended for look in looks],
    )
    assert again == [look.judgements for look in looks]
