"""Reading a plan file: safe YAML, bounded size, and a check that the workload imports."""

from __future__ import annotations

import importlib
import importlib.util
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from ablations.errors import PlanError, Problem
from ablations.plan.model import Plan, parse_plan
from ablations.plan.runs import require_caps
from ablations.plan.section import ParamLimits, outside_limits

MAX_PLAN_BYTES = 1 << 20
"""A plan is a page of YAML; a megabyte is already absurd and keeps parsing instant."""
MAX_EXPANDED_NODES = 1_000_000
"""Nodes after alias expansion. A 'billion laughs' document is tiny on disk but expands
exponentially when validated, so it is refused before anything walks it. Above what a
megabyte of plain YAML can hold (10^5 seeds are 10^5 nodes), so only aliases reach it."""
MAX_EXPANDED_CHARS = 4 * MAX_PLAN_BYTES
"""Characters of all scalars after alias expansion: a 100 KB string aliased 10^5 times is 10
GB once anything copies, prints or hashes it; a plain plan holds at most a megabyte."""
MAX_SCALAR_CHARS = 1 << 14
"""One scalar: a name, a number, a sentence or a paragraph; 16 KB is pages of prose."""
MAX_INT_DIGITS = 19
"""A whole number in a plan fits 64 bits (a seed, a count of steps); Python would build one of
any length, and past 4 300 digits refuse to print it."""


