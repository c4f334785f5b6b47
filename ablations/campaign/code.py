"""The user's code as part of the record: what a campaign's runs trained with, hashed.

    code = workload_code(plan)      # None for a built-in workload (the package's version says it)
    code.sha256, code.paths         # into registration.json and manifest.json

A plan's hash says what was asked; this says what answered it. Editing the training script
keeps the plan's hash, so a rerun into the same folder would mix two versions of the code:
the registration keeps this hash, and a rerun whose code hashes otherwise is refused once any
run has trained (`ablations.campaign.state`).

What is hashed: the plan's `workload.code` (files and folders, relative to the folder `ablate
run` starts in), else by default the folder of the command's script (`python -m pkg.mod`: the
module's package) or the package of each module the workload names (a Lightning module, a
`make_trainer`, a workload class), leaving out whatever lives inside the installed `ablations`
package (a built-in workload, a recipe: the manifest's package version and commit cover it).
A folder is walked without `.git`, hidden entries, `__pycache__`, virtual environments,
trackers' folders (`wandb`, `mlruns`, `lightning_logs`) and ablate's output folders. The
default takes only the code in it: source files (by extension, `SOURCE_SUFFIXES`, or a `#!`
line), the command's own script, and the files git tracks there; never what a run writes
beside its script (a `train_log.txt`, a tracker's JSON), so a run killed and resumed is not
refused for its own output. It also leaves out files over 1 MiB and binary files, and gives
up (an `InputError` saying so) past 2000 files or 64 MiB: name the code in `workload.code`
then (a config file git does not track, say). The hash covers each file's path (relative to
its folder, under the folder's name) and content, so a moved checkout hashes the same; each
file's own digest is kept too, so a refusal names the files changed, added and removed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ablations.errors import InputError
from ablations.files.names import MANIFEST, REGISTRATION
from ablations.plan.model import Plan

MAX_FILES = 2000
"""Files a code hash may cover: more is a data folder or a whole checkout, not the code."""
MAX_BYTES = 64 * 2**20
"""Bytes a code hash may read (a second or so of hashing)."""
MAX_FILE_BYTES = 2**20
"""A default folder's file above this is data or weights, not code: left out."""
SKIPPED_FOLDERS = frozenset(
    {"__pycache__", "node_modules", "site-packages", "wandb", "mlruns", "lightning_logs"}
)
"""Folders never hashed (besides hidden ones, virtual environments and output folders): caches,
installed packages, and what trackers write beside a script while it trains."""
_SOURCE = (
    ".py .pyi .pyx .pxd .ipynb .js .mjs .cjs .ts .jsx .tsx .sh .bash .zsh .awk .sed .r .jl .lua "
    ".rb .pl .pm .php .go .rs .c .cc .cpp .cxx .h .hh .hpp .cu .cuh .java .kt .scala .swift .m "
    ".f .f90 .zig .ml .hs .ex .exs .clj .cs .mojo"
)
SOURCE_SUFFIXES = frozenset(_SOURCE.split())
"""What the default counts as code, whatever git knows (compared lowercase)."""
DIGEST_CHARS = 16
"""Of each file's sha256 kept beside the whole hash: enough to tell which file changed."""

Rule = Literal["source", "text"]
"""How a default folder is read: its source files (this release), or every small text file
(the rule of earlier releases, which their registrations were hashed by)."""


class WorkloadCode(BaseModel):
    """The user's code a campaign's runs trained with."""

    model_config = ConfigDict(frozen=True)

    sha256: str
    """Of every hashed file's path and content (see `ablations.campaign.code`)."""
    paths: list[str]
    """The files and folders hashed, as the plan names them or as found (relative to the
    folder `ablate run` started in when inside it)."""
    files: int
    """Files hashed."""
    bytes: int
    """Their total size."""
    declared: bool
    """Whether the plan's `workload.code` named them (else the default was taken)."""
    digests: dict[str, str] = {}
    """Each file hashed (its name as hashed, under its folder's name) -> the first
    `DIGEST_CHARS` hex digits of its sha256; empty in a registration of an earlier release."""

    def line(self) -> str:
        """`train/ (3 files, sha256 0123456789ab)`, for a summary line."""
        shown = ", ".join(self.paths)
        return f"{shown} ({self.files} files, sha256 {self.sha256[:12]})"


def changes(before: WorkloadCode, now: WorkloadCode | None, *, shown: int = 5) -> str:
    """What differs between two hashes of the code, by file: `changed proj/train.py; added
    proj/util.py; removed proj/old.py` (at most `shown` names each); "" when unknown."""
    if not before.digests:
        return ""
    after = now.digests if now is not None else {}
    found = {
        "changed": [n for n in after if n in before.digests and after[n] != before.digests[n]],
        "added": [n for n in after if n not in before.digests],
        "removed": [n for n in before.digests if n not in after],
    }
    parts = []
    for kind, names in found.items():
        if names:
            more = f" and {len(names) - shown} more" if len(names) > shown else ""
            parts.append(f"{kind} {', '.join(names[:shown])}{more}")
    return "; ".join(parts)


