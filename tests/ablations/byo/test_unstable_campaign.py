"""`ablate run` on a command workload whose one run collapses (issue 53): a variant's seed 5
ends at accuracy 0.41 against 0.97 for every other run, above the quality threshold, so no
stop rule fires. The look names the seed and gives no claim (`unstable`), the report and the
decision say so and what to do, a healthy variant's claim says what its seeds rule out, and
`ablate verify` re-judges the look to the same verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ablations.analysis.stability import WHAT_TO_DO
from tests.ablations.byo.campaigns import manifest, verify
from tests.faults.conftest import Campaign

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("collapsing_script.py")
PLAN: dict[str, Any] = {
    "campaign": {"id": "collapse", "question": "Is the cheaper setting as good?", "decision": "x"},
    "workload": {
        "command": ["python", str(SCRIPT), "--shift", "{shift}", "--collapse-seed", "{collapse}"],
        "steps": 4,
        "eval_every": 2,
    },
    "control": {"params": {"shift": 0.0, "collapse": -1}},
    "factors": {
        "shift": {"category": "essential", "levels": [0.001]},
        "collapse": {"category": "essential", "levels": [5]},
    },
    "seeds": list(range(8)),
    "metric": {
        "name": "accuracy",
        "threshold": 0.3,
        "useful_effect": 0.01,
        "decision_rule": "non_inferiority",
    },
    "stop_rules": {"quality": {"warmup_steps": 2}},
    "pilot": {"steps": 2, "seeds": [0]},
    "checkpoint": {"store": "file://./ckpt", "interval": {"steps": 2}},
    "resources": {"devices": 2},
}
UNSTABLE = "unstable: seed 5 diverged (accuracy 0.41 against a median of 0.97"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    root = tmp_path_factory.mktemp("unstable-campaign")
    done = Campaign(root / "c", PLAN, root / "prefect-home")
    result = done.run()
    assert result.returncode == 0, result.stdout + result.stderr
    return done


def test_the_collapsed_run_is_accepted_and_its_variant_ends_unstable(campaign: Campaign) -> None:
    runs = manifest(campaign)
    assert runs["collapse=5 s5 main"]["status"] == "accepted"  # no stop rule fired
    assert runs["collapse=5 s5 main"]["metrics"]["accuracy"] == pytest.approx(0.41)
    (look,) = json.loads((campaign.out / "looks.json").read_text())["looks"]
    judged = {j["variant"]: j for j in look["judgements"]}
    assert judged["collapse=5"]["verdict"] == "unstable" and judged["collapse=5"]["diverged"]
    assert judged["collapse=5"]["note"].startswith(UNSTABLE)
    assert WHAT_TO_DO in judged["collapse=5"]["note"]
    assert judged["shift=0.001"]["verdict"] == "not worse"
    assert "diverged" not in judged["shift=0.001"]  # written only when a seed diverged


def test_the_report_names_the_seed_and_what_the_claim_rules_out(campaign: Campaign) -> None:
    report = (campaign.out / "REPORT.md").read_text()
    decision = report.split("**Decision reached.** ", 1)[1].split("\n", 1)[0]
    assert "Unstable: collapse=5." in decision
    assert "collapse=5" not in decision.split("Unstable: ")[0]  # never adopted nor claimed
    row = next(line for line in report.splitlines() if line.startswith("| 5 | collapse=5 |"))
    assert UNSTABLE in row and row.rstrip(" |").endswith(WHAT_TO_DO)  # the next decision
    assert (
        "not worse at look 1 (8 seeds), none diverged: a failure mode in 31% or more of runs "
        "is excluded (95%)"
    ) in report


def test_verify_rejudges_the_look(campaign: Campaign) -> None:
    verify(campaign)