def read_plan_text(path: Path) -> str:
    """The plan file's text, refusing missing, unreadable, binary, oversized or special files.

    Only a regular file is opened (a FIFO would block the open, /dev/zero never ends), and
    never read past the cap, whatever its size claims."""
    source = str(path)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise PlanError(
                [Problem("", f"not a regular file ({_kind(info.st_mode)})", show_value=False)],
                source,
            )
        # O_NONBLOCK: if a FIFO replaced the file since the stat, the open still returns.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise PlanError([Problem("", "not a regular file", show_value=False)], source)
            data = handle.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise PlanError(
            [Problem("", f"cannot read the plan file: {exc.strerror}", source)]
        ) from exc
    if len(data) > MAX_PLAN_BYTES:
        raise PlanError(
            [Problem("", f"plan file exceeds the limit of {MAX_PLAN_BYTES} bytes", None, False)],
            source,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanError([Problem("", f"cannot read the plan file as UTF-8 text: {exc}")]) from exc


def plan_text_of(text: str, source: str) -> str:
    """A plan given as text (pasted into the UI's `plan_yaml`), under the same cap as a file:
    a pasted megabyte is refused before anything parses it."""
    if len(text) > MAX_PLAN_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_PLAN_BYTES:
        raise PlanError(
            [Problem("", f"the plan exceeds the limit of {MAX_PLAN_BYTES} bytes", None, False)],
            source,
        )
    return text


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


_INT = "tag:yaml.org,2002:int"
_IMPLICIT: dict[type[yaml.Node], str] = {
    yaml.SequenceNode: "tag:yaml.org,2002:seq",
    yaml.MappingNode: "tag:yaml.org,2002:map",
}


class _PlanLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (libyaml's parser when PyYAML has it: several times faster on a large
    plan) counting the nodes whose tag it resolved: any other node had an explicit tag."""

    implicit_nodes = 0

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        self.implicit_nodes += 1
        if (  # a plain decimal: int, as the resolver says, without its regexes (10^5 seeds)
            kind is yaml.ScalarNode
            and implicit[0]
            and value.isascii()
            and value.isdigit()
            and (value[0] != "0" or value == "0")
        ):
            return _INT
        tag: str = super().resolve(kind, value, implicit)
        return tag


def _explicit_tag(loader: _PlanLoader, node: yaml.Node) -> str | None:
    """The node's tag when the text gave it explicitly (`!!python/...`, `!!str 5`, `!x`):
    a plan is plain scalars, lists and mappings, and a tag is either an attack or a typo."""
    if isinstance(node, yaml.ScalarNode):
        plain = not node.style  # None in PyYAML, "" in libyaml
        implicit = loader.resolve(yaml.ScalarNode, node.value, (plain, not plain))
    else:
        implicit = _IMPLICIT[type(node)]
    return None if node.tag == implicit else str(node.tag)


def parse_yaml(text: str, source: str | None = None) -> Any:
    """Plain YAML data after refusing explicit tags, duplicate keys and alias bombs."""
    try:
        loader = _PlanLoader(text)
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise PlanError([Problem("", _yaml_error(exc), show_value=False)], source) from exc
    try:
        if root is None:
            return None
        problems: list[Problem] = []
        sizes: dict[int, tuple[int, int]] = {}
        nodes, chars = _expanded_size(None, root, sizes, problems, "")
        if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
            what = (
                f"more than {MAX_EXPANDED_NODES} nodes"
                if nodes > MAX_EXPANDED_NODES
                else f"more than {MAX_EXPANDED_CHARS} characters"
            )
            raise PlanError(
                [
                    Problem(
                        "",
                        f"YAML aliases expand to {what}; write the plan out plainly",
                        show_value=False,
                    )
                ],
                source,
            )
        if len(sizes) != loader.implicit_nodes:  # some tag was explicit: find where
            tagged: list[Problem] = []
            _expanded_size(loader, root, {}, tagged, "")
            problems += tagged or [  # a tag that restates the implicit one (`!!str x`)
                Problem(
                    "",
                    "explicit YAML tags (`!!str`...) are not allowed in a plan",
                    show_value=False,
                )
            ]
        if problems:
            raise PlanError(problems, source)
        try:  # the composed document is constructed as is: the text is parsed once
            return loader.construct_document(root)
        except yaml.YAMLError as exc:
            raise PlanError([Problem("", _yaml_error(exc), show_value=False)], source) from exc
    finally:
        loader.dispose()


def _yaml_error(exc: yaml.YAMLError) -> str:
    """What the parser found wrong and where, without the line it quotes: a file that is
    not a plan (a private note) must not be echoed back piece by piece."""
    problem = getattr(exc, "problem", None) or type(exc).__name__
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = problem if len(problem) <= 80 else f"{problem[:77]}..."
    return f"not valid YAML{where}: {problem}"


def plan_from_text(text: str, source: str | None = None) -> Plan:
    """The plan in a file's (or a pasted) text, within this process's caps: `PlanError`
    naming what is wrong (for a text that is no plan at all only its size, `parse_plan`;
    for a plan over a cap the count, found arithmetically: `require_caps`)."""
    plan = parse_plan(parse_yaml(text, source), source, size=len(text.encode("utf-8", "replace")))
    try:
        require_caps(plan)
    except PlanError as exc:
        raise PlanError(exc.problems, source) from None
    return plan


def _expanded_size(
    loader: _PlanLoader | None,
    node: yaml.Node,
    sizes: dict[int, tuple[int, int]],
    problems: list[Problem],
    path: str,
) -> tuple[int, int]:
    """(nodes, scalar characters) with aliases expanded, memoized per node so the walk itself
    stays linear. Without a loader, a key twice, a scalar too long and a number of too many
    digits are problems; with one, only explicit tags are (the second walk, when there are)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    sizes[key] = (1, 0)  # a recursive alias counts once instead of looping forever
    tag = None if loader is None else _explicit_tag(loader, node)
    if tag is not None:
        problems.append(
            Problem(path, f"explicit YAML tag {tag!r} is not allowed in a plan", show_value=False)
        )
        return 1, 0
    nodes, chars = 1, 0
    if isinstance(node, yaml.ScalarNode):
        chars = len(node.value)
        if loader is None:
            problems += _scalar_problems(node, path)
    elif isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
            child = f"{path}.{_cut(name)}" if path else _cut(name)
            if loader is None and isinstance(key_node, yaml.ScalarNode) and name in seen:
                problems.append(Problem(child, "duplicate key", show_value=False))
            seen.add(name)
            for part in (key_node, value_node):
                more, text = _expanded_size(loader, part, sizes, problems, child)
                nodes, chars = nodes + more, chars + text
            if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
                break
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            more, text = _expanded_size(loader, item, sizes, problems, f"{path}[{i}]")
            nodes, chars = nodes + more, chars + text
            if nodes > MAX_EXPANDED_NODES or chars > MAX_EXPANDED_CHARS:
                break
    sizes[key] = nodes, chars
    return nodes, chars


def _scalar_problems(node: yaml.ScalarNode, path: str) -> list[Problem]:
    """A scalar over `MAX_SCALAR_CHARS`, or a whole number over `MAX_INT_DIGITS` digits,
    named by its size (never quoted), before anything is built from it."""
    value: str = node.value
    if len(value) > MAX_SCALAR_CHARS:
        message = f"a value of {len(value)} characters: at most {MAX_SCALAR_CHARS}"
        return [Problem(path, message, show_value=False)]
    if node.tag == _INT:
        digits = sum(ch.isalnum() for ch in value.removeprefix("0x").removeprefix("0o"))
        if digits > MAX_INT_DIGITS:
            message = f"a whole number of {digits} digits: at most {MAX_INT_DIGITS}"
            return [Problem(path, message, show_value=False)]
    return []


def _cut(name: str) -> str:
    """A key as a path shows it: a long key is named by its start."""
    return name if len(name) <= 40 else f"{name[:37]}..."


WorkloadCheck = Literal["import", "find", "skip"]
"""How `load_plan` checks the modules a workload names."""


def workload_module_problem(entry: str, field: str = "workload.entry") -> Problem | None:
    """Why `module:attr` cannot be found (without importing it: the module's source is read),
    or None. `field` is the plan field that names it, for the message."""
    module_name, _, attr = entry.partition(":")
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return Problem(field, f"module {module_name!r} cannot be found", entry)
    defined = _source_names(found.origin)
    if defined is None:
        return None  # compiled, built in, or dynamic: only importing it can tell
    if isinstance(defined, SyntaxError):
        where = f" (line {defined.lineno})" if defined.lineno else ""
        return Problem(field, f"module {module_name!r} does not parse{where}: {defined.msg}", entry)
    if attr and attr not in defined:
        return Problem(field, f"module {module_name!r} has no {attr!r}", entry)
    missing = _missing_imports(found.origin)
    if missing:
        return Problem(
            field,
            f"module {module_name!r} imports {', '.join(map(repr, missing))}, which cannot be "
            "found here (not installed? an adapter's extra: pip install 'ablate[lightning]' or "
            "'ablate[hf]')",
            entry,
        )
    return None


def _missing_imports(origin: str | None) -> list[str]:
    """The top-level packages a source file imports unconditionally (at its top level, not
    inside `try` or `if`) that cannot be found: what importing it would fail on first."""
    import ast
    import sys

    if origin is None or not origin.endswith(".py"):
        return []
    try:
        tree = ast.parse(Path(origin).read_bytes(), origin)
    except (SyntaxError, OSError, ValueError):
        return []
    named: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            named += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named.append(node.module.split(".")[0])
    missing = []
    for name in dict.fromkeys(named):
        if name in sys.stdlib_module_names or name == "__future__":
            continue
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


def _source_names(origin: str | None) -> set[str] | SyntaxError | None:
    """The names a Python source file defines at its top level (in `if` and `try` blocks too),
    its syntax error, or None when that cannot be told without running it (no source; a
    module `__getattr__` or a star import)."""
    import ast

    if origin is None or not origin.endswith(".py"):
        return None
    try:
        tree = ast.parse(Path(origin).read_bytes(), origin)
    except SyntaxError as exc:
        return exc
    except (OSError, ValueError):
        return None
    names: set[str] = set()
    body = list(tree.body)
    while body:
        node = body.pop()
        if isinstance(node, ast.If | ast.Try | ast.With):
            body += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            body += [child for handler in getattr(node, "handlers", []) for child in handler.body]
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            names |= {(a.asname or a.name).partition(".")[0] for a in node.names}
    return None if "__getattr__" in names else names


def workload_import_problem(entry: str, field: str = "workload.entry") -> Problem | None:
    """Why `module:attr` cannot be imported, or None when it can."""
    module_name, _, attr = entry.partition(":")
    missing = workload_module_problem(entry, field)
    if missing is not None:
        return missing
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's module can fail in any way; report it, do not crash
        return Problem(
            field, f"importing {module_name!r} failed: {type(exc).__name__}: {exc}", entry
        )
    if not hasattr(module, attr):
        return Problem(field, f"module {module_name!r} has no {attr!r}", entry)
    return None


def workload_problems(
    named: Sequence[tuple[str, str]], *, import_them: bool = True
) -> list[Problem]:
    """Why each of a workload's `(field, module:attr)` imports fails (`named_imports`): every
    one is checked, an adapter's user modules included, so a typo is refused before a run
    starts. Without `import_them` only that each module can be found (nothing is imported)."""
    check = workload_import_problem if import_them else workload_module_problem
    return [p for field, entry in named if (p := check(entry, field)) is not None]


def param_limit_problems(plan: Plan, *, import_it: bool = True) -> list[Problem]:
    """The control's and each level's params outside the bounds the workload class declares
    (`PARAM_LIMITS`, `plan.section.ParamLimits`); none when it declares none. From the
    imported module (`import_it`: a pool campaign's admission, which imports it anyway), else
    read from its source where it is written as constants (validate, plan, a local run's
    admission: no torch; limits only running could tell are the workload's own check, before
    it allocates)."""
    module_name, _, attr = plan.workload.entry.partition(":")
    limits = None if import_it else _source_limits(module_name, attr)
    if limits is None and not import_it:
        return []
    if limits is None:
        try:
            module = importlib.import_module(module_name)
            limits = getattr(getattr(module, attr), "PARAM_LIMITS", {})
        except Exception:  # reported by workload_problems
            return []
    named = [
        *(
            (f"workload.params.{k}", k, v)
            for k, v in plan.workload.params.items()
            if k not in plan.control.params
        ),
        *((f"control.params.{k}", k, v) for k, v in plan.control.params.items()),
        *(
            (f"factors.{name}.levels[{i}].value", name, level.value)
            for name, factor in plan.factors.items()
            for i, level in enumerate(factor.levels)
        ),
    ]
    return [
        Problem(path, why, show_value=False)
        for path, name, value in named
        if (why := outside_limits(name, value, limits)) is not None
    ]


def _source_limits(module_name: str, attr: str) -> ParamLimits | None:
    """Class `attr`'s `PARAM_LIMITS` as its module's source writes it (numbers, tuples, a
    dict, `<<` and arithmetic, module-level constants), `{}` when it declares none, or None
    when only importing the module can tell (a base class, an expression, no source)."""
    import ast
    import operator

    try:
        spec = importlib.util.find_spec(module_name)
        origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(".py"):
            return None
        tree = ast.parse(Path(origin).read_bytes(), origin)
    except (ImportError, ValueError, SyntaxError, OSError):
        return None
    operators = {
        ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.FloorDiv: operator.floordiv,
    }  # fmt: skip
    constants: dict[str, object] = {}

    def value(node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name):
            return constants[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in operators:
            return operators[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Tuple):
            return tuple(value(item) for item in node.elts)
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if k is not None]  # None: a `**mapping`
            if len(keys) == len(node.keys):
                return {value(k): value(v) for k, v in zip(keys, node.values, strict=True)}
        raise ValueError(ast.dump(node))

    def assigned(node: ast.stmt) -> tuple[str, ast.expr] | None:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, expr = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, expr = node.target, node.value
        else:
            return None
        return (target.id, expr) if isinstance(target, ast.Name) else None

    found: ast.ClassDef | ast.FunctionDef | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == attr:
            found = node
        elif (named := assigned(node)) is not None:
            try:
                constants[named[0]] = value(named[1])
            except (ValueError, KeyError, TypeError, ArithmeticError):
                constants.pop(named[0], None)  # not a constant: a later use cannot be read
    if isinstance(found, ast.FunctionDef):
        return {}  # a function entry (an hf_trainer's) declares no limits
    if found is None or found.bases or found.decorator_list:
        return None
    for node in found.body:
        named = assigned(node)
        if named is not None and named[0] == "PARAM_LIMITS":
            try:
                limits = value(named[1])
            except (ValueError, KeyError, TypeError, ArithmeticError):
                return None
            return limits if isinstance(limits, dict) else None
    return {}


def load_plan(path: str | Path, *, workload: WorkloadCheck = "import") -> Plan:
    """Read and validate the plan, then check every module its workload names: `import`
    them (a pool campaign's admission: its hosts import them elsewhere), only `find` them and
    read their source for the name (validate, plan, budget, and a command whose slot workers
    import them anyway: this process stays free of torch and the user's libraries), or `skip`
    the check (a finished folder read on a machine without the workload)."""
    path = Path(path)
    source = str(path)
    plan = plan_from_text(read_plan_text(path), source)
    if workload != "skip":  # a plan to run (not a registered one read back)
        problems = plan.pilot_problems()
        problems += workload_problems(plan.workload.named_imports, import_them=workload == "import")
        if workload != "skip" and not problems:
            problems = param_limit_problems(plan, import_it=workload == "import")
        if problems:
            raise PlanError(problems, source)
    return plan
