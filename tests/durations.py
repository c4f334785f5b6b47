"""How long each test file takes, so that `pytest -n 3` starts the longest files first.

xdist's own order (files with most tests first) left the one-test campaigns for last: the
two-minute pool campaign started when the other process had nothing left to run, and the suite
ended 90 s after one of its two processes went idle. Handing out the longest files first
(longest-processing-time scheduling) keeps both busy to the end: `make test`'s tests took
437 s instead of 498 s on 2 cores (measured; ARCHITECTURE.md, "Tests").

The figures live in `tests/durations.json`, seconds per file as one pytest process of two
measured them. `make durations` measures them again; a file missing from it (a new one) counts
as `UNKNOWN_SECONDS` and is handed out among the short ones until then. Only the order
depends on the figures; `tests/test_durations.py` fails on a listed file that is gone (a
rename), so that the figures follow the suite.

    python -m tests.durations REPORT.xml    # a junit report -> tests/durations.json
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path
from typing import Protocol, TypeVar

from ablations.files.atomic import atomic_write_text

DURATIONS_FILE = Path(__file__).with_name("durations.json")
UNKNOWN_SECONDS = 1.0


def load(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Seconds per test file (`tests/...py`); empty when the file is missing or unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(name): float(seconds) for name, seconds in data.items()}


class _Test(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=_Test)


def longest_files_first(items: list[T], seconds: dict[str, float]) -> None:
    """Sort `items` in place by their file's duration, longest first. The sort is stable, so
    a file's tests keep their order and stay together (xdist's `loadfile` scope)."""
    items.sort(key=lambda item: -seconds.get(_file_of(item.nodeid), UNKNOWN_SECONDS))


def from_junit(report: Path) -> dict[str, float]:
    """Seconds per test file in a junit XML report (setup, call and teardown of each test)."""
    totals: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "")
        # classname is the dotted module, followed by the class for tests inside one.
        parts = module.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if parts:
            totals["/".join(parts) + ".py"] += float(case.get("time", 0.0))
    return {name: round(total, 1) for name, total in sorted(totals.items())}


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.durations REPORT.xml", file=sys.stderr)
        return 2
    try:
        seconds = from_junit(Path(argv[0]))
    except (OSError, ElementTree.ParseError) as exc:
        print(f"error: {argv[0]}: not a readable junit report: {exc}", file=sys.stderr)
        return 2
    if not seconds:
        print(f"error: {argv[0]}: no test cases found", file=sys.stderr)
        return 2
    atomic_write_text(DURATIONS_FILE, json.dumps(seconds, indent=1) + "\n")
    print(f"{DURATIONS_FILE}: {len(seconds)} files, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
