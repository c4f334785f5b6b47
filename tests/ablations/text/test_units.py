"""Human-scale units: durations by size, money, metrics, ISO 8601 UTC times."""

from __future__ import annotations

import pytest

from ablations.text.units import duration, hours, metric, signed_hours, significant, usd, utc


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 s"),
        (0.01234, "0.0123 s"),
        (4.2, "4.20 s"),
        (59.96, "60.0 s"),
        (90.0, "1.50 min"),
        (3599.0, "60.0 min"),
        (23.995 * 3600, "24.0 h"),
        (100.0 * 3600, "100 h"),
        (-150.0, "-2.50 min"),
        (None, "-"),
    ],
)
def test_durations_pick_their_unit_with_three_significant_figures(
    seconds: float | None, text: str
) -> None:
    assert duration(seconds) == text


def test_hours_and_signed_hours() -> None:
    assert hours(0.001) == "3.60 s"
    assert hours(23.995) == "24.0 h"
    assert signed_hours(0.25) == "+15.0 min"
    assert signed_hours(-2.0) == "-2.00 h"


def test_money_metrics_and_significant_figures() -> None:
    assert usd(1234.5) == "1,234.50 USD"
    assert usd(None) == "not known"
    assert metric(0.518750011920929) == "0.5188"
    assert metric(0.85) == "0.8500"
    assert metric(1234.567) == "1235"
    assert metric(None) == "-"
    assert significant(99.96, 3) == "100"


def test_utc_is_iso_8601() -> None:
    assert utc(0.0) == "1970-01-01T00:00:00.000Z"
    assert utc(1_700_000_000.25) == "2023-11-14T22:13:20.250Z"
    assert utc(None) is None
