"""runs.csv rows: ISO 8601 UTC times beside the epoch floats, reasons flattened."""

from __future__ import annotations

from datetime import datetime

from ablations.results.write import RUN_COLUMNS, _flat


def test_a_row_carries_iso_utc_times_beside_the_epoch_floats() -> None:
    row = {
        "run_id": "control-s0-abc",
        "status": "accepted",
        "started_at": 1_780_000_000.5,
        "ended_at": 1_780_000_090.75,
        "metrics": {"accuracy": 0.97},
    }
    flat = _flat(row, "accuracy")
    assert RUN_COLUMNS.index("started_at_utc") == RUN_COLUMNS.index("ended_at") + 1
    assert flat["started_at"] == row["started_at"]  # the float stays, for arithmetic
    assert flat["started_at_utc"] == "2026-05-28T20:26:40.500Z"
    assert flat["ended_at_utc"].endswith("Z")
    parsed = datetime.fromisoformat(flat["ended_at_utc"].replace("Z", "+00:00"))
    assert parsed.timestamp() == row["ended_at"]
    assert flat["seconds"] == 90.25


def test_a_pending_row_has_no_times() -> None:
    flat = _flat({"run_id": "x", "status": "pending"}, "accuracy")
    assert flat["started_at_utc"] is None and flat["ended_at_utc"] is None


def test_a_rejected_row_carries_its_reason() -> None:
    rejection = {"metric": "accuracy", "value": 0.84891, "threshold": 0.85, "step": 300}
    flat = _flat({"run_id": "x", "status": "rejected", "rejection": rejection}, "accuracy")
    assert flat["rejection"] == "accuracy 0.8489 < threshold 0.85 at step 300"
