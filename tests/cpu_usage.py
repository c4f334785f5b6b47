"""CPU seconds per test file, the test process and every child it reaped together.

Wall time on a shared 2-core machine says more about the neighbours than about a test; CPU
seconds do not. `make cpu-usage` runs the suite with this plugin and prints the files that
cost most, the figure to cut when `make test` runs past its 8 minutes:

    python -m pytest -p tests.cpu_usage ...   # writes .cpu-usage/<worker>.json
    python -m tests.cpu_usage                 # the files by CPU seconds, most first

A child's CPU counts once it is reaped (`RUSAGE_CHILDREN`): a session fixture's server is
charged to the test during which it stops, and a process nobody waits for is not counted.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

REPORT_DIR = Path(".cpu-usage")


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class _Meter:
    def __init__(self) -> None:
        self.per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item):  # type: ignore[no-untyped-def]
        cpu, wall = _cpu_seconds(), time.monotonic()
        yield
        totals = self.per_file[item.nodeid.split("::")[0]]
        totals[0] += _cpu_seconds() - cpu
        totals[1] += time.monotonic() - wall

    def pytest_sessionfinish(self) -> None:
        REPORT_DIR.mkdir(exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (REPORT_DIR / f"{worker}.json").write_text(json.dumps(self.per_file, indent=1))


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Meter(), "cpu-usage-meter")


def main() -> None:
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for report in REPORT_DIR.glob("*.json"):
        for name, (cpu, wall) in json.loads(report.read_text()).items():
            totals[name][0] += cpu
            totals[name][1] += wall
    rows = sorted(totals.items(), key=lambda row: -row[1][0])
    cpu, wall = (sum(row[k] for row in totals.values()) for k in (0, 1))
    print(f"{cpu:8.1f} CPU s  {wall:8.1f} s  in all")
    for name, (cpu, wall) in rows[: int(sys.argv[1]) if len(sys.argv) > 1 else 40]:
        print(f"{cpu:8.1f} CPU s  {wall:8.1f} s  {name}")


if __name__ == "__main__":
    main()
