"""The built-in text corpus: the same bytes on every machine, shipped with the package.

charlm and the LoRA recipe train on Python source as bytes. They used to read the host's own
standard library, so one plan trained on other bytes under another Python (and on Python 3.12
a 300 kB corpus had no held-out file at all). The corpus is now a fixed, versioned file in
this package (`data/python-lib-v1.tar.xz`, 362 kB): CPython 3.11.7's standard-library `.py`
sources in sorted path order up to 2,000,000 bytes (PSF License, `data/PYTHON-LICENSE.txt`;
built by `bench/build_corpus.py`). Nothing of the host is read.

Its sha256 is declared here (`CORPUS_SHA256`) and checked at every load: a damaged or altered
install is refused in one line rather than trained on. A selection (`load_corpus(cap)`: whole
files in order while the total fits `cap`) has a digest of its own (`Corpus.sha256`, over
names and bytes), which runs record as their `data_sha256` and a plan may register
(`workload.data_sha256`), so the data check refuses a run whose bytes differ.

The split is by file, fixed by the file's content digest (never a run's seed): about one file
in ten is held out, and identical copies always land on the same side.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import tarfile
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ablations.errors import DataError

CORPUS_FILE = "python-lib-v1.tar.xz"
"""The shipped archive (in `ablations/workloads/data/`); a new version gets a new name."""
CORPUS_SHA256 = "72e61f1346b9d1570c25b9134fcd8ff2f86aa546bf7ca48ac46062d62cc10a07"
"""sha256 of the archive's bytes: what this version of ablate declares it trains on."""
CORPUS_BYTES = 2_000_000
"""Default cap on a selection; the whole corpus (149 files, 1,992,725 bytes) fits in it."""
HELDOUT_EVERY = 10
"""A file is held out when the first byte of its content's sha256 is divisible by this."""


@dataclass(frozen=True)
class Corpus:
    """The selected files, split by file, and the digest of what was selected."""

    train: list[tuple[str, bytes]]
    heldout: list[tuple[str, bytes]]
    sha256: str


def is_heldout(data: bytes) -> bool:
    """Whether a file is on the held-out side: fixed by its content's digest, the same for
    every run, and identical copies (two equal `__init__.py`) always land on the same side."""
    return hashlib.sha256(data).digest()[0] % HELDOUT_EVERY == 0


def archive_bytes() -> bytes:
    """The shipped archive, refused unless its sha256 is the declared one."""
    blob = resources.files("ablations.workloads").joinpath(f"data/{CORPUS_FILE}").read_bytes()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != CORPUS_SHA256:
        raise DataError(
            f"the built-in corpus {CORPUS_FILE} has sha256 {digest}, not the {CORPUS_SHA256} "
            "this version of ablate declares: the installation is damaged or altered; reinstall it"
        )
    return blob


@cache
def corpus_files() -> tuple[tuple[str, bytes], ...]:
    """Every file of the corpus, in its (sorted) order."""
    files = []
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(archive_bytes())), mode="r:") as tar:
        for member in tar:
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None:
                files.append((member.name, extracted.read()))
    return tuple(files)


@cache
def load_corpus(cap: int = CORPUS_BYTES) -> Corpus:
    """Whole files in order while the total stays within `cap` bytes, split by file."""
    digest = hashlib.sha256()
    train: list[tuple[str, bytes]] = []
    heldout: list[tuple[str, bytes]] = []
    total = 0
    for name, data in corpus_files():
        if total + len(data) > cap:
            break
        total += len(data)
        digest.update(name.encode() + b"\0" + data + b"\0")
        (heldout if is_heldout(data) else train).append((name, data))
    if not train or not heldout:
        raise DataError(
            f"corpus_bytes={cap} selects {len(train)} training and {len(heldout)} held-out "
            f"files of the built-in corpus: raise corpus_bytes"
        )
    return Corpus(train=train, heldout=heldout, sha256=digest.hexdigest())
