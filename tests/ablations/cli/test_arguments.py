"""The argparse value types the subcommands share: a finite number in range, else one line
naming the option and the bad value, exit 2, nothing run."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ablations.cli.ablate import build_parser
from ablations.cli.arguments import (
    finite_non_negative,
    non_negative_int,
    positive_int,
    positive_seconds,
    webhook_url,
)

NOT_FINITE = ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"]
NOT_NUMBERS = ["", "abc", "1s", "5 seconds", "0x10", "--"]


@pytest.mark.parametrize("text", ["1", "0.25", "1e-3", " 2.5 ", "120", "1_000"])
@pytest.mark.parametrize("kind", [positive_seconds, finite_non_negative])
def test_a_finite_number_in_range_is_taken_as_written(
    kind: Callable[[str], float], text: str
) -> None:
    value = kind(text)
    assert value == float(text) and math.isfinite(value) and value > 0


def test_zero_is_a_tolerance_but_not_a_duration() -> None:
    assert finite_non_negative("0") == 0.0 and finite_non_negative("-0.0") == 0.0
    with pytest.raises(argparse.ArgumentTypeError, match=r"must be above 0 seconds, got '0'"):
        positive_seconds("0")


@pytest.mark.parametrize(
    ("kind", "text", "why"),
    [
        (k, t, "must be a finite number, got")
        for k in (positive_seconds, finite_non_negative)
        for t in NOT_FINITE
    ]
    + [
        (k, t, "not a number:")
        for k in (positive_seconds, finite_non_negative)
        for t in NOT_NUMBERS
    ]
    + [(positive_seconds, t, "must be above 0 seconds, got") for t in ("-1", "-0.5", "-1e-9")]
    + [
        (finite_non_negative, t, "must be a finite number >= 0, got")
        for t in ("-1", "-0.5", "-1e-9")
    ],
)
def test_a_bad_value_is_refused_naming_it(
    kind: Callable[[str], float], text: str, why: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        kind(text)
    assert str(raised.value) == f"{why} {text!r}"


@pytest.mark.parametrize("value", ["nan", "-1", "abc", "inf"])
def test_ablate_verify_refuses_a_bad_tolerance_with_exit_2_and_touches_nothing(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["verify", str(folder), "--tolerance", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --tolerance: " in err and repr(value) in err
    assert "Traceback" not in err
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_ablate_run_refuses_a_bad_heartbeat_timeout_before_reading_the_plan(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-plan.yaml"  # never opened: the value is refused first
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", str(missing), "--heartbeat-timeout", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "argument --heartbeat-timeout: " in err and repr(value) in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_whole_numbers_are_read_and_bad_ones_named() -> None:
    assert non_negative_int("0") == 0 and positive_int("3") == 3
    for kind, text, why in [
        (non_negative_int, "1.5", "must be a whole number >= 0, got '1.5'"),
        (non_negative_int, "-1", "must be a whole number >= 0, got '-1'"),
        (positive_int, "0", "must be a whole number >= 1, got '0'"),
        (positive_int, "two", "must be a whole number >= 1, got 'two'"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(why)):
            kind(text)


@pytest.mark.parametrize("value", ["-1", "0", "1.5"])
def test_max_runs_words_every_wrong_value_alike(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["validate", "plan.yaml", f"--max-runs={value}"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"argument --max-runs: must be a whole number >= 1, got {value!r}")


@pytest.mark.parametrize(
    "url", ["not a url", "example.com/hook", "ftp://h/x", "https://", "http:// h"]
)
def test_notify_refuses_a_webhook_that_is_no_http_url(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["notify", "--webhook", url])
    assert exited.value.code == 2
    assert "argument --webhook: not an http(s) URL" in capsys.readouterr().err
    assert webhook_url("https://hooks.example.com/T0/B0") == "https://hooks.example.com/T0/B0"
