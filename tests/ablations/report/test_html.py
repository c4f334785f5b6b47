"""REPORT.html: one self-contained page that parses, whose figures decode, in REPORT.md's order
with a run table grouped by variant; `ablate verify`'s check catches a damaged figure."""

from __future__ import annotations

import base64
import hashlib
import io
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from ablations.campaign.folder import REPORT_HTML
from ablations.campaign.manifest import FileEntry
from ablations.report import build_report
from ablations.report.md_html import markdown_to_html
from ablations.results.ledger import LEDGER_URL
from ablations.verify.files import check_entry
from ablations.verify.report_html import DATA_PNG, html_problem
from tests.ablations.analysis.synthetic import Synthetic, write_synthetic
from tests.ablations.report.test_report import inputs_of


class Page(HTMLParser):
    """What a reader of the page gets: images, headings in order, run rows, tables, links."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.headings: list[str] = []
        self.run_rows: list[dict[str, str]] = []
        self.external: list[str] = []
        self.wide_tables = self.tables = 0
        self._heading = False
        self._wide_open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.images.append(a["src"])
        if tag in ("script", "link", "img", "iframe") and a.get("src", a.get("href", "")):
            ref = a.get("src", a.get("href", ""))
            if not ref.startswith("data:"):
                self.external.append(ref)
        if tag in ("h1", "h2", "h3"):
            self._heading = True
            self.headings.append("")
        if tag == "tr" and a.get("class") == "run":
            self.run_rows.append({k[5:]: v for k, v in a.items() if k.startswith("data-")})
        if tag == "div" and "wide" in a.get("class", ""):
            self._wide_open = True
        if tag == "table":
            self.tables += 1
            self.wide_tables += self._wide_open

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2", "h3"):
            self._heading = False
        if tag == "div":
            self._wide_open = False

    def handle_data(self, data: str) -> None:
        if self._heading:
            self.headings[-1] += data


@pytest.fixture
def synthetic(tmp_path: Path) -> Synthetic:
    return write_synthetic(tmp_path, ledger_url=LEDGER_URL)


def test_the_page_stands_alone_in_report_order_with_every_run(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    build_report(tmp_path, inputs_of(tmp_path, synthetic))
    text = (tmp_path / REPORT_HTML).read_text()
    page = Page()
    page.feed(text)
    assert page.external == []  # no network: every figure inline, no script or style fetched
    assert len(page.images) == 3  # effects, per-class change, timeline (no metrics: no curves)
    for src in page.images:
        assert src.startswith(DATA_PNG)
        with Image.open(io.BytesIO(base64.b64decode(src[len(DATA_PNG) :]))) as image:
            image.verify()
    heads = page.headings
    order = ["Effects", "Findings by factor", "Runs", "Budget", "Planned vs realized"]
    assert [heads.index(h) for h in order] == sorted(heads.index(h) for h in order)
    assert heads[0] == "Campaign synthetic"
    assert text.index("Decision reached.") < text.index('id="effects"')
    assert len(page.run_rows) == len(synthetic.runs)
    stopped = [r for r in page.run_rows if r["status"] == "stopped"]
    assert stopped == [{"variant": "width=16", "status": "stopped", "seed": "2"}]
    assert page.tables == page.wide_tables > 3  # every table scrolls sideways, none clipped
    assert "overflow-x:auto" in text
    assert html_problem(text) is None


def test_without_scripts_the_run_table_is_grouped_by_variant(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    build_report(tmp_path, inputs_of(tmp_path, synthetic))
    text = (tmp_path / REPORT_HTML).read_text()
    assert '<tbody class="group"><tr><th colspan="8">dropout=0.3: 2 failed, 1 accepted</th>' in text


def test_markdown_subset_tables_bold_code_and_escaping() -> None:
    out = markdown_to_html(
        "## A <b>\n\n| a | b |\n|---|---|\n| **x** | `y\\|z` |\n\n- one\n- two\n\n![alt](p.png)",
        lambda src: None,
    )
    assert '<h2 id="a-b">A &lt;b&gt;</h2>' in out
    assert "<td><strong>x</strong></td><td><code>y|z</code></td>" in out
    assert "<ul><li>one</li><li>two</li></ul>" in out
    assert "<img" not in out  # an image the callback cannot give is left out, not broken


def damaged_figure(text: str) -> str:
    start = text.index(DATA_PNG) + len(DATA_PNG)
    data = bytearray(base64.b64decode(text[start : text.index('"', start)]))
    data[40:60] = bytes(20)  # inside the first chunk: the signature survives, the CRC does not
    return text[:start] + base64.b64encode(bytes(data)).decode() + text[text.index('"', start) :]


def test_verify_names_a_figure_that_does_not_decode(tmp_path: Path, synthetic: Synthetic) -> None:
    build_report(tmp_path, inputs_of(tmp_path, synthetic))
    path = tmp_path / REPORT_HTML
    path.write_text(damaged_figure(path.read_text()))
    data = path.read_bytes()
    entry = FileEntry(
        kind="report", path=REPORT_HTML, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data)
    )
    (problem,) = check_entry(tmp_path, entry, "campaign")
    assert str(problem).startswith("REPORT.html: figure 1 does not decode as a PNG")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("<html><body><table><tr><td>x</td></tr></body></html>", "<table> is never closed"),
        ('<html><body><img src="effects.png"></body></html>', "figure 1 is not an inline PNG"),
        (f'<html><body><img src="{DATA_PNG}@@@"></body></html>', "figure 1 is not valid base64"),
        (
            f'<html><body><img src="{DATA_PNG}{base64.b64encode(b"GIF89a").decode()}"></body>'
            "</html>",
            "figure 1 does not decode as a PNG (bad signature)",
        ),
    ],
)
def test_html_problem_names_what_is_wrong(text: str, says: str) -> None:
    problem = html_problem(text)
    assert problem is not None and says in problem


def test_ablate_report_rebuilds_the_page_from_the_folder(
    tmp_path: Path, synthetic: Synthetic
) -> None:
    from ablations.report import rebuild_report

    (tmp_path / REPORT_HTML).write_text("stale")
    rebuild_report(tmp_path)
    text = (tmp_path / REPORT_HTML).read_text()
    assert text.startswith("<!DOCTYPE html>") and html_problem(text) is None
