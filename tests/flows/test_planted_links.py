"""`ablate run` on a folder where a link was planted where the campaign writes: one line naming
it, exit 2, at once (before any server or worker starts), nothing written where it points."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ablations.campaign.opening import register
from tests.conftest import DEMO_PLAN


@pytest.mark.parametrize("planted", ["checkpoints/digits-demo", "ledger.db"])
def test_ablate_run_refuses_a_planted_link_in_one_line(tmp_path: Path, planted: str) -> None:
    out = tmp_path / "out"
    register(DEMO_PLAN.read_text(), out)
    outside = tmp_path / "outside"
    (out / planted).parent.mkdir(parents=True, exist_ok=True)
    (out / planted).symlink_to(outside)  # dangling: a write through it would create it
    done = subprocess.run(
        [sys.executable, "-m", "ablations.cli", "run", str(DEMO_PLAN), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {planted} in the output folder {out.resolve()} is a symbolic link: refused (a "
        "campaign writes only inside its folder; remove the link)\n"
    )
    assert not outside.exists() and not (out / "manifest.json").exists()
