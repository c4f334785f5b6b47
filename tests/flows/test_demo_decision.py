"""The demo campaign as `make demo` runs it, judged by today's statistics: width=16 is still
decided `worse`, the decision line is short plain text, and the looks judged again from the
folder's plan and records (`rejudged_looks`, what `ablate verify` calls) are the recorded ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ablations.analysis.looks import LookRecord
from ablations.campaign.campaign import Campaign as LoadedCampaign
from ablations.campaign.looks import rejudged_looks
from tests.conftest import DEMO_PLAN
from tests.faults.conftest import Campaign

# The whole demo (75 runs, 35 s on 2 cores): `make test-long`, which CI runs after `make test`.
pytestmark = [pytest.mark.slow, pytest.mark.long]


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

    assert rejudged_looks(LoadedCampaign.load(campaign.out)) == looks
    # the report names how alpha was spent: the demo registers O'Brien-Fleming's shape
    report = (campaign.out / "REPORT.md").read_text()
    assert "(alpha spent over the looks by obrien-fleming, split among the variants" in report
