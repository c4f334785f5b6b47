"""Reading a plan file: safe YAML, bounded size, and a check that the workload imports."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import yaml

from ablations.errors import PlanError, Problem
from ablations.plan import Plan, parse_plan

MAX_PLAN_BYTES = 1 << 20
"""A plan is a page of YAML; a megabyte is already absurd and keeps parsing instant."""
MAX_EXPANDED_NODES = 100_000
"""Nodes after alias expansion. A 'billion laughs' document is tiny on disk but expands
exponentially when validated, so it is refused before anything walks it."""


def read_plan_text(path: Path) -> str:
    """The plan file's text, refusing missing, unreadable, binary or oversized files."""
    source = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise PlanError(
            [Problem("", f"cannot read the plan file: {exc.strerror}", source)]
        ) from exc
    if size > MAX_PLAN_BYTES:
        raise PlanError(
            [Problem("", f"plan file is {size} bytes; the limit is {MAX_PLAN_BYTES}", None, False)],
            source,
        )
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError([Problem("", f"cannot read the plan file as UTF-8 text: {exc}")]) from exc


def parse_yaml(text: str, source: str | None = None) -> Any:
    """`yaml.safe_load` after refusing duplicate keys and alias bombs."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise PlanError([Problem("", f"not valid YAML: {exc}", show_value=False)], source) from exc
    if root is None:
        return None
    problems: list[Problem] = []
    sizes: dict[int, int] = {}
    if _expanded_size(root, sizes, problems, "") > MAX_EXPANDED_NODES:
        raise PlanError(
            [
                Problem(
                    "",
                    f"YAML aliases expand to more than {MAX_EXPANDED_NODES} nodes; "
                    "write the plan out plainly",
                    show_value=False,
                )
            ],
            source,
        )
    if problems:
        raise PlanError(problems, source)
    return yaml.safe_load(text)


def _expanded_size(
    node: yaml.Node, sizes: dict[int, int], problems: list[Problem], path: str
) -> int:
    """Node count with aliases expanded, memoized per node so the walk itself stays linear."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    sizes[key] = 1  # a recursive alias counts once instead of looping forever
    total = 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            child = f"{path}.{name}" if path else name
            if isinstance(key_node, yaml.ScalarNode) and name in seen:
                problems.append(Problem(child, "duplicate key", show_value=False))
            seen.add(name)
            total += _expanded_size(key_node, sizes, problems, child)
            total += _expanded_size(value_node, sizes, problems, child)
            if total > MAX_EXPANDED_NODES:
                break
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            total += _expanded_size(item, sizes, problems, f"{path}[{i}]")
            if total > MAX_EXPANDED_NODES:
                break
    sizes[key] = total
    return total


def workload_module_problem(entry: str) -> Problem | None:
    """Why the module of `module:attr` cannot be found (without importing it), or None."""
    module_name = entry.partition(":")[0]
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return Problem("workload.entry", f"module {module_name!r} cannot be found", entry)
    return None


def workload_import_problem(entry: str) -> Problem | None:
    """Why `module:attr` cannot be imported, or None when it can."""
    module_name, _, attr = entry.partition(":")
    missing = workload_module_problem(entry)
    if missing is not None:
        return missing
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's module can fail in any way; report it, do not crash
        return Problem(
            "workload.entry",
            f"importing {module_name!r} failed: {type(exc).__name__}: {exc}",
            entry,
        )
    if not hasattr(module, attr):
        return Problem("workload.entry", f"module {module_name!r} has no {attr!r}", entry)
    return None


def load_plan(path: str | Path, *, check_workload: bool = True) -> Plan:
    """Read, validate and (optionally) check that the plan's workload imports."""
    path = Path(path)
    source = str(path)
    plan = parse_plan(parse_yaml(read_plan_text(path), source), source)
    if check_workload:
        problem = workload_import_problem(plan.workload.entry)
        if problem is not None:
            raise PlanError([problem], source)
    return plan
