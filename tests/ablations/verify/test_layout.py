"""`ablations.verify.layout`: what may sit at the top of an output folder, and no links.

tests/ablations/results/test_portable_folder.py covers the basic case (a hidden file, a note,
a linked model, the lock and a relative store accepted); these pin the rest of the contract.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ablations.campaign.folder import RUN_FOLDERS
from ablations.verify.files import scan_leftovers
from ablations.verify.layout import EXPECTED_ENTRIES, scan_layout, store_entry


def _lines(out: Path, store: str | None) -> list[str]:
    return [str(p) for p in scan_layout(out, store)]


def test_every_expected_entry_is_accepted(tmp_path: Path) -> None:
    for name in EXPECTED_ENTRIES:
        if name in RUN_FOLDERS:
            (tmp_path / name).mkdir()
            (tmp_path / name / "r1.csv").write_text("x")
        else:
            (tmp_path / name).write_text("x")
    assert len(list(tmp_path.iterdir())) == len(EXPECTED_ENTRIES)
    assert scan_layout(tmp_path, None) == []


@pytest.mark.parametrize(
    "store",
    [
        None,
        "s3://bucket/ckpt",
        "memory://ckpt",
        f"file://{os.sep}abs{os.sep}ckpt",
        "file://../ckpt",
    ],
)
def test_a_store_folder_is_unexpected_unless_the_store_is_relative_inside(
    tmp_path: Path, store: str | None
) -> None:
    (tmp_path / "ckpt").mkdir()
    assert _lines(tmp_path, store) == ["ckpt: is not part of an output folder (unexpected file)"]
    assert scan_layout(tmp_path, "file://ckpt/deeper") == []


@pytest.mark.parametrize(
    ("store", "entry"),
    [
        ("file://./ckpt/../other/x", "other"),  # normalised before its first part is taken
        ("file://ckpt/../../up", None),  # climbs out of the folder
        ("file://", None),
        ("file://.", None),
        ("ckpt", None),  # no scheme: not a file:// store
    ],
)
def test_store_entry_normalises_the_path(store: str, entry: str | None) -> None:
    assert store_entry(store) == entry


def test_problems_are_in_name_order_and_name_each_entry(tmp_path: Path) -> None:
    for name in ("zz.txt", "a-note.md", ".DS_Store", "Manifest.json"):  # names are exact
        (tmp_path / name).write_text("x")
    (tmp_path / "manifest.json").write_text("{}")
    assert _lines(tmp_path, None) == [
        f"{name}: is not part of an output folder (unexpected file)"
        for name in sorted([".DS_Store", "Manifest.json", "a-note.md", "zz.txt"])
    ]


def test_a_linked_folder_is_reported_once_and_not_followed(tmp_path: Path) -> None:
    out, outside = tmp_path / "out", tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "link").symlink_to(tmp_path)  # would be reported if walked into
    out.mkdir()
    (out / "models").symlink_to(outside)  # an expected name, but a link
    assert _lines(out, None) == [
        f"models: is a symbolic link (to {outside}): the folder must hold its own files"
    ]


def test_a_dangling_or_relative_link_is_still_a_link(tmp_path: Path) -> None:
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    (tmp_path / "metrics" / "twin.csv").symlink_to("gone.csv")  # inside, but still a link
    lines = _lines(tmp_path, None)
    assert lines == [
        f"metrics/gone.csv: is a symbolic link (to {tmp_path / 'nowhere.csv'}): "
        "the folder must hold its own files",
        "metrics/twin.csv: is a symbolic link (to gone.csv): the folder must hold its own files",
    ]


def test_an_unexpected_link_at_the_top_is_both_unexpected_and_a_link(tmp_path: Path) -> None:
    (tmp_path / "notes").symlink_to(tmp_path.parent)
    assert _lines(tmp_path, None) == [
        "notes: is not part of an output folder (unexpected file)",
        f"notes: is a symbolic link (to {tmp_path.parent}): the folder must hold its own files",
    ]


def test_a_leftover_temporary_at_the_top_is_unexpected_and_a_leftover(tmp_path: Path) -> None:
    """Layout and leftovers are separate checks; a temporary of manifest.json trips both."""
    (tmp_path / "metrics").mkdir()
    (tmp_path / ".manifest.json.k2j3.tmp").write_text("{")
    (tmp_path / "metrics" / ".r1.steps.csv.x9.part").write_text("step")
    assert _lines(tmp_path, None) == [
        ".manifest.json.k2j3.tmp: is not part of an output folder (unexpected file)"
    ]  # inside a run folder, only the leftover check sees it
    assert [str(p) for p in scan_leftovers(tmp_path)] == [
        ".manifest.json.k2j3.tmp: is a leftover temporary file of an interrupted write",
        "metrics/.r1.steps.csv.x9.part: is a leftover temporary file of an interrupted write",
    ]
