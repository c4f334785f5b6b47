"""Held-out predictions from code that runs its own loop: each adapter writes the
`predictions/<run>.csv` the error analysis (flips) reads, when the code gives them: a
command's `ABLATE_PREDICTIONS` file, a Lightning data module's `predict_dataloader`, a
Trainer's `eval_dataset` labelled per input. Runs that did not train to their end keep none."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.analysis.flips import error_analysis, load_predictions, read_predictions
from ablations.byo.session import Session
from ablations.errors import WorkloadError
from ablations.run.records import RunRecord
from tests.ablations.byo import test_command, test_hf, test_lightning


def test_the_session_takes_integer_columns_of_one_length_and_unique_ids(tmp_path: Path) -> None:
    import torch

    session = Session(test_command.spec_for(None, tmp_path))
    session.set_predictions(torch.arange(3), [1, 0, 1], ["1", "1", "0"])
    assert session.predictions is not None
    assert session.predictions.ids == [0, 1, 2] and session.predictions.predicted == [1, 1, 0]
    with pytest.raises(WorkloadError, match=r"label 0.5 is not an integer"):
        session.set_predictions([0, 1], [0.5, 1], [0, 1])
    with pytest.raises(WorkloadError, match=r"different lengths \(input_id 2, label 2, predi"):
        session.set_predictions([0, 1], [0, 1], [0])
    with pytest.raises(WorkloadError, match=r"name an input id twice"):
        session.set_predictions([3, 3], [0, 1], [0, 1])


def _predictions(record: RunRecord, out: Path) -> list[list[str]]:
    assert record.status == "accepted", record
    frame = read_predictions(out / record.artifacts["predictions"])
    assert record.run_id in load_predictions(out, [record])  # what the report's analysis reads
    return frame.values.tolist()


def test_a_command_writes_the_documented_file(tmp_path: Path) -> None:
    record = test_command.run(test_command.spec_for(None, tmp_path))
    rows = _predictions(record, tmp_path / "out")
    assert [row[0] for row in rows] == [str(i) for i in range(48, 64)]
    assert {row[1] for row in rows} == {"0", "1"}


def test_a_malformed_predictions_file_fails_the_run_by_name(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(
        "import ablate_report as ablate\n"
        "ablate.predictions_file().write_text('id,label,predicted\\n1,0,0\\n')\n"
        "ablate.report(1, 0.5, mse=0.1)\n"
    )
    spec = test_command.spec_for(None, tmp_path, command=["python", str(script)], steps=1)
    record = test_command.run(spec)
    assert record.status == "failed" and record.error is not None
    assert "predictions file header is ['id', 'label', 'predicted']" in record.error.message


def test_a_stopped_command_keeps_no_predictions(tmp_path: Path) -> None:
    record = test_command.run(test_command.spec_for(None, tmp_path, params={"lr": 200.0}))
    assert record.status == "stopped" and "predictions" not in record.artifacts


@pytest.mark.slow  # imports Lightning: about 10 s
def test_lightning_predicts_through_the_data_modules_predict_dataloader(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    spec = test_lightning.spec_for(tmp_path, steps=10, eval_every=10)
    record = test_lightning.run(spec)
    rows = _predictions(record, tmp_path / "out")
    assert [row[0] for row in rows] == [str(i) for i in range(256, 320)]  # two batches
    assert record.environment is not None
    assert set(record.environment.frameworks) == {"lightning"}
    # a pilot (it stops at `until`) makes none; nor does a data module without the loader
    pilot = test_lightning.run(spec.model_copy(update={"until": 5, "phase": "pilot"}))
    assert pilot.status == "accepted" and "predictions" not in pilot.artifacts
    data = f"{test_lightning.NET}:Unpredicted"
    plain = test_lightning.run(test_lightning.spec_for(tmp_path, steps=10, lightning={
        **test_lightning.LIGHTNING, "data": data
    }))  # fmt: skip
    assert plain.status == "accepted" and "predictions" not in plain.artifacts


@pytest.mark.slow  # imports transformers: about 15 s
def test_a_trainer_predicts_its_eval_dataset_when_labelled_per_input(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    spec = test_hf.spec_for(
        tmp_path, hf_trainer=f"{test_hf.TINY}:make_classifier", params={"lr": 0.01}, steps=10
    )
    record = test_hf.run(spec)
    rows = _predictions(record, tmp_path / "out")
    assert [row[0] for row in rows] == [str(i) for i in range(64)]
    assert {row[1] for row in rows} <= {"0", "1", "2"}
    assert record.environment is not None
    assert {"transformers", "accelerate"} <= set(record.environment.frameworks)
    assert record.timings.evaluate > 0  # the predict pass is evaluation, not training time
    other = test_hf.run(spec.model_copy(update={"run_id": "lr-s0-abc", "variant": "lr=0.1"}))
    analysis = error_analysis([record, other], load_predictions(tmp_path / "out", [record, other]))
    assert analysis is not None and analysis.labels and len(analysis.confusion) == 2
