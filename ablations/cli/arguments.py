"""argparse value types the subcommands share: one line naming a bad value, exit 2."""

from __future__ import annotations

import argparse
import math


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above zero (`nan` and `inf` refused)."""
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text!r}")
    return value


def finite_non_negative(text: str) -> float:
    """An argparse type: a finite number >= 0 (`nan` and `inf` refused)."""
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1, got 0")
    return value
