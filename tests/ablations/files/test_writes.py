"""No module of `ablations/` writes a file but through the output folder's atomic writer,
unless it is named below with the reason.

The source is read (its syntax tree, not its text) for every call that can create or change a
file: `write_text`/`write_bytes` (except a `CampaignFolder`'s, the receiver named `folder`,
which is the writer), `savefig`, an `open` in a writing mode, an `os.open` that may create or
write (its flags read through a name assigned in the module), a rename, `torch.save`,
`shutil`'s copies, `mkstemp`, fsspec's `pipe_file`, a DataFrame's `to_csv(path)`, `touch`, a
link; not one into a buffer in memory (a figure, a tensor, an archive drawn into a `BytesIO`
for the writer). A new one fails the test until it goes through `ablations/files/atomic.py`
or is added here with why it does not (a file outside the output folder, a log appended to,
a lock).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from tests.conftest import ROOT

ALLOWED: list[tuple[str, str, str]] = [
    ("files/atomic.py", "os.open", "the writer itself: its temporary, O_EXCL, FILE_MODE"),
    ("files/atomic.py", "open(wb)", "the writer itself: the temporary's handle"),
    ("files/atomic.py", "rename", "the writer itself: the temporary into place"),
    ("files/atomic.py", "os.open", "atomic_write_below: the same, inside a folder opened without"),
    ("files/atomic.py", "open(wb)", "following a link below the root (O_NOFOLLOW on each part),"),
    ("files/atomic.py", "rename", "renamed relative to that folder's descriptor"),
    ("byo/helper/ablate_report.py", "os.open", "the helper's own copy of the writer: it runs "),
    ("byo/helper/ablate_report.py", "open(wb)", "bare in the user's script, importing nothing"),
    ("byo/helper/ablate_report.py", "rename", "of ablate (a test checks it)"),
    ("checkpoint/store.py", "pipe_file", "a remote store's whole object (a local one: the writer)"),
    ("results/ledger.py", "os.open", "ledger.db created empty in FILE_MODE; SQLite writes it"),
    ("campaign/lock.py", "os.open", "the folder's .lock (FILE_MODE), a lock, not a record"),
    ("process/scratch.py", "os.open", "a scratch folder's .owner lock, outside the folder"),
    ("process/scratch.py", "os.open", "the same lock opened again to test it"),
    ("process/scratch.py", "rename", "the lock, locked under another name, named .owner"),
    ("slots/locks.py", "os.open", "the slot locks (campaigns', pool hosts'), outside the folder"),
    ("training/memory.py", "os.open", "/proc's clear_refs (the memory peak), not a file"),
    ("byo/probe.py", "write_bytes", "/proc's clear_refs (the memory peak), not a file"),
    ("verify/reload.py", "shutil.copyfile", "the ledger copied into a scratch folder to read"),
    ("recipes/command/train.py", "torch.save", "a user's script: its own checkpoint folder"),
    ("cli/ablate.py", "os.open", "/dev/null over stdout once its reader closed the pipe"),
]
"""(module under ablations/, kind of write, why it does not go through the atomic writer):
one row per call."""

_NAMED = {
    "write_text", "write_bytes", "savefig", "pipe_file", "mkstemp", "NamedTemporaryFile",
    "to_parquet", "touch", "symlink_to", "hardlink_to",
}  # fmt: skip
_SHUTIL = {"copy", "copy2", "copyfile", "copytree", "move"}
_WRITING_FLAGS = ("O_CREAT", "O_WRONLY", "O_RDWR", "O_APPEND", "O_TRUNC")


def _assigned(tree: ast.Module) -> dict[str, str]:
    """Each name assigned in the module -> its value's source (flags kept in a variable)."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = found.get(target.id, "") + ast.unparse(node.value)
    return found


def _mode(call: ast.Call) -> str | None:
    """An `open`'s mode: its `mode=`, or a positional string that reads as one (the second
    argument of `open(path, "w")`, the first of `Path.open("w")`)."""
    for keyword in call.keywords:
        if keyword.arg == "mode" and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    for arg in call.args:
        if isinstance(arg, ast.Constant) and re.fullmatch(r"[rwxabt+]+", str(arg.value)):
            return str(arg.value)
    return None


