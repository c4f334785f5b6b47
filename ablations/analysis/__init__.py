"""Analysis of a campaign's run records: paired-seed effects and classification errors."""

from ablations.analysis.errors import (
    ErrorAnalysis,
    FlipInput,
    Flips,
    PredictionsError,
    confusion_matrix,
    error_analysis,
    flips,
    load_predictions,
    per_class_accuracy,
    per_class_frame,
    read_predictions,
)
from ablations.analysis.paired import (
    Effect,
    ExcludedRun,
    Verdict,
    effects_frame,
    excluded_runs,
    metric_table,
    paired_effects,
    run_reason,
    verdict_of,
)

__all__ = [
    "Effect",
    "ErrorAnalysis",
    "ExcludedRun",
    "FlipInput",
    "Flips",
    "PredictionsError",
    "Verdict",
    "confusion_matrix",
    "effects_frame",
    "error_analysis",
    "excluded_runs",
    "flips",
    "load_predictions",
    "metric_table",
    "paired_effects",
    "per_class_accuracy",
    "per_class_frame",
    "read_predictions",
    "run_reason",
    "verdict_of",
]
