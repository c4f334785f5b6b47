"""Pages kept at the repository's root, published as they are: ARCHITECTURE.md is the design
of record beside the code (`tests/test_documented_paths.py` checks the paths it names); the
site shows it as `architecture.md` without a copy that could drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT_PAGES = {"architecture.md": "ARCHITECTURE.md"}
"""Page in the site -> file at the repository's root."""


def on_files(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).parent
    for page, source in ROOT_PAGES.items():
        text = (root / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=text))
    return files
