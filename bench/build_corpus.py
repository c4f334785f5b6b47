"""Build the built-in text corpus shipped in `ablations/workloads/data/` (run once per version).

    python3.11 bench/build_corpus.py --stdlib /path/to/python3.11 --out ablations/workloads/data

Version 1 (`python-lib-v1.tar.xz`) is CPython 3.11.7's standard library `.py` sources (the
interpreter this project was developed on), in sorted path order, empty files and
`site-packages` left out, whole files while the total stays within 2,000,000 bytes: exactly what
charlm read from that interpreter before the corpus shipped, so the figures measured then hold.
The archive is a tar of those files (names relative to the library root, mtime 0, owner 0,
mode 0644, sorted) compressed with xz; its sha256 is declared in `ablations/workloads/corpus.py`
(`CORPUS_SHA256`) and checked at every load. A new version is a new file name and digest:
never rewrite a shipped one (a registered plan's `workload.data_sha256` names its bytes).

The licence of those sources (the PSF License) ships beside the archive.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import lzma
import os
import sys
import tarfile
from pathlib import Path

CAP = 2_000_000
NAME = "python-lib-v1.tar.xz"


def select(root: Path, cap: int) -> list[tuple[str, bytes]]:
    """The library's `.py` files in sorted order, non-empty, while the total fits `cap`."""
    names: list[str] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d != "site-packages"]  # installed, not shipped
        rel = Path(folder).relative_to(root)
        names += [(rel / f).as_posix() for f in files if f.endswith(".py")]
    chosen, total = [], 0
    for name in sorted(names):
        data = (root / name).read_bytes()
        if not data:
            continue
        if total + len(data) > cap:
            break
        total += len(data)
        chosen.append((name, data))
    return chosen


def archive(files: list[tuple[str, bytes]]) -> bytes:
    """A reproducible tar.xz of `files`: fixed metadata, the given order."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return lzma.compress(raw.getvalue(), preset=9 | lzma.PRESET_EXTREME)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdlib", type=Path, required=True, help="the library root (Lib/)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cap", type=int, default=CAP)
    args = parser.parse_args()
    files = select(args.stdlib, args.cap)
    blob = archive(files)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / NAME).write_bytes(blob)
    licence = args.stdlib / "LICENSE.txt"
    if licence.exists():
        (args.out / "PYTHON-LICENSE.txt").write_bytes(licence.read_bytes())
    total = sum(len(d) for _, d in files)
    print(
        f"{NAME}: {len(files)} files, {total} bytes, {len(blob)} bytes compressed, "
        f"sha256 {hashlib.sha256(blob).hexdigest()} (Python {sys.version.split()[0]} ran this)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
