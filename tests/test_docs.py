"""The documentation: the generated plan reference, the README, and what the pages quote.

`make docs` builds the site strictly (every link and anchor of docs/ checked); these tests pin
what the build cannot see: that the reference names every field of every plan section and
comes from what `ablate schema` prints, not from a copy; that the README (outside the site)
stays short, lists every command, and links only to pages and headings that exist; and that
what the pages quote from the code (the output folder's names, the bench commands and their
flags, the demo's sizing line) is what the code has.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from ablations.plan.model import Plan
from tests.conftest import DEMO_PLAN, ROOT


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "plan_reference", ROOT / "docs" / "hooks" / "plan_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_names_every_field_of_every_section() -> None:
    schema = Plan.model_json_schema()
    page = _hook().render(schema)
    sections = re.split(r"^#+ ", page, flags=re.MULTILINE)
    by_heading = {section.split(" {#")[0]: section for section in sections if section}
    for name, model in [("Plan", schema), *schema["$defs"].items()]:
        assert name in by_heading, f"no section for {name}"
        for field in model.get("properties", {}):
            assert f"| `{field}` |" in by_heading[name], f"{name}.{field} missing"
    anchors = set(re.findall(r"\{#([\w-]+)\}", page))
    links = set(re.findall(r"\]\(#([\w-]+)\)", page))
    assert links and links <= anchors


def test_the_reference_is_generated_from_ablate_schema() -> None:
    assert _hook().schema() == Plan.model_json_schema()


def test_the_plan_page_keeps_the_marker() -> None:
    hook = _hook()
    assert hook.MARKER in (ROOT / "docs" / hook.PAGE).read_text()


# --- The README: the door, short, and true to the commands and pages it names -------------

README = ROOT / "README.md"
README_MOST_LINES = 200
"""#37: what ablate is, install, the two commands, a quick start, a command table, links."""
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as MkDocs (Python-Markdown's toc) makes it."""
    from markdown.extensions.toc import slugify

    return str(slugify(heading.replace("`", ""), "-"))


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#+ (.+?)\s*$", page.read_text(), re.MULTILINE)
    return {_slug(text) for text in headings}


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MOST_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_command_table_has_every_command_once() -> None:
    from ablations.cli.ablate import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    rows = re.findall(r"^\| `ablate (\w+)[^`]*` \|", README.read_text(), re.MULTILINE)
    assert sorted(rows) == sorted(commands.choices), "README's command table and `ablate --help`"


def test_the_readme_set_up_commands_are_make_targets() -> None:
    text = README.read_text()
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    for command in ("make demo", "make test"):
        assert f"\n{command}    # " in text, f"README's Set up lost `{command}`"
        assert command.split()[1] in targets


def test_every_link_of_the_readme_resolves() -> None:
    links = [link for link in _LINK.findall(README.read_text()) if "://" not in link]
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"README.md links to {path}, which does not exist"
        if anchor:
            assert anchor in _anchors(target), f"README.md links to {link}: no such heading"


def test_every_page_of_docs_is_reached_from_the_readme() -> None:
    linked = {link.partition("#")[0] for link in _LINK.findall(README.read_text())}
    pages = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, f"not linked from README.md: {sorted(pages - linked)}"


# --- The pages: what the code defines, named where a user looks for it ----------------------


def test_the_output_folder_page_names_every_file_of_the_folder() -> None:
    from ablations.files.names import LEDGER_LOCK, TOP_LEVEL

    page = (ROOT / "docs" / "output-folder.md").read_text()
    missing = sorted(name for name in TOP_LEVEL if name not in page)
    assert missing == [], f"docs/output-folder.md does not name {missing}"
    assert LEDGER_LOCK in page


def test_the_bench_commands_the_pages_give_exist_with_their_flags() -> None:
    """Every `bench/...` command quoted on a page names a script that exists and flags that
    script defines, so a figure's command can be run again as written."""
    quoted = []
    for page in (ROOT / "docs").glob("*.md"):
        quoted += re.findall(r"`([^`]*(?<![\w/])bench/[\w.-]+[^`]*)`", page.read_text())
    assert len(quoted) >= 15
    for command in quoted:
        for script, flags in re.findall(r"(?<![\w/])bench/([\w.-]+)((?:\s+[^\s`&;]+)*)", command):
            source = ROOT / "bench" / script
            assert source.is_file(), f"{command}: no bench/{script}"
            if script.endswith(".py"):
                text = source.read_text()
                for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", flags):
                    assert f'"{flag}"' in text, f"{command}: bench/{script} has no {flag}"


def test_the_sizing_line_the_page_quotes_is_what_ablate_plan_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/seeds-and-looks.md quotes the demo's power line: a change to sizing shows here."""
    from ablations.cli.ablate import main

    assert main(["plan", str(DEMO_PLAN)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("power at 2x")]
    assert f"    {line}\n" in (ROOT / "docs" / "seeds-and-looks.md").read_text()


def test_the_work_pool_page_s_own_script_plan_is_valid(tmp_path: Path) -> None:
    """The plan docs/work-pools.md gives for a script of one's own (run on a pool by
    tests/flows/test_work_pool_own_code.py) is a plan `ablate run` admits."""
    from ablations.plan.io import load_plan

    page = (ROOT / "docs" / "work-pools.md").read_text()
    section = page.split("## Your own script on a pool", 1)[1]
    (tmp_path / "plan.yaml").write_text(section.split("```yaml", 1)[1].split("```", 1)[0])
    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.workload.command is not None and plan.checkpoint.store.startswith("s3://")
    assert plan.stop_rules.restart.enabled  # the default the pool once could not pass