def workload_code(
    plan: Plan, cwd: Path | None = None, rule: Rule = "source"
) -> WorkloadCode | None:
    """The code `plan`'s runs train with, hashed; None when it is all the installed package's
    (a built-in workload) or no file of it is found (a program on the PATH). `rule` reads a
    default folder (`text`: as earlier releases did, to compare with their registrations)."""
    cwd = (cwd or Path.cwd()).resolve()
    declared = plan.workload.code
    if declared is not None:
        roots = []
        for i, given in enumerate(declared):
            path = (cwd / given).resolve()
            if not path.exists():
                raise InputError(f"workload.code[{i}]: no such file or folder: {path}")
            roots.append(path)
        label = f"workload.code {declared}"
    else:
        roots = default_roots(plan, cwd)
        label = f"the default workload.code ({', '.join(map(str, roots))})"
    roots = _outermost(roots)
    if not roots:
        return None
    script = _command_script(plan.workload.command, cwd) if plan.workload.command else None
    digest, digests, size = _hash(
        roots, default=None if declared is not None else (rule, script), label=label
    )
    return WorkloadCode(
        sha256=digest,
        paths=[_shown(root, cwd) for root in roots],
        files=len(digests),
        bytes=size,
        declared=declared is not None,
        digests=digests,
    )


def code_line(plan: Plan, cwd: Path | None = None) -> str:
    """What a campaign of `plan` records of its code, in a few words."""
    code = workload_code(plan, cwd)
    if code is not None:
        return code.line()
    command = plan.workload.command
    if command is not None and not any(
        (cwd or Path.cwd()).joinpath(argument).is_file() for argument in command[1:]
    ):
        return "no file of the command found: name it in workload.code to record it"
    return "the installed ablate package's (its version and commit are recorded)"


