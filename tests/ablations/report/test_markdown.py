"""`ablations.report.markdown`: REPORT.md's text from `ReportInputs`, without disk or plots.

tests/ablations/report/test_report.py checks the numbers of the synthetic campaign in the
effects, runs and error tables; these pin the rest of what `render_report` promises: cells
escaped, only the plots named are linked, each optional section shown exactly when it has
something to say, and the planned-vs-realized counts computed from the runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.analysis.flips import ErrorAnalysis, FlipInput, Flips
from ablations.report import EFFECTS_PNG, PER_CLASS_PNG, TIMELINE_PNG, ReportInputs
from ablations.report.markdown import MAX_FLIPS_SHOWN, render_report, table
from tests.ablations.analysis.synthetic import Synthetic, write_synthetic
from tests.ablations.report.test_report import inputs_of, row_of

LINKS = {
    EFFECTS_PNG: f"]({EFFECTS_PNG})",
    PER_CLASS_PNG: f"]({PER_CLASS_PNG})",
    TIMELINE_PNG: f"]({TIMELINE_PNG})",
}


@pytest.fixture
def inputs(tmp_path: Path) -> ReportInputs:
    synthetic: Synthetic = write_synthetic(tmp_path, ledger_url="sqlite:///ledger.db")
    return inputs_of(tmp_path, synthetic)


def test_table_escapes_pipes_and_newlines_and_leaves_none_empty() -> None:
    text = table(["a|b", "c"], [[None, "x\ny"], [1.5, "p|q"]])
    assert text.splitlines() == [
        "| a\\|b | c |",
        "|---|---|",
        "|  | x y |",
        "| 1.5 | p\\|q |",
    ]


@pytest.mark.parametrize("plots", [(), (TIMELINE_PNG,), (EFFECTS_PNG, PER_CLASS_PNG), tuple(LINKS)])
def test_only_the_plots_named_are_linked(inputs: ReportInputs, plots: tuple[str, ...]) -> None:
    markdown = render_report(inputs, plots)
    for name, link in LINKS.items():
        assert markdown.count(link) == (name in plots), name
    assert ("## Timeline" in markdown) == (TIMELINE_PNG in plots)


def test_the_head_shows_what_is_given(inputs: ReportInputs) -> None:
    markdown = render_report(inputs)
    assert markdown.startswith("# Campaign synthetic\n\n**Question.** Does width matter")
    assert f"Plan hash `{inputs.plan_hash}`." in markdown
    assert "**Hypothesis.**" not in markdown and "(gate" not in markdown
    given = inputs.model_copy(
        update={
            "hypothesis": "Wider is better.",
            "gate_source": "the UI",
            "gate_reason": None,
            "plan_hash": None,
        }
    )
    markdown = render_report(given)
    assert "**Hypothesis.** Wider is better.\n" in markdown
    assert "**continue** (the UI): no reason given" in markdown
    assert "Plan hash" not in markdown


def test_absent_budget_and_ledger(inputs: ReportInputs) -> None:
    assert "## Ledger" in render_report(inputs)
    bare = inputs.model_copy(update={"ledger_url": None, "budget_markdown": None})
    markdown = render_report(bare)
    assert "## Budget\n\nNot available for this campaign.\n" in markdown
    assert "## Ledger" not in markdown and "optuna-dashboard" not in markdown


def test_sections_come_in_order_and_the_text_ends_with_one_newline(
    inputs: ReportInputs,
) -> None:
    markdown = render_report(inputs, tuple(LINKS))
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Gate",
        "## Effects",
        "## Findings by factor",
        "## Stopped, failed, rejected and trimmed runs",
        "## Pilot runs",
        "## Error analysis",
        "## Budget",
        "## Planned vs realized",
        "## Timeline",
        "## Ledger",
    ]
    assert markdown.endswith("\n") and not markdown.endswith("\n\n")


def test_all_accepted_and_no_pilot(inputs: ReportInputs) -> None:
    accepted = [
        r
        for r in inputs.runs
        if r.record is not None and r.record.status == "accepted" and r.planned.phase == "main"
    ]
    markdown = render_report(inputs.model_copy(update={"runs": accepted}))
    assert "None: every finished run was accepted." in markdown
    assert "## Pilot runs" not in markdown
    assert row_of(markdown, "main")[1:3] == [str(len(accepted))] * 2  # registered, accepted
    with pytest.raises(AssertionError, match="no table row for 'pilot'"):
        row_of(markdown, "pilot")


def test_planned_vs_realized_counts_a_run_without_a_record_as_pending(
    inputs: ReportInputs,
) -> None:
    before = row_of(render_report(inputs), "main")
    header = row_of(render_report(inputs), "Phase")
    index = {name: i for i, name in enumerate(header)}
    victim = next(
        r for r in inputs.runs if r.planned.phase == "main" and r.record and r.record.steps_done
    )
    assert victim.record is not None
    runs = [r.model_copy(update={"record": None}) if r is victim else r for r in inputs.runs]
    after = row_of(render_report(inputs.model_copy(update={"runs": runs})), "main")
    status = victim.record.status
    assert int(after[index["pending"]]) == int(before[index["pending"]]) + 1
    assert int(after[index[status]]) == int(before[index[status]]) - 1
    assert after[index["Steps planned"]] == before[index["Steps planned"]]
    done = victim.record.steps_done - victim.planned.start_step
    assert int(after[index["Steps done"]]) == int(before[index["Steps done"]]) - done
    assert after[index["Registered"]] == before[index["Registered"]]


def test_a_pending_pilot_row_says_so(inputs: ReportInputs) -> None:
    runs = [
        r.model_copy(update={"record": None}) if r.planned.phase == "pilot" else r
        for r in inputs.runs
    ]
    pilot = next(r for r in runs if r.planned.phase == "pilot")
    row = row_of(render_report(inputs.model_copy(update={"runs": runs})), pilot.planned.run_id)
    assert row[4:] == ["pending", "-"]


def test_given_planned_vs_realized_replaces_the_computed_table(inputs: ReportInputs) -> None:
    given = inputs.model_copy(update={"planned_vs_realized_markdown": "\n| planned | 3 h |\n\n"})
    markdown = render_report(given)
    assert "## Planned vs realized\n\n| planned | 3 h |\n" in markdown
    with pytest.raises(AssertionError):
        row_of(markdown, "main")


def test_only_the_first_regressions_are_listed(inputs: ReportInputs) -> None:
    count = MAX_FLIPS_SHOWN + 3
    regressions = [
        FlipInput(input_id=f"i{n}", label="0", control_predicted="0", variant_predicted="1")
        for n in range(count)
    ]
    flips = Flips(
        variant="width=128", seed=0, control_run="c", variant_run="v",
        regressions=regressions, improvements=[],
    )  # fmt: skip
    errors = ErrorAnalysis(
        labels=["0", "1"], confusion={"v": [[0, count], [0, 0]]},
        per_class_change={}, pairs={"width=128": [0]}, flips=[flips],
    )  # fmt: skip
    markdown = render_report(inputs.model_copy(update={"errors": errors}))
    row = next(
        [c.strip() for c in line.strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("| width=128 | 0 | ")
    )
    assert row[2:4] == [str(count), "0"]
    shown = row[4].split(", ")
    assert shown == [f"i{n} (0->1)" for n in range(MAX_FLIPS_SHOWN)]
    assert "Per-class accuracy change" not in markdown  # no change computed: no table
    assert "**v**" in markdown
