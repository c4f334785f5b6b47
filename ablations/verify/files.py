"""File-level checks of `ablate verify`: present, non-empty, the recorded sha256, and it parses.

Each check returns the problems it found as `FolderProblem(file, message)`; nothing raises for a
damaged file. Loading never executes a pickle (`torch.load(weights_only=True)`).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from ablations.campaign.manifest import FileEntry
from ablations.files.names import MANIFEST
from ablations.security.credentials import find_credentials, secret_values

SCAN_LIMIT_BYTES = 256 << 20
"""Files above this are hashed but not scanned for credentials (weights of a large model)."""
COLUMNS = {
    "steps": ["step", "loss"],
    "evals": ["step"],
    "predictions": ["input_id", "label", "predicted"],
    "runs": ["run_id", "status"],
}
"""Columns each kind of CSV must have."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TERMINAL_CODES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
"""ANSI escape sequences (colours, bold) that a message must not carry to the terminal."""


@dataclass(frozen=True)
class FolderProblem:
    """One thing wrong with the folder: the file it is about, and what is wrong."""

    file: str
    message: str

    def __str__(self) -> str:
        # A library's message may carry terminal codes (torch's unpickling error is bold) or
        # lines of its own (SQLAlchemy's adds the SQL and a link): one plain line per problem,
        # whatever the terminal or the file it goes to.
        line = TERMINAL_CODES.sub("", f"{self.file}: {self.message}")
        return " ".join(part.strip() for part in line.splitlines() if part.strip())


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()


def check_entry(
    out_dir: Path, entry: FileEntry | dict[str, Any], owner: str
) -> list[FolderProblem]:
    """One manifest file entry {kind, path, sha256, bytes}: present, intact, and it loads."""
    if not isinstance(entry, FileEntry):
        try:
            entry = FileEntry.model_validate(entry)
        except ValidationError:
            return [FolderProblem(MANIFEST, f"{owner}: malformed file entry {entry!r}")]
    relative, kind = entry.path, entry.kind
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts or not relative:
        return [FolderProblem(MANIFEST, f"{owner}: {relative!r} is not a path inside the folder")]
    path = out_dir / relative
    if not path.is_file():
        return [FolderProblem(relative, f"missing ({kind} of {owner})")]
    size = path.stat().st_size
    if size == 0:
        return [FolderProblem(relative, f"is empty ({kind} of {owner})")]
    if entry.sha256 is None:
        return [FolderProblem(relative, "was missing when manifest.json was written")]
    if entry.bytes is not None and size != entry.bytes:
        return [FolderProblem(relative, f"has {size} bytes, manifest.json says {entry.bytes}")]
    if _digest(path) != entry.sha256:
        return [FolderProblem(relative, "sha256 differs from manifest.json (changed or corrupt)")]
    reason = load_problem(path, kind)
    return [FolderProblem(relative, reason)] if reason else []


def load_problem(path: Path, kind: str) -> str | None:
    """Why the file does not parse or load as its kind, or None when it does."""
    try:
        suffix = path.suffix
        if suffix == ".csv":
            return _csv_problem(path, kind)
        if suffix == ".pt":
            return _weights_problem(path)
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if kind == "record":
                from ablations.run.records import RunRecord

                RunRecord.model_validate(data)
            return None
        if suffix in (".yaml", ".yml"):
            # the plan's own reader (libyaml's parser, as validate and run read it): PyYAML's
            # pure-Python one refuses some flow mappings libyaml takes (`{q: Why?}`)
            from ablations.plan.io import parse_yaml

            parse_yaml(path.read_text(encoding="utf-8"), path.name)
            return None
        if suffix == ".png":
            return _png_problem(path)
        if suffix == ".html":
            from ablations.verify.report_html import html_problem

            return html_problem(path.read_text(encoding="utf-8"))
        path.read_text(encoding="utf-8")  # markdown and other text: must decode
        return None
    except Exception as exc:  # any failure to load is exactly what verify reports
        return f"does not load as {kind}: {type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [repr(exc)])[0][:300]


def _csv_problem(path: Path, kind: str) -> str | None:
    import pandas as pd

    frame = pd.read_csv(path)
    missing = [c for c in COLUMNS.get(kind, []) if c not in frame.columns]
    if missing:
        return f"has no column(s) {missing} (columns: {list(frame.columns)})"
    return None


def load_weights(path: Path) -> dict[str, Any]:
    """A `state_dict` file read without executing any pickle."""
    import torch

    weights = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=True)
    if not isinstance(weights, dict) or not all(
        isinstance(v, torch.Tensor) for v in weights.values()
    ):
        raise TypeError(f"holds a {type(weights).__name__}, not a state_dict of tensors")
    return weights


def _weights_problem(path: Path) -> str | None:
    load_weights(path)
    return None


def _png_problem(path: Path) -> str | None:
    with path.open("rb") as handle:
        if handle.read(len(PNG_SIGNATURE)) != PNG_SIGNATURE:
            return "is not a PNG image (bad signature)"
    from PIL import Image

    with Image.open(path) as image:
        image.verify()
    return None


def folder_files(out_dir: Path) -> Iterator[Path]:
    """Every file in the folder, sorted."""
    return iter(sorted(p for p in out_dir.rglob("*") if p.is_file()))


def scan_credentials(out_dir: Path) -> list[FolderProblem]:
    """Files that hold a credential: a secret-named variable's value, user:password@, a key id."""
    secrets = secret_values()
    problems = []
    for path in folder_files(out_dir):
        if path.stat().st_size > SCAN_LIMIT_BYTES:
            continue
        for what in find_credentials(path.read_bytes(), secrets):
            problems.append(
                FolderProblem(str(path.relative_to(out_dir)), f"holds a credential: {what}")
            )
    return problems


def scan_leftovers(out_dir: Path) -> list[FolderProblem]:
    """Temporary files of interrupted atomic writes (`.<name>.<...>.tmp`)."""
    return [
        FolderProblem(
            str(p.relative_to(out_dir)), "is a leftover temporary file of an interrupted write"
        )
        for p in folder_files(out_dir)
        if p.name.startswith(".") and p.name.endswith((".tmp", ".part"))
    ]


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")


def scan_paths(manifest: dict[str, Any], folders: list[str]) -> list[FolderProblem]:
    """Manifest strings with an absolute path into the folder itself or a temporary directory.

    The folder must stay valid when moved or copied (its files are named relative to it),
    and nothing may point into a directory that `tempfile` made and will delete."""
    temporary = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/tmp[\w.-]{6,}")
    problems = []
    for where, text in _strings(manifest, ""):
        store_url = where.startswith("checkpoint_store")  # the plan's, as the user wrote it
        inside = any(
            folder and (f"{folder}/" in text or text.endswith(folder)) for folder in folders
        )
        if inside and not store_url:  # checkpoint URIs into the folder are relative to it
            problems.append(
                FolderProblem(MANIFEST, f"{where} holds an absolute path into the folder")
            )
        elif temporary.search(text):
            problems.append(
                FolderProblem(MANIFEST, f"{where} holds a path into a temporary directory")
            )
    return problems
