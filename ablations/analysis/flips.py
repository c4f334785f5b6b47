"""Error analysis for classification workloads, from the held-out predictions of each run.

Per run: a confusion matrix. Per variant, paired with the control by seed: the change in
per-class accuracy (variant - control, averaged over the paired seeds), and the inputs that
flipped: *regressions* (the control right, the variant wrong) and *improvements* (the reverse).
Only accepted main-phase runs are analysed, like the effects.

Predictions are `predictions/<run_id>.csv` with columns input_id, label, predicted. Labels
and input ids are kept as strings here so that they key JSON objects as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict

from ablations.errors import PredictionsError
from ablations.run.records import RunRecord

PREDICTION_COLUMNS = ("input_id", "label", "predicted")


class FlipInput(BaseModel):
    """One held-out input that the control and the variant classify differently (right/wrong)."""

    model_config = ConfigDict(frozen=True)

    input_id: str
    label: str
    control_predicted: str
    variant_predicted: str


class Flips(BaseModel):
    """Inputs a variant run gets wrong where the control on its seed is right, and back."""

    model_config = ConfigDict(frozen=True)

    variant: str
    seed: int
    control_run: str
    variant_run: str
    regressions: list[FlipInput]
    """Control right, variant wrong."""
    improvements: list[FlipInput]
    """Control wrong, variant right."""


class ErrorAnalysis(BaseModel):
    """Everything the report shows about classification errors; small enough for a manifest."""

    model_config = ConfigDict(frozen=True)

    labels: list[str]
    """Every class seen in any analysed run, sorted (numerically when the labels are numbers)."""
    confusion: dict[str, list[list[int]]]
    """Run id -> matrix: rows are true labels, columns predicted labels, both in `labels` order."""
    per_class_change: dict[str, dict[str, float]]
    """Variant -> label -> mean change of that class's accuracy versus the control (paired)."""
    pairs: dict[str, list[int]]
    """Variant -> the seeds paired for `per_class_change` and `flips`."""
    flips: list[Flips]


def read_predictions(path: Path) -> pd.DataFrame:
    """A predictions CSV as strings, refusing a file without the three columns."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in PREDICTION_COLUMNS if c not in frame.columns]
    if missing:
        raise PredictionsError(
            f"{path}: missing column(s) {missing}; expected {list(PREDICTION_COLUMNS)}"
        )
    return frame[list(PREDICTION_COLUMNS)]


def load_predictions(out_dir: Path, records: Sequence[RunRecord]) -> dict[str, pd.DataFrame]:
    """Run id -> predictions, for the accepted main-phase runs that exported them."""
    out: dict[str, pd.DataFrame] = {}
    for record in records:
        relative = record.artifacts.get("predictions")
        if record.phase != "main" or record.status != "accepted" or relative is None:
            continue
        path = out_dir / relative
        if path.exists():
            out[record.run_id] = read_predictions(path)
    return out


def sorted_labels(values: Sequence[str]) -> list[str]:
    """Distinct labels, numerically ordered when every label is a number."""
    distinct = set(values)
    try:
        return sorted(distinct, key=float)
    except ValueError:
        return sorted(distinct)


def _as_str(predictions: pd.DataFrame) -> pd.DataFrame:
    return predictions.astype({c: str for c in PREDICTION_COLUMNS})


def confusion_matrix(predictions: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """Counts of (true label, predicted label), every label in `labels` as a row and a column."""
    frame = _as_str(predictions)
    counts = pd.crosstab(frame["label"], frame["predicted"])
    return counts.reindex(index=list(labels), columns=list(labels), fill_value=0).astype(int)


def per_class_accuracy(predictions: pd.DataFrame, labels: Sequence[str]) -> pd.Series:
    """Accuracy within each true class (NaN for a class with no input)."""
    frame = _as_str(predictions)
    correct = (frame["label"] == frame["predicted"]).astype(float)
    return correct.groupby(frame["label"]).mean().reindex(list(labels))


def flips(control: pd.DataFrame, variant: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(regressions, improvements) between two runs on the same held-out inputs."""
    merged = _as_str(control).merge(
        _as_str(variant), on="input_id", suffixes=("_control", "_variant"), validate="one_to_one"
    )
    if len(merged) != len(control) or len(merged) != len(variant):
        raise PredictionsError(
            f"the runs predicted different held-out inputs ({len(control)} and {len(variant)} "
            f"rows, {len(merged)} shared); paired runs must see the same held-out set"
        )
    if (merged["label_control"] != merged["label_variant"]).any():
        bad = merged.loc[merged["label_control"] != merged["label_variant"], "input_id"].iloc[0]
        raise PredictionsError(f"input {bad!r} has different labels in the two runs")
    right_c = merged["label_control"] == merged["predicted_control"]
    right_v = merged["label_control"] == merged["predicted_variant"]
    columns = {
        "input_id": "input_id",
        "label_control": "label",
        "predicted_control": "control_predicted",
        "predicted_variant": "variant_predicted",
    }
    pick = merged[list(columns)].rename(columns=columns)
    return pick[right_c & ~right_v].reset_index(drop=True), pick[~right_c & right_v].reset_index(
        drop=True
    )


def _flip_inputs(frame: pd.DataFrame) -> list[FlipInput]:
    return [FlipInput.model_validate(row) for row in frame.to_dict("records")]


def error_analysis(
    records: Sequence[RunRecord],
    predictions: Mapping[str, pd.DataFrame],
    control: str = "control",
) -> ErrorAnalysis | None:
    """The error analysis of the accepted main-phase runs with predictions; None without any."""
    runs = [
        r
        for r in records
        if r.phase == "main" and r.status == "accepted" and r.run_id in predictions
    ]
    if not runs:
        return None
    labels = sorted_labels(
        [
            v
            for r in runs
            for col in ("label", "predicted")
            for v in _as_str(predictions[r.run_id])[col]
        ]
    )
    confusion = {
        r.run_id: confusion_matrix(predictions[r.run_id], labels).values.tolist() for r in runs
    }
    controls = {r.seed: r for r in runs if r.variant == control}
    changes: dict[str, list[pd.Series]] = {}
    pairs: dict[str, list[int]] = {}
    all_flips: list[Flips] = []
    for r in runs:
        base = controls.get(r.seed)
        if r.variant == control or base is None:
            continue
        before, after = predictions[base.run_id], predictions[r.run_id]
        change = per_class_accuracy(after, labels) - per_class_accuracy(before, labels)
        changes.setdefault(r.variant, []).append(change)
        pairs.setdefault(r.variant, []).append(r.seed)
        worse, better = flips(before, after)
        all_flips.append(
            Flips(
                variant=r.variant,
                seed=r.seed,
                control_run=base.run_id,
                variant_run=r.run_id,
                regressions=_flip_inputs(worse),
                improvements=_flip_inputs(better),
            )
        )
    per_class = {
        variant: {
            label: float(value)
            for label, value in pd.concat(series, axis=1).mean(axis=1).items()
            if pd.notna(value)
        }
        for variant, series in changes.items()
    }
    return ErrorAnalysis(
        labels=labels,
        confusion=confusion,
        per_class_change=per_class,
        pairs=pairs,
        flips=all_flips,
    )


def per_class_frame(analysis: ErrorAnalysis) -> pd.DataFrame:
    """Per-class change as a DataFrame: one row per variant, one column per label."""
    return pd.DataFrame.from_dict(analysis.per_class_change, orient="index").reindex(
        columns=analysis.labels
    )