def _into_memory(call: ast.Call, names: dict[str, str]) -> bool:
    """Whether the call's target is a buffer in memory: a name the module assigns a
    `BytesIO()` or `StringIO()`."""
    values = [*call.args, *(keyword.value for keyword in call.keywords)]
    return any(
        isinstance(v, ast.Name) and re.search(r"\b(BytesIO|StringIO)\(", names.get(v.id, ""))
        for v in values
    )


def write_kind(call: ast.Call, names: dict[str, str]) -> str | None:
    """The kind of file write `call` is, None when it writes no file."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    receiver = getattr(func.value, "id", None) if isinstance(func, ast.Attribute) else None
    if name in ("write_text", "write_bytes") and receiver == "folder":
        return None  # CampaignFolder's: the atomic writer, inside the folder's guard
    if _into_memory(call, names):
        return None  # a figure, a tensor, an archive into a BytesIO: bytes for the writer
    if name in _NAMED:
        return str(name)
    if name in _SHUTIL and receiver == "shutil":
        return f"shutil.{name}"
    if name in ("symlink", "link") and receiver == "os":
        return f"os.{name}"
    method = isinstance(func, ast.Attribute) and len(call.args) == 1 and not call.keywords
    if name in ("replace", "rename") and (receiver == "os" or method):
        return "rename"  # str.replace takes two arguments, Path.replace one (dataclasses' is
        # a function)
    if name == "save" and receiver == "torch":
        return "torch.save"
    if name in ("to_csv", "to_json") and call.args:
        return str(name)
    if name == "open" and receiver == "os" and len(call.args) > 1:
        flags = call.args[1]
        words = [
            ast.unparse(flags),
            *(names.get(n.id, "") for n in ast.walk(flags) if isinstance(n, ast.Name)),
        ]
        return "os.open" if any(flag in " ".join(words) for flag in _WRITING_FLAGS) else None
    if name in ("open", "fdopen"):
        mode = _mode(call)
        return f"open({mode})" if mode is not None and set(mode) & set("wax+") else None
    return None


def writes(root: Path) -> Counter[tuple[str, str]]:
    """(module relative to `root`, kind) -> how many calls, over every module under `root`."""
    found: Counter[tuple[str, str]] = Counter()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = _assigned(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (kind := write_kind(node, names)) is not None:
                found[(path.relative_to(root).as_posix(), kind)] += 1
    return found


def test_every_write_goes_through_the_atomic_writer_or_is_named_with_why() -> None:
    allowed = Counter((module, kind) for module, kind, _ in ALLOWED)
    assert writes(ROOT / "ablations") == allowed


def test_the_scan_sees_each_kind_of_write(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "import io, os, shutil, torch\n"
        "FLAGS = os.O_WRONLY | os.O_CREAT\n"
        "def f(path, folder, figure, frame):\n"
        "    path.write_text('x')\n"
        "    folder.write_text('REPORT.md', 'x')\n"  # the folder's writer: not counted
        "    figure.savefig(path)\n"
        "    png = io.BytesIO()\n"
        "    figure.savefig(png)\n"  # into memory: not counted
        "    open(path, 'a').write('x')\n"
        "    with path.open(mode='wb') as handle: pass\n"
        "    with path.open('w') as handle: pass\n"
        "    open(path).read()\n"  # a read: not counted
        "    os.open(path, FLAGS, 0o600)\n"
        "    os.open(path, os.O_RDONLY)\n"  # a read: not counted
        "    os.replace(path, path)\n"
        "    'a-b'.replace('-', '_')\n"  # a string's: not counted
        "    torch.save({}, path)\n"
        "    shutil.copyfile(path, path)\n"
        "    frame.to_csv(path)\n"
        "    frame.to_csv(index=False)\n"  # into a string: not counted
    )
    assert writes(tmp_path) == Counter(
        {
            ("m.py", kind): 1
            for kind in (
                "write_text",
                "savefig",
                "open(a)",
                "open(wb)",
                "open(w)",
                "os.open",
                "rename",
                "torch.save",
                "shutil.copyfile",
                "to_csv",
            )
        }
    )
