"""The order of the test files (tests/durations.py): longest first, each file's tests together."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import durations
from tests.conftest import ROOT


@dataclass
class _Item:
    nodeid: str


def test_files_go_longest_first_and_each_keeps_its_tests_together_in_order() -> None:
    items = [
        _Item("tests/a.py::one"), _Item("tests/b.py::one"), _Item("tests/a.py::two"),
        _Item("tests/new.py::one"), _Item("tests/c.py::one"), _Item("tests/b.py::two"),
    ]  # fmt: skip
    seconds = {"tests/a.py": 0.5, "tests/b.py": 90.0, "tests/c.py": 12.0}
    durations.longest_files_first(items, seconds)
    assert [item.nodeid for item in items] == [
        "tests/b.py::one", "tests/b.py::two", "tests/c.py::one",
        "tests/new.py::one",  # unknown: UNKNOWN_SECONDS, among the short ones
        "tests/a.py::one", "tests/a.py::two",
    ]  # fmt: skip


def test_a_junit_report_gives_seconds_per_file_classes_included(tmp_path: Path) -> None:
    suite = tmp_path / "tests"
    suite.mkdir()
    (suite / "test_slow.py").write_text(
        "import time\n\ndef test_a():\n    time.sleep(0.3)\n\n"
        "class TestB:\n    def test_b(self):\n        time.sleep(0.2)\n"
    )
    (suite / "test_quick.py").write_text("def test_c():\n    pass\n")
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
         "--rootdir", str(tmp_path), str(suite)],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    seconds = durations.from_junit(report)
    assert set(seconds) == {"tests/test_slow.py", "tests/test_quick.py"}
    assert seconds["tests/test_slow.py"] >= 0.5 > seconds["tests/test_quick.py"]


def test_a_missing_or_broken_durations_file_orders_nothing(tmp_path: Path) -> None:
    assert durations.load(tmp_path / "absent.json") == {}
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert durations.load(broken) == {}
    broken.write_text("[1, 2]")
    assert durations.load(broken) == {}


def test_the_recorded_durations_name_test_files_of_this_suite() -> None:
    """A renamed file needs its new name there (or `make durations`) to keep its place."""
    seconds = json.loads(durations.DURATIONS_FILE.read_text())
    assert seconds, "tests/durations.json is empty"
    missing = [name for name in seconds if not (ROOT / name).is_file()]
    assert missing == [], f"tests/durations.json names files that are gone: {missing}"


def test_a_report_that_is_not_junit_exits_2_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = durations.DURATIONS_FILE.read_bytes()
    plan = tmp_path / "plan.yaml"
    plan.write_text("campaign: {id: x}\n")
    for report in (plan, tmp_path / "absent.xml"):
        assert durations.main([str(report)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {report}: not a readable junit report"), err
        assert err.count("\n") == 1
    assert durations.DURATIONS_FILE.read_bytes() == before
