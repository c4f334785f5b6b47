"""Write `tests/durations.json` (seconds per test file) from a pytest JUnit XML report.

`tests/conftest.py` starts the longest files first, so under `-n 2 --dist loadfile` the
long end-to-end campaigns do not form the run's tail. Refresh after adding slow tests:

    make durations        # pytest --junitxml, then this script
"""

from __future__ import annotations

import argparse
import collections
import json
import xml.etree.ElementTree as ET
from pathlib import Path


def file_seconds(junit: Path) -> dict[str, float]:
    """Each test file's summed test time (setup and teardown included) in the report."""
    seconds: dict[str, float] = collections.defaultdict(float)
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        # `tests.faults.test_kill_resume` or `tests.faults.test_kill_resume.Class`
        parts = module.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time", 0))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--out", type=Path, default=Path("tests/durations.json"))
    args = parser.parse_args()
    seconds = file_seconds(args.junit)
    ranked = dict(sorted(((f, round(s, 1)) for f, s in seconds.items()), key=lambda x: -x[1]))
    args.out.write_text(json.dumps(ranked, indent=1) + "\n")
    print(f"{args.out}: {len(ranked)} files, {sum(ranked.values()):.0f} s in all")


if __name__ == "__main__":
    main()
