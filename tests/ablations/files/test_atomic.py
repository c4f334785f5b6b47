"""`ablations.files.atomic`: a file is written whole or not at all, and created with the mode a
plain `open()` gives it under the process's umask (0o666 less it), never mkstemp's 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ablations.files.atomic import atomic_write_bytes, atomic_write_text
from tests.file_modes import UMASKS, modes, umask


@pytest.mark.parametrize("mask", UMASKS, ids=oct)
def test_a_new_file_and_a_replaced_one_get_the_mode_a_plain_open_gives(
    tmp_path: Path, mask: int
) -> None:
    old = tmp_path / "old.json"
    old.write_text("{}")
    os.chmod(old, 0o600)  # written by an earlier version of ablate
    with umask(mask) as expected:
        atomic_write_text(tmp_path / "records" / "r.json", '{"run_id": "r"}')
        atomic_write_bytes(old, b"[]")
        plain = tmp_path / "plain.txt"
        plain.write_text("what open() gives")
    assert stat.S_IMODE(plain.stat().st_mode) == expected  # the test's own reference
    assert modes(tmp_path) == {
        "old.json": expected,
        "plain.txt": expected,
        "records/r.json": expected,
    }
    assert old.read_bytes() == b"[]"


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "manifest.json"
    atomic_write_text(target, "the old, complete manifest")

    def fsync(fd: int) -> None:  # the data reached the temporary, the disk then failed
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match=r"Input/output error: '.*manifest.json'"):
        atomic_write_text(target, "a new manifest that never lands")
    assert target.read_text() == "the old, complete manifest"
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_folder_that_refuses_the_temporary_names_the_file_it_was_for(tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user writes into a read-only folder (root)")
        with pytest.raises(PermissionError, match=r"'.*read-only/gate.json'"):
            atomic_write_text(folder / "gate.json", "{}")
    finally:
        folder.chmod(0o700)
    assert list(folder.iterdir()) == []


def test_a_planted_link_at_a_temporary_name_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ablations.files.atomic as atomic

    secret = tmp_path / "elsewhere"
    secret.write_text("not ours")
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(atomic.secrets, "token_hex", lambda n: next(names))
    (tmp_path / ".plan.yaml.aaaaaaaa.tmp").symlink_to(secret)  # taken: the next name is used
    atomic_write_text(tmp_path / "plan.yaml", "campaign: {}\n")
    assert secret.read_text() == "not ours"
    assert (tmp_path / "plan.yaml").read_text() == "campaign: {}\n"
    assert not (tmp_path / ".plan.yaml.bbbbbbbb.tmp").exists()
