"""REPORT.md and its plots: content, single-seed wording, rebuild from the folder alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablations.report import (
    EFFECTS_PNG,
    PER_CLASS_PNG,
    REPORT_FILE,
    TIMELINE_PNG,
    ReportInputs,
    assemble_inputs,
    build_report,
    decision_reached,
    rebuild_report,
    render_report,
)
from ablations.results.ledger import LEDGER_URL
from tests.ablations.analysis.synthetic import STOP_MESSAGE, Synthetic, write_synthetic

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def inputs_of(out_dir: Path, synthetic: Synthetic, **kw: object) -> ReportInputs:
    return assemble_inputs(
        out_dir,
        synthetic.plan,
        synthetic.runs,
        plan_hash=synthetic.plan_hash,
        gate_decision="continue",
        gate_reason="the pilot was healthy",
        ledger_url=LEDGER_URL,
        **kw,  # type: ignore[arg-type]
    )


def row_of(markdown: str, first_cell: str) -> list[str]:
    """The cells of the effects table's row starting with `first_cell`."""
    for line in markdown.split("## Effects")[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row for {first_cell!r}")


@pytest.fixture
def synthetic(tmp_path: Path) -> Synthetic:
    return write_synthetic(tmp_path, ledger_url=LEDGER_URL)


def test_build_report_writes_the_markdown_and_three_plots(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    inputs = inputs_of(tmp_path, synthetic)
    markdown = build_report(tmp_path, inputs)
    assert (tmp_path / REPORT_FILE).read_text() == markdown
    for name in (EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5_000, name
        assert f"]({name})" in markdown

    assert "**Question.** Does width matter for held-out accuracy?" in markdown
    assert "**continue**: the pilot was healthy" in markdown
    assert "Adopt width=128: accuracy +0.0350" in markdown
    assert "Worse: depth=1." in markdown and "Equivalent: optimizer=sgd." in markdown
    decision = markdown.split("**Decision reached.** ")[1].split("\n")[0]
    assert "Fails threshold: width=16." in decision and "Failed: dropout=0.3." in decision
    assert len(decision) <= 300
    # the reasons are the effects table's notes (the sentence names the verdicts only)
    assert "1/3 seeds stopped: quality below the threshold" in row_of(markdown, "width=16")[11]
    assert "2/3 seeds failed: RuntimeError: CUDA error" in row_of(markdown, "dropout=0.3")[11]

    wide = row_of(markdown, "width=128")
    assert wide[2] == "3"  # pairs
    assert wide[5] == "+0.0350"  # mean difference
    effect = next(e for e in inputs.effects if e.variant == "width=128")
    # the adjusted interval (corrected across the five variants), as the analysis computed it
    assert wide[7] == f"[{effect.ci_low:+.4f}, {effect.ci_high:+.4f}]"
    assert effect.level is not None and effect.level > 0.95
    assert wide[8] == "-"  # a folder without looks: judged once, at the end
    assert wide[10] == "**better**"
    assert row_of(markdown, "depth=1")[10] == "**worse**"
    assert row_of(markdown, "optimizer=sgd")[10] == "**equivalent**"
    assert row_of(markdown, "width=16")[10] == "**fails threshold**"

    single = row_of(markdown, "dropout=0.3")
    assert single[2] == "1" and single[7] == "-" and single[6] == "-"  # no sd, no interval
    assert single[10] == "**failed**" and "2/3 seeds failed" in single[11]

    stopped = row_of(markdown, synthetic.run("width=16", 2).planned.run_id)
    assert stopped[4] == "stopped" and STOP_MESSAGE in stopped[6]
    failed = row_of(markdown, synthetic.run("dropout=0.3", 1).planned.run_id)
    assert failed[4] == "failed" and failed[6].startswith("RuntimeError: CUDA error")

    per_class = [line for line in markdown.splitlines() if line.startswith("| width=128 |")]
    assert "| width=128 | -0.500 | +0.000 | +0.500 |" in per_class
    assert "| width=128 | 0 | 1 | 1 | b (0->1) |" in markdown
    assert "## Pilot runs" in markdown
    assert row_of(markdown, "main")[1:3] == ["18", "15"]  # registered, accepted
    assert f"`optuna-dashboard {LEDGER_URL}`" in markdown


def test_given_budget_and_planned_vs_realized_are_shown_as_given(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    inputs = inputs_of(
        tmp_path,
        synthetic,
        budget_markdown="Spent **$42** of $100.",
        planned_vs_realized_markdown="| planned | 3 h |",
    )
    markdown = render_report(inputs)
    assert "## Budget\n\nSpent **$42** of $100." in markdown
    assert "## Planned vs realized\n\n| planned | 3 h |" in markdown
    assert "![" not in markdown  # no plot drawn, none linked


def test_reframe_decision_and_missing_gate(tmp_path: Path, synthetic: Synthetic) -> None:
    inputs = inputs_of(tmp_path, synthetic).model_copy(
        update={"gate_decision": "reframe", "gate_reason": "the control was stopped"}
    )
    assert decision_reached(inputs).startswith("Reframe:")
    assert "the control was stopped" in decision_reached(inputs)
    none = inputs.model_copy(update={"gate_decision": None, "effects": []})
    assert "No gate decision was recorded." in render_report(none)
    assert decision_reached(none) == "No decision: no variant was compared with the control."


def test_a_report_without_effects_removes_a_stale_effects_plot(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    build_report(tmp_path, inputs_of(tmp_path, synthetic))
    empty = inputs_of(tmp_path, synthetic).model_copy(update={"effects": [], "errors": None})
    markdown = build_report(tmp_path, empty)
    assert not (tmp_path / EFFECTS_PNG).exists() and not (tmp_path / PER_CLASS_PNG).exists()
    assert (tmp_path / TIMELINE_PNG).exists()
    assert "No class predictions were exported" in markdown


def test_rebuild_from_a_copied_folder_alone(tmp_path: Path, synthetic: Synthetic) -> None:
    original = tmp_path
    expected = build_report(original, inputs_of(original, synthetic))
    copy = tmp_path.parent / f"{tmp_path.name}-copy"
    shutil.copytree(original, copy)
    for name in (REPORT_FILE, EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG):
        (copy / name).unlink()
    path = rebuild_report(copy)
    assert path == copy / REPORT_FILE
    assert path.read_text() == expected
    assert all((copy / n).exists() for n in (EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG))


def test_report_command(
    tmp_path: Path, synthetic: Synthetic, capsys: pytest.CaptureFixture[str]
) -> None:
    from ablations.cli import EXIT_INPUT, main

    assert main(["report", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / REPORT_FILE)

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == EXIT_INPUT  # not a campaign folder: bad input
    assert "manifest.json does not exist" in capsys.readouterr().err

    (empty / "manifest.json").write_text('{"campaign_id": "x"}')
    assert main(["report", str(empty)]) == EXIT_INPUT
    assert "holds no 'runs' list" in capsys.readouterr().err


def test_the_report_names_the_code_and_what_verify_re_evaluates(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    built_in = render_report(inputs_of(tmp_path, synthetic, code="ablate 0.1.0, its own workload"))
    assert "**Code.** ablate 0.1.0, its own workload." in built_in
    assert "re-evaluates each accepted run's final model (models/) afresh." in built_in
    lightning = {"lightning": {"module": "pkg.m:Net", "data": "pkg.m:Data"}}
    workload = synthetic.plan.workload.model_validate(lightning)
    plan = synthetic.plan.model_copy(update={"workload": workload})
    adapter = render_report(assemble_inputs(tmp_path, plan, synthetic.runs))
    assert "it re-evaluates no model: a Lightning run's model is in Lightning's checkpoints" in (
        adapter
    )
