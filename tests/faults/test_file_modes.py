"""Every file of a real campaign's output folder in one mode: what a plain `open()` gives under
the user's umask (0o666 less it), whoever wrote it (the atomic writer, the report's plots, the
checkpoint store inside the folder, SQLite's ledger, the lock, the logs), so a folder shared
with colleagues is readable as a whole or, under a private umask, not at all."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ablations.files.names import LEDGER, LOCK, LOGS, REPORT, REPORT_HTML
from tests.faults.conftest import Campaign, fault_plan
from tests.file_modes import modes, other_modes, umask

pytestmark = pytest.mark.slow


def test_every_file_and_folder_of_a_campaign_follows_the_umask(tmp_path: Path) -> None:
    campaign = Campaign(tmp_path / "c", fault_plan(seeds=[0]), tmp_path / "prefect-home")
    # 002 (group-writable, 0664): tells a hard-coded 0o644 and mkstemp's 0o600 from the mode
    # wanted; the campaign's processes inherit it from here.
    with umask(0o002) as expected:
        result = campaign.run()
    assert result.returncode == 0, result.stdout + result.stderr
    written = modes(campaign.out)
    store = [name for name in written if name.startswith("ckpt/")]
    assert {REPORT, REPORT_HTML, LEDGER, LOCK, "effects.png"} <= set(written)
    assert any(name.startswith(f"{LOGS}/") for name in written), sorted(written)
    assert any(name.endswith("/COMMIT.json") for name in store), sorted(written)
    assert other_modes(campaign.out, expected) == {}
    folders = {
        str(p.relative_to(campaign.out)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in campaign.out.rglob("*")
        if p.is_dir()
    }
    assert set(folders.values()) == {oct(0o777 & ~0o002)}, folders
