"""The report artifact: figures inline as `data:` URIs, wide tables as lists, REPORT.html named."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from PIL import Image

from ablations.campaign.folder import REPORT_HTML
from ablations.report import build_report
from ablations.report.artifact import FIGURE_PIXELS, WIDEST_TABLE, narrow_tables, report_artifact
from ablations.results.ledger import LEDGER_URL
from tests.ablations.analysis.synthetic import write_synthetic
from tests.ablations.report.test_report import inputs_of


def test_the_artifact_inlines_its_figures_names_the_page_and_fits_its_tables(
    tmp_path: Path,
) -> None:
    synthetic = write_synthetic(tmp_path, ledger_url=LEDGER_URL)
    build_report(tmp_path, inputs_of(tmp_path, synthetic))
    text = report_artifact(tmp_path)
    assert f"`{tmp_path.resolve() / REPORT_HTML}`" in text.split("\n## ")[0]
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) == 3 and all(link.startswith("data:image/png;base64,") for link in links)
    for link in links:
        with Image.open(io.BytesIO(base64.b64decode(link.split(",", 1)[1]))) as image:
            assert image.width <= FIGURE_PIXELS
    for line in text.splitlines():
        if line.startswith("|"):
            assert len(line) <= 2 * WIDEST_TABLE, line  # cell text plus padding
    assert "<details>" not in text
    # The effects table (12 columns) became one item per variant, its verdict first.
    assert "- **depth=1**: Verdict: **worse**; Category: useful; Pairs: 3;" in text


def test_a_narrow_table_stays_a_table() -> None:
    table = "| a | b |\n|---|---|\n| 1 | 2 |"
    assert narrow_tables(table) == table
    assert narrow_tables(table, widest=3) == "- **1**: b: 2"


def test_the_curves_so_far_show_the_finished_runs_inline(tmp_path: Path) -> None:
    import yaml

    from ablations.campaign.campaign import Campaign
    from ablations.campaign.opening import register
    from ablations.campaign.state import save_record
    from ablations.report.artifact import curves_so_far
    from ablations.run.records import RunRecord
    from tests.ablations.analysis.synthetic import PLAN

    out = tmp_path / "out"
    register(yaml.safe_dump(PLAN), out)
    campaign = Campaign.load(out)
    assert curves_so_far(campaign, "the pilot") is None  # nothing finished: nothing drawn
    for run in [r for r in campaign.phase("main") if r.seed == 0][:2]:
        metrics = out / "metrics"
        metrics.mkdir(exist_ok=True)
        (metrics / f"{run.run_id}.steps.csv").write_text("step,loss\n1,2.0\n2,1.5\n3,1.0\n")
        (metrics / f"{run.run_id}.evals.csv").write_text("step,accuracy\n3,0.9\n")
        save_record(
            out,
            RunRecord(
                run_id=run.run_id, variant=run.variant, seed=0, category=run.category,
                phase="main", status="accepted", steps_done=3, metrics={"accuracy": 0.9},
                artifacts={
                    "steps": f"metrics/{run.run_id}.steps.csv",
                    "evals": f"metrics/{run.run_id}.evals.csv",
                },
            ),
        )  # fmt: skip
    markdown = curves_so_far(campaign, "after look 1 of 4")
    assert markdown is not None and markdown.startswith("### Learning curves: after look 1 of 4")
    data = markdown.split("data:image/png;base64,", 1)[1].split(")", 1)[0]
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        assert image.format == "PNG" and image.width > 100
