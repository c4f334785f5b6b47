"""The plan reference, generated from `ablate schema` at every build, so it cannot drift.

`docs/plan.md` holds the page's own words and the marker `<!-- plan-reference -->`; at build
time MkDocs calls `on_page_markdown` (this file is a hook of `mkdocs.yml`), which runs
`ablate schema` (the JSON schema of the `Plan`, every field's docstring its description) and
puts a section per plan section in place of the marker: a table of its fields (type,
default, what it means), each sub-model with its own anchor, linked from where it is used.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

MARKER = "<!-- plan-reference -->"
_WORDS = {"integer": "integer", "number": "number", "string": "text", "boolean": "true/false"}
"""JSON schema's type names as a YAML writer reads them."""
PAGE = "plan.md"


def schema() -> dict[str, Any]:
    """What `ablate schema` prints, as this Python's `ablate` prints it."""
    done = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "schema"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return dict(json.loads(done.stdout))


def anchor(name: str) -> str:
    """The heading anchor of a model's section (headings carry an explicit id)."""
    return name.lower()


def _type(node: dict[str, Any]) -> str:
    """A field's type as a reader writes it in YAML, sub-models linked to their section."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{anchor(name)})"
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in node["enum"])
    for key in ("anyOf", "oneOf"):
        if key in node:
            kinds = [_type(option) for option in node[key]]
            return " \\| ".join(dict.fromkeys(kinds))
    kind = node.get("type")
    if kind == "array":
        return f"list of {_type(node.get('items', {}))}"
    if kind == "object":
        values = node.get("additionalProperties")
        return f"map of {_type(values)}" if isinstance(values, dict) and values else "map"
    return _WORDS.get(str(kind), str(kind or "any"))


def _default(field: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in field:
        return ""
    value = field["default"]
    if isinstance(value, dict | list) and len(json.dumps(value)) > 40:
        return "see the section" if isinstance(value, dict) else f"{len(value)} items"
    return f"`{json.dumps(value)}`"


def _cell(text: str) -> str:
    """Text for a table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _fields(model: dict[str, Any]) -> list[str]:
    required = set(model.get("required", []))
    lines = ["| Field | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
    for name, field in model.get("properties", {}).items():
        lines.append(
            f"| `{name}` | {_type(field)} | {_default(field, name in required)} | "
            f"{_cell(field.get('description', ''))} |"
        )
    return lines


def render(plan_schema: dict[str, Any]) -> str:
    """The reference: the plan's top-level sections, then each sub-model, in the order the
    plan first uses them."""
    definitions = plan_schema.get("$defs", {})
    order: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                name = ref.rsplit("/", 1)[-1]
                if name not in order and name in definitions:
                    order.append(name)
                    visit(definitions[name])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(plan_schema.get("properties", {}))
    order += sorted(set(definitions) - set(order))
    lines = [f"## {plan_schema.get('title', 'Plan')} {{#plan}}", ""]
    lines += [_cell(plan_schema.get("description", "")), ""]
    lines += _fields(plan_schema)
    for name in order:
        model = definitions[name]
        lines += ["", f"### {name} {{#{anchor(name)}}}", ""]
        if model.get("description"):
            lines += [_cell(model["description"]), ""]
        lines += _fields(model) if model.get("properties") else [f"Type: {_type(model)}"]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs' hook: the plan page's marker replaced by the generated reference."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/{PAGE} lost its marker {MARKER}: the reference has nowhere to go")
    return markdown.replace(MARKER, render(schema()))
