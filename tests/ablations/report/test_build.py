"""`ablations.report.build`: REPORT.md links exactly the plots that were drawn, a plot with
nothing to show is removed, and the report and its plots are written whole (no temporary left
behind, no truncated PNG when a drawing fails) in the folder's one file mode.

tests/ablations/report/test_report.py covers the full build and a stale effects plot; these
pin the links against the files and the timeline's case.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from ablations.files.names import REPORT_HTML
from ablations.report import EFFECTS_PNG, PER_CLASS_PNG, REPORT_FILE, TIMELINE_PNG, ReportInputs
from ablations.report.build import build_report
from tests.ablations.analysis.synthetic import write_synthetic
from tests.ablations.report.test_curves import png_that_fails_midway
from tests.ablations.report.test_report import inputs_of
from tests.file_modes import UMASKS, modes, umask

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


@pytest.mark.parametrize("mask", UMASKS, ids=oct)
def test_the_report_and_its_plots_share_the_folders_one_mode(
    tmp_path: Path, inputs: ReportInputs, mask: int
) -> None:
    report = (REPORT_FILE, REPORT_HTML, *PLOTS)  # curves.png: test_curves.py (needs metrics)
    for name in report:  # an earlier build's, made private: the new files replace them
        (tmp_path / name).write_bytes(b"old")
        (tmp_path / name).chmod(0o600)
    with umask(mask) as expected:
        build_report(tmp_path, inputs)  # beside the synthetic campaign's metrics
    written = modes(tmp_path)
    assert {name: oct(written[name]) for name in report} == {n: oct(expected) for n in report}
    assert all((tmp_path / name).read_bytes() != b"old" for name in report)


def test_a_drawing_that_fails_midway_leaves_the_old_plot_whole_and_no_partial(
    tmp_path: Path, inputs: ReportInputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_report(tmp_path, inputs)
    before = {name: (tmp_path / name).read_bytes() for name in (*PLOTS, REPORT_FILE)}

    monkeypatch.setattr(FigureCanvasAgg, "print_png", png_that_fails_midway())
    with pytest.raises(OSError, match="No space left"):
        build_report(tmp_path, inputs)
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    fresh = tmp_path / "fresh"
    with pytest.raises(OSError, match="No space left"):
        build_report(fresh, inputs)
    assert not fresh.exists() or [p.name for p in fresh.iterdir()] == []
