"""`ablations.report.build`: REPORT.md links exactly the plots that were drawn, a plot with
nothing to show is removed, and the report is written whole (no temporary left behind).

tests/ablations/report/test_report.py covers the full build and a stale effects plot; these
pin the links against the files and the timeline's case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.report import EFFECTS_PNG, PER_CLASS_PNG, REPORT_FILE, TIMELINE_PNG, ReportInputs
from ablations.report.build import build_report
from tests.ablations.analysis.synthetic import write_synthetic
from tests.ablations.report.test_report import inputs_of

PLOTS = (EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG)


@pytest.fixture
def inputs(tmp_path: Path) -> ReportInputs:
    return inputs_of(tmp_path, write_synthetic(tmp_path))


def _linked(markdown: str) -> set[str]:
    return {name for name in PLOTS if f"]({name})" in markdown}


def _on_disk(out: Path) -> set[str]:
    return {name for name in PLOTS if (out / name).is_file()}


def test_links_are_the_plots_on_disk(tmp_path: Path, inputs: ReportInputs) -> None:
    markdown = build_report(tmp_path, inputs)
    assert _linked(markdown) == _on_disk(tmp_path) == set(PLOTS)
    no_errors = inputs.model_copy(update={"errors": None})
    markdown = build_report(tmp_path, no_errors)
    assert _linked(markdown) == _on_disk(tmp_path) == {EFFECTS_PNG, TIMELINE_PNG}


def test_runs_without_times_remove_a_stale_timeline(tmp_path: Path, inputs: ReportInputs) -> None:
    build_report(tmp_path, inputs)
    untimed = [
        r.model_copy(
            update={
                "record": r.record.model_copy(update={"started_at": None, "ended_at": None})
                if r.record
                else None
            }
        )
        for r in inputs.runs
    ]
    markdown = build_report(tmp_path, inputs.model_copy(update={"runs": untimed}))
    assert TIMELINE_PNG not in _on_disk(tmp_path)
    assert _linked(markdown) == _on_disk(tmp_path) == {EFFECTS_PNG, PER_CLASS_PNG}
    assert "## Timeline" not in markdown


def test_the_report_replaces_the_old_one_whole(tmp_path: Path, inputs: ReportInputs) -> None:
    (tmp_path / REPORT_FILE).write_text("an old report, much longer than nothing\n" * 1000)
    markdown = build_report(tmp_path, inputs)
    assert (tmp_path / REPORT_FILE).read_text() == markdown
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
