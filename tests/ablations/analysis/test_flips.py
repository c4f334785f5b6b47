"""Error analysis: confusion matrices, per-class change paired by seed, flipped inputs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ablations.analysis.flips import (
    confusion_matrix,
    error_analysis,
    flips,
    load_predictions,
    per_class_accuracy,
    per_class_frame,
    read_predictions,
)
from ablations.errors import PredictionsError
from tests.ablations.analysis.synthetic import (
    CONTROL_PRED,
    INPUTS,
    LABELS,
    WIDE_PRED,
    write_synthetic,
)


def frame(predicted: list[str], labels: list[str] = LABELS) -> pd.DataFrame:
    return pd.DataFrame({"input_id": INPUTS, "label": labels, "predicted": predicted})


def test_confusion_matrix_by_hand() -> None:
    matrix = confusion_matrix(frame(CONTROL_PRED), ["0", "1", "2"])
    # rows true, columns predicted: input 'e' (true 2) was predicted 1
    assert matrix.values.tolist() == [[2, 0, 0], [0, 2, 0], [0, 1, 1]]


def test_confusion_matrix_keeps_classes_never_predicted() -> None:
    matrix = confusion_matrix(frame(["0"] * 6), ["0", "1", "2", "3"])
    assert matrix.shape == (4, 4)
    assert matrix["0"].tolist() == [2, 2, 2, 0]
    assert int(matrix.values.sum()) == 6


def test_per_class_accuracy() -> None:
    accuracy = per_class_accuracy(frame(WIDE_PRED), ["0", "1", "2"])
    assert accuracy.tolist() == [0.5, 1.0, 1.0]


def test_flips_name_the_regressed_and_improved_inputs() -> None:
    worse, better = flips(frame(CONTROL_PRED), frame(WIDE_PRED))
    assert worse.to_dict("records") == [
        {"input_id": "b", "label": "0", "control_predicted": "0", "variant_predicted": "1"}
    ]
    assert better.to_dict("records") == [
        {"input_id": "e", "label": "2", "control_predicted": "1", "variant_predicted": "2"}
    ]


def test_flips_refuse_different_held_out_sets() -> None:
    other = frame(CONTROL_PRED).assign(input_id=["a", "b", "c", "d", "e", "zzz"])
    with pytest.raises(PredictionsError, match="different held-out inputs"):
        flips(frame(CONTROL_PRED), other)


def test_read_predictions_refuses_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text("input_id,label\na,1\n")
    with pytest.raises(PredictionsError, match=r"missing column\(s\) \['predicted'\]"):
        read_predictions(path)


def test_error_analysis_of_the_synthetic_campaign(tmp_path: Path) -> None:
    synthetic = write_synthetic(tmp_path)
    predictions = load_predictions(tmp_path, synthetic.records)
    analysis = error_analysis(synthetic.records, predictions)
    assert analysis is not None
    assert analysis.labels == ["0", "1", "2"]

    # Only accepted main-phase runs: 3 seeds x (control, width=128, depth=1, sgd) + 2 + 1.
    assert len(analysis.confusion) == 3 * 4 + 2 + 1
    assert synthetic.run("control", 0, "pilot").planned.run_id not in analysis.confusion
    stopped = synthetic.run("width=16", 2).planned.run_id
    assert stopped not in analysis.confusion

    change = per_class_frame(analysis)
    assert list(change.loc["width=128"]) == pytest.approx([-0.5, 0.0, 0.5])
    assert list(change.loc["depth=1"]) == pytest.approx([0.0, 0.0, 0.0])
    assert analysis.pairs["width=16"] == [0, 1]
    assert analysis.pairs["dropout=0.3"] == [0]

    wide = [f for f in analysis.flips if f.variant == "width=128"]
    assert [f.seed for f in wide] == [0, 1, 2]
    assert all([x.input_id for x in f.regressions] == ["b"] for f in wide)
    assert all([x.input_id for x in f.improvements] == ["e"] for f in wide)
    assert wide[0].control_run == synthetic.run("control", 0).planned.run_id
    others = [f for f in analysis.flips if f.variant != "width=128"]
    assert others and all(not f.regressions and not f.improvements for f in others)


def test_no_predictions_means_no_error_analysis(tmp_path: Path) -> None:
    synthetic = write_synthetic(tmp_path)
    assert error_analysis(synthetic.records, {}) is None
