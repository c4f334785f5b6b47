"""A small plan cannot exhaust memory: alias expansion, scalar sizes, whole numbers' digits and
every numeric field are bounded before anything is built, and the error that says so is cut
before it is built. Each bomb is refused by `ablate validate` in one line, exit 2, with the
process's peak allocation (tracemalloc, a bound, not a timing) a small multiple of the file."""

from __future__ import annotations

import copy
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.cli import main
from ablations.errors import SHOWN_VALUE_CHARS, short_repr
from ablations.plan.io import MAX_SCALAR_CHARS
from tests.conftest import DEMO_PLAN

PEAK_BYTES = 64 << 20
"""What validating any of these may allocate at its peak: the file is at most a megabyte; the
bombs, expanded, are 1 to 10 GB."""


def _aliased(scalar_bytes: int, times: int) -> str:
    """A plan-shaped mapping whose one scalar is aliased `times` times."""
    aliases = ", ".join(["*s"] * times)
    return (
        "campaign: {id: c, question: q, decision: d}\n"
        f"metric: &s {'x' * scalar_bytes}\n"
        f"factors: {{width: {{levels: [{aliases}]}}}}\n"
    )


def _demo(edit: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(yaml.safe_load(DEMO_PLAN.read_text()))
    edit(data)
    return yaml.safe_dump(data)


def _set(section: str, key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data[section][key] = value

    return edit


def _control_width(data: dict[str, Any]) -> None:
    data["control"]["params"]["width"] = 100_000_000


BOMBS: dict[str, tuple[Callable[[], str], str]] = {
    "100 KB scalar x 100 000": (
        lambda: _aliased(100_000, 100_000),
        "YAML aliases expand to more than 4194304 characters",
    ),
    "900 KB scalar x 1 000": (
        lambda: _aliased(900_000, 1_000),
        "YAML aliases expand to more than 4194304 characters",
    ),
    "steps of 10 000 digits": (
        lambda: _demo(_set("workload", "steps", 271_828)).replace("271828", "9" * 10_000),
        "workload.steps: a whole number of 10000 digits: at most 19",
    ),
    "a 20 KB question": (
        lambda: _demo(_set("campaign", "question", "why " * 5_000)),
        f"campaign.question: a value of 20000 characters: at most {MAX_SCALAR_CHARS}",
    ),
    "keep_last: 1e9": (
        lambda: _demo(_set("checkpoint", "keep_last", 1e9)),
        "checkpoint.keep_last: Input should be less than or equal to 1000",
    ),
    "devices: 1e8": (
        lambda: _demo(_set("resources", "devices", 100_000_000)),
        "resources.devices: at most 1024 slots",
    ),
    "width: 1e8": (
        lambda: _demo(_control_width),
        "control.params.width: width must be in 1..16384 (got 1e+08)",
    ),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_each_bomb_is_refused_in_one_line_within_a_small_peak(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bomb: str
) -> None:
    make, said = BOMBS[bomb]
    path = tmp_path / "plan.yaml"
    path.write_text(make())
    assert path.stat().st_size <= 1 << 20  # each is within the file's own cap
    tracemalloc.start()
    try:
        code = main(["validate", str(path)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert code == 2 and not out
    assert err.count("\n") == 2 and said in err, err  # the head line and one problem
    assert peak < PEAK_BYTES, f"peak {peak >> 20} MiB"


def test_an_error_cuts_a_value_before_it_builds_its_repr() -> None:
    aliased = ["y" * 100_000] * 100_000  # a 10 GB repr
    tracemalloc.start()
    try:
        shown = [short_repr(aliased), short_repr(10**10_000), short_repr("z" * 10**6)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert shown[0].endswith("... (100000 items)") and shown[0].startswith("['yyy")
    assert shown[1] == "<a number of about 10001 digits>"  # repr itself would raise past 4300
    assert shown[2].endswith(" (1000000 characters)")
    assert all(len(s) <= SHOWN_VALUE_CHARS + 25 for s in shown)
