"""Numbers for people: one place that decides how durations, money, metrics and times print.

- durations: seconds, minutes or hours by size, 3 significant figures (`42.0 s`, `7.50 min`,
  `24.0 h`), so a small campaign never shows `0.00 h` and 23.995 h never reads `24.00 h`;
- money: 2 decimals with thousands separators (`1,234.50 USD`);
- metric values: 4 significant figures (`0.5188`, not `0.518750011920929`);
- instants: ISO 8601 in UTC (`2026-12-03T02:55:00Z`).

The report, the budget markdown, the gate's reasons and the CLI all print through these.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

MINUTE = 60.0
HOUR = 3600.0


def significant(value: float, figures: int) -> str:
    """`value` with `figures` significant figures, trailing zeros kept (`0.8500`, `24.0`)."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    decimals = figures - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) != math.floor(math.log10(abs(value))):
        decimals -= 1  # 99.96 rounds up to 100.0: one figure moved left of the point
    return f"{rounded:.{max(decimals, 0)}f}"


def duration(seconds: float | None) -> str:
    """Seconds as `s`, `min` or `h`, whichever keeps the number between 1 and 60."""
    if seconds is None:
        return "-"
    sign, size = ("-" if seconds < 0 else ""), abs(seconds)
    if size < MINUTE:
        return f"{sign}{significant(size, 3)} s"
    if size < HOUR:
        return f"{sign}{significant(size / MINUTE, 3)} min"
    return f"{sign}{significant(size / HOUR, 3)} h"


def hours(value: float | None) -> str:
    """A duration given in hours, printed by `duration`."""
    return "-" if value is None else duration(value * HOUR)


def signed_hours(value: float | None) -> str:
    """A deviation in hours with its sign (`+4.50 min`, `-1.20 h`)."""
    if value is None:
        return "-"
    return ("+" if value >= 0 else "") + duration(value * HOUR)


def usd(value: float | None) -> str:
    """Money to the cent; unknown stays visibly unknown."""
    return "not known" if value is None else f"{value:,.2f} USD"


def metric(value: float | None) -> str:
    """A metric value to 4 significant figures; `-` when there is none."""
    if value is None or not math.isfinite(value):
        return "-" if value is None else str(value)
    return significant(value, 4)


def utc(epoch: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC to the millisecond (None stays None)."""
    if epoch is None or not math.isfinite(epoch):
        return None
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)  # datetime.UTC is 3.11+
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
