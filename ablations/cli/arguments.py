"""argparse value types the subcommands share: one line naming a bad value, exit 2."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import TypeVar

Number = TypeVar("Number", int, float)

MAX_LOTS = 1000
"""`ablate budget --lots`: a thousand cards' worth of lots is past any rental we plan for; a
bigger number is a typo (10^40 once overflowed the cost to `inf`)."""
MAX_HOURS = 100_000.0
"""`--hours`, `--prep-hours`: more than eleven years of one card."""
MAX_DAYS = 3650
"""`--days`: a ten-year window."""
MAX_USD = 1e9
"""`--price`: a billion dollars for one lot."""
MAX_COUNT = 1_000_000_000
"""`--accepted`: more accepted results than any campaign can register."""
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


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
    return _whole(text, 0)


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    return _whole(text, 1)


def _whole(text: str, least: int) -> int:
    """A whole number >= `least`; every wrong value worded alike (`-1`, `0`, `x`)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise argparse.ArgumentTypeError(f"must be a whole number >= {least}, got {text[:40]!r}")
    return value


def at_most(kind: Callable[[str], Number], limit: Number) -> Callable[[str], Number]:
    """`kind` (one of the types above) that also refuses a value above `limit`."""

    def parse(text: str) -> Number:
        value = kind(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit:g}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """`--max-runs` and `--max-steps`: this process's caps on what a plan may ask for
    (`ablations.security.limits`; a plan may only lower them)."""
    parser.add_argument(
        "--max-runs",
        type=positive_int,
        default=None,
        metavar="N",
        help="the most runs a plan may declare (default: $ABLATE_MAX_RUNS, else 10000; a "
        "plan's resources.max_runs may only lower it)",
    )
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help="the most training steps of one run (default: $ABLATE_MAX_STEPS, else 1000000)",
    )


def store_url(text: str) -> str:
    """An argparse type: a store or endpoint URL to allow (s3://, file:///, http(s)://),
    without credentials, query or fragment."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("s3", "file", "http", "https") or not rest.strip("/"):
        raise argparse.ArgumentTypeError(
            f"not a store URL (s3://BUCKET/PREFIX, file:///PATH, https://HOST): {text[:80]!r}"
        )
    if "@" in rest.split("/")[0] or "?" in rest or "#" in rest or "," in text:
        raise argparse.ArgumentTypeError(
            "a store URL to allow holds no credentials, query, fragment or comma"
        )
    return text


def webhook_url(text: str) -> str:
    """An argparse type: an http(s) URL with a host, where a notification is POSTed."""
    scheme, sep, rest = text.partition("://")
    host = rest.split("/")[0].rpartition("@")[2]
    if not sep or scheme not in ("http", "https") or not host or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"not an http(s) URL (https://HOST/PATH): {text[:80]!r}")
    return text


def module_name(text: str) -> str:
    """An argparse type: a dotted Python module name (`mypkg.train`), nothing else."""
    if not _MODULE.fullmatch(text) or len(text) > 200:
        raise argparse.ArgumentTypeError(f"not a Python module name: {text[:80]!r}")
    return text
