"""bench/cli_latency.py: `-X importtime` read right, and what `ablate --help` and `ablate
validate` import, checked in a fresh interpreter (the bench times them; this pins that no
heavy library comes back through an eager import)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.bench.scripts import load
from tests.conftest import DEMO_PLAN, ROOT

bench = load("cli_latency")

SAMPLE = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:      2000 |       2500 | io
import time:       300 |        300 |     numpy.core
import time:      1000 |       1300 |   numpy.linalg
import time:      5000 |     250000 | numpy
import time:        50 |         50 | numpy.random
import time:       100 |        100 |   torch._C
import time:       900 |       1000 | ablations.plan
"""


def test_importtime_lines_are_counted_by_top_level_package() -> None:
    found = bench.parse_importtime(SAMPLE + "some other stderr line\n")
    assert found.modules == 8
    assert found.by_package == {"io": 0.0025, "numpy": 0.25005, "ablations": 0.001}
    assert found.seconds == pytest.approx(0.25355)
    assert found.heavy == ["torch", "numpy"]  # torch nested under ablations.plan: still found


@pytest.mark.parametrize("arguments", [["--help"], ["validate", str(DEMO_PLAN)]])
def test_the_quick_commands_import_no_heavy_library(arguments: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ablations.cli", *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    imports = bench.parse_importtime(done.stderr)
    assert imports.modules > 50  # the lines were read
    assert imports.heavy == []
