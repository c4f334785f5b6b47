"""The commits a campaign holds: each committed checkpoint's digest, kept in the output folder.

    DIR/commits/<run_id>.json      {"<step>": "<sha256 of that step's COMMIT.json>", ...}

A commit record verifies its objects, but whoever can write the store can write a commit
record too: a same-shape model swapped in with its COMMIT.json rehashed loads, and without
`ABLATE_SIGNING_KEY` nothing in the store tells it from the run's own. The campaign's folder
holds what the run committed: the run's worker adds each commit's digest here just before it
writes the commit record (a kill between the two leaves a digest of a step never committed,
which nothing resumes), and a resume takes a committed step only when its record is the one
held here (`CheckpointManager.resume_with`). A step the folder does not hold (committed by
someone else) is refused like a corrupt one: the run goes back to the newest step it holds,
or trains from the start.

Runs without a folder to write into (the restart check's short runs, a pool host's attempts,
which the signed store protects) hold nothing, and a run whose folder holds no file for it
(a folder from before this file existed) resumes as the store says, as before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ablations.files.atomic import atomic_write_below
from ablations.files.names import COMMITS

MAX_HELD_BYTES = 1 << 20
"""A run's file holds one short line per kept step; a larger one is not ours."""


def digest(record: bytes) -> str:
    """The digest the campaign holds for a commit: the sha256 of its COMMIT.json's bytes."""
    return hashlib.sha256(record).hexdigest()


class HeldCommits:
    """The digests one run's checkpoints were committed with, in `out_dir/commits/`."""

    def __init__(self, out_dir: str | Path, owner: str) -> None:
        self.root = Path(out_dir)
        self.name = f"{COMMITS}/{owner}.json"

    @property
    def path(self) -> Path:
        return self.root / self.name

    def held(self) -> dict[int, str] | None:
        """Step -> digest; None when the folder holds no file for the run (nothing to check
        against). A damaged file holds nothing: every step is then refused."""
        try:
            with self.path.open("rb") as handle:
                data = handle.read(MAX_HELD_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError:
            return {}
        try:
            parsed = json.loads(data) if len(data) <= MAX_HELD_BYTES else None
        except (ValueError, UnicodeDecodeError):
            return {}
        if not isinstance(parsed, dict):
            return {}
        return {int(k): v for k, v in parsed.items() if k.isdigit() and isinstance(v, str)}

    def add(self, step: int, sha256: str, *, keep_last: int) -> None:
        """Hold `step`'s digest, and those of the `keep_last` newest steps below it (the store
        keeps as many: older ones are pruned there too)."""
        held = {s: d for s, d in (self.held() or {}).items() if s < step}
        held = dict(sorted(held.items())[-max(1, keep_last) :])
        held[step] = sha256
        text = json.dumps({str(s): held[s] for s in sorted(held)}, indent=1)
        atomic_write_below(self.root, self.name, text.encode())
