"""The documentation's generated plan reference: complete, linked, and from `ablate schema`.

`make docs` builds the site strictly (every link and anchor checked); these tests pin what the
build cannot see: that the reference names every field of every plan section, and that it
comes from what `ablate schema` prints, not from a copy.
"""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

from ablations.plan.model import Plan
from tests.conftest import ROOT


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
