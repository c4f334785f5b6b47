from __future__ import annotations

from ablations.campaign.progress import outcome
from ablations.run.records import CheckpointSummary, RunRecord


def _main_run(**checkpoint: int) -> RunRecord:
    return RunRecord(
        run_id="control-s0-abc",
        variant="control",
        seed=0,
        category="essential",
        phase="main",
        status="accepted",
        steps_done=300,
        metrics={"accuracy": 0.98076923},
        checkpoint=CheckpointSummary(**checkpoint),
    )


def test_a_run_continuing_its_pilot_is_not_called_resumed() -> None:
    line = outcome(_main_run(resumed_from_step=100, pilot_step=100))
    assert line == "accuracy=0.9808; continued its pilot from step 100"


def test_a_run_recovered_after_an_interruption_says_where_it_resumed() -> None:
    assert outcome(_main_run(resumed_from_step=250, pilot_step=100)).endswith(
        "; resumed control-s0-abc from step 250"
    )
    assert outcome(_main_run(resumed_from_step=150)).endswith(
        "; resumed control-s0-abc from step 150"
    )
    assert outcome(_main_run()) == "accuracy=0.9808"