def unhashed_imports(plan: Plan, cwd: Path | None = None) -> list[str]:
    """Modules the hashed Python files import from outside the hashed code, an installed
    library's and the standard library's aside (a helper in a sibling checkout, on
    PYTHONPATH or installed editable): an edit to one would not change the code's hash.
    As `module (path)`; none for a built-in workload."""
    import ast
    import sys
    import sysconfig

    cwd = (cwd or Path.cwd()).resolve()
    declared = plan.workload.code
    roots = _outermost(
        [(cwd / given).resolve() for given in declared]
        if declared is not None
        else default_roots(plan, cwd)
    )
    if not roots:
        return []
    installed = {Path(p).resolve() for p in sysconfig.get_paths().values() if p}
    installed |= {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    imported: set[str] = set()
    for root in roots:
        for path, _ in _files(root, None):
            if path.suffix != ".py" or path.stat().st_size > MAX_FILE_BYTES:
                continue
            try:
                tree = ast.parse(path.read_bytes(), str(path))
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    imported.add(node.module.split(".")[0])
    found = []
    ours = {"ablations", "ablate_report"}  # the package's own: its version records them
    for name in sorted(imported - set(sys.stdlib_module_names) - ours):
        origin = _module_root(name)
        if origin is None or any(r == origin or r in origin.parents for r in roots):
            continue
        if any(p == origin or p in origin.parents for p in installed):
            continue  # an installed library: its version, not its files, is what matters
        found.append(f"{name} ({_shown(origin, cwd)})")
    return found


def default_roots(plan: Plan, cwd: Path) -> list[Path]:
    """The command's script's folder, or the package folder of each user module named."""
    workload = plan.workload
    if workload.command is not None:
        found = _command_root(workload.command, cwd)
        return [found] if found is not None else []
    roots = [_module_root(entry.partition(":")[0]) for _, entry in workload.named_imports]
    return [root for root in roots if root is not None]


def _command_root(command: list[str], cwd: Path) -> Path | None:
    """The folder of the command's script (`_command_script`), or the package of `-m module`."""
    arguments = _arguments(command)
    for i, argument in enumerate(arguments):
        if argument == "-m" and i + 1 < len(arguments):
            return _module_root(arguments[i + 1], cwd)
    script = _command_script(command, cwd)
    if script is None:
        return None
    return None if _ours(script.parent) else script.parent


def _arguments(command: list[str]) -> list[str]:
    """The command's arguments after a Python interpreter (which is no script of the user's)."""
    return command[1:] if Path(command[0]).name.startswith("python") else list(command)


def _command_script(command: list[str], cwd: Path) -> Path | None:
    """The command's script: the first argument naming an existing file (after a Python
    interpreter; before a `-m`)."""
    for argument in _arguments(command):
        if argument == "-m":
            return None
        if "{" in argument or argument.startswith("-"):
            continue
        path = cwd / argument
        if path.is_file():
            return path.resolve()
    return None


def _module_root(module: str, cwd: Path | None = None) -> Path | None:
    """The folder of `module`'s top-level package (the module's own folder when it is in
    none); None inside the installed `ablations` package, or when it cannot be found."""
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
        if spec is None and cwd is not None:  # `python -m` from the folder ablate starts in
            return cwd / top if (cwd / top).is_dir() else None
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package: its folder
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
    elif spec.origin and os.path.isfile(spec.origin):
        root = Path(spec.origin).resolve().parent
    else:
        return None  # a built-in or frozen module
    return None if _ours(root) else root


def _ours(folder: Path) -> bool:
    """Whether `folder` is inside the installed `ablations` package (a recipe, a built-in
    workload): the package's version and commit record it."""
    ours = Path(__file__).resolve().parents[1]
    return folder == ours or ours in folder.parents


def _outermost(roots: list[Path]) -> list[Path]:
    """The roots, each once, none inside another (in their first order)."""
    unique = list(dict.fromkeys(roots))
    return [r for r in unique if not any(o != r and o in r.parents for o in unique)]


def _shown(path: Path, cwd: Path) -> str:
    try:
        return path.relative_to(cwd).as_posix() or "."
    except ValueError:
        return str(path)


def _hash(
    roots: list[Path], *, default: tuple[Rule, Path | None] | None, label: str
) -> tuple[str, dict[str, str], int]:
    """sha256 over every file's `root name/relative path` and content; each file's digest by
    its name; bytes. `default`: the rule reading a default folder and the command's script
    (None: the plan named the code, every file is hashed)."""
    sha, size = hashlib.sha256(), 0
    digests: dict[str, str] = {}
    for root in roots:
        selected = _default_selection(root, *default) if default is not None else None
        for path, name in _files(root, selected):
            size += path.stat().st_size
            if len(digests) >= MAX_FILES or size > MAX_BYTES:
                raise InputError(
                    f"{label} holds more than {MAX_FILES} files or {MAX_BYTES // 2**20} MiB: "
                    "name your code's files and folders in workload.code (e.g. [train.py, "
                    "mypkg]) so that its hash is the code's, not a data folder's"
                )
            content = hashlib.sha256(path.read_bytes()).digest()
            sha.update(f"{name}\0".encode())
            sha.update(content)
            digests[name] = content.hex()[:DIGEST_CHARS]
    return sha.hexdigest(), digests, size


def _files(root: Path, selected: Callable[[Path], bool] | None) -> Iterator[tuple[Path, str]]:
    """(file, name hashed) under `root`, in a fixed order; a file root is itself. `selected`
    picks a default folder's files (None: all)."""
    if root.is_file():
        yield root, root.name
        return
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(d for d in subfolders if not _skipped_folder(here / d))
        for name in sorted(names):
            path = here / name
            if name.startswith(".") or name.endswith((".pyc", ".pyo")) or not path.is_file():
                continue
            if selected is not None and not selected(path):
                continue
            yield path, f"{root.name}/{path.relative_to(root).as_posix()}"


def _default_selection(root: Path, rule: Rule, script: Path | None) -> Callable[[Path], bool]:
    """Which files of a default folder are the code: small text files that are source (by
    extension or a `#!` line), the command's script, or tracked by git (`rule="source"`);
    every small text file (`rule="text"`, earlier releases)."""
    if rule == "text":
        return _looks_like_code
    tracked = _git_tracked(root)

    def selected(path: Path) -> bool:
        if not _looks_like_code(path):
            return False
        return path == script or path in tracked or _is_source(path)

    return selected


def _git_tracked(root: Path) -> frozenset[Path]:
    """The files under `root` that git tracks (none outside a work tree, or without git)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"],
            capture_output=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    names = listed.decode(errors="surrogateescape").split("\0")
    return frozenset((root / name).resolve() for name in names if name)


def _is_source(path: Path) -> bool:
    """Code by its extension, or a script by its `#!` line."""
    if path.suffix.lower() in SOURCE_SUFFIXES:
        return True
    with path.open("rb") as handle:
        return handle.read(2) == b"#!"


def _skipped_folder(folder: Path) -> bool:
    """A folder never part of the code: hidden, caches, a virtual environment, an output
    folder of ablate (its registration or manifest inside)."""
    name = folder.name
    if name.startswith(".") or name in SKIPPED_FOLDERS:
        return True
    return any((folder / marker).exists() for marker in ("pyvenv.cfg", REGISTRATION, MANIFEST))


def _looks_like_code(path: Path) -> bool:
    """Small and text: a default folder's data files and weights are not the code."""
    if path.stat().st_size > MAX_FILE_BYTES:
        return False
    with path.open("rb") as handle:
        return b"\0" not in handle.read(8192)
