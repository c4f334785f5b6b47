"""`ablations.verify.files`: each way a listed file can be wrong is one problem naming it.

tests/ablations/verify/test_folder.py covers a good CSV and model, a CSV without its columns,
a pickled model and a path outside the folder, and `scan_paths`; these pin the rest.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from ablations.campaign.manifest import FileEntry
from ablations.verify import files
from ablations.verify.files import (
    PNG_SIGNATURE,
    FolderProblem,
    check_entry,
    folder_files,
    load_problem,
    load_weights,
    scan_credentials,
    scan_leftovers,
)


def _entry(out: Path, relative: str, kind: str) -> FileEntry:
    data = (out / relative).read_bytes()
    return FileEntry(
        kind=kind, path=relative, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data)
    )


def _lines(out: Path, entry: FileEntry | dict[str, object]) -> list[str]:
    return [str(p) for p in check_entry(out, entry, "run r1")]


def test_missing_empty_and_unhashed_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "r1.csv").write_text("step,loss\n1,2\n")
    entry = _entry(tmp_path, "r1.csv", "steps")
    assert _lines(tmp_path, entry) == []
    gone = entry.model_copy(update={"path": "metrics/gone.csv"})
    assert _lines(tmp_path, gone) == ["metrics/gone.csv: missing (steps of run r1)"]
    (tmp_path / "empty.csv").write_bytes(b"")
    empty = entry.model_copy(update={"path": "empty.csv"})
    assert _lines(tmp_path, empty) == ["empty.csv: is empty (steps of run r1)"]
    unhashed = entry.model_copy(update={"sha256": None})
    assert _lines(tmp_path, unhashed) == ["r1.csv: was missing when manifest.json was written"]


def test_a_changed_file_is_caught_by_size_then_by_digest(tmp_path: Path) -> None:
    path = tmp_path / "r1.csv"
    path.write_text("step,loss\n1,2\n")
    entry = _entry(tmp_path, "r1.csv", "steps")
    path.write_text("step,loss\n1,2\n2,1\n")
    assert _lines(tmp_path, entry) == [f"r1.csv: has {path.stat().st_size} bytes, manifest.json "
                                       f"says {entry.bytes}"]  # fmt: skip
    path.write_text("step,loss\n1,3\n")  # same size, other content
    assert path.stat().st_size == entry.bytes
    assert _lines(tmp_path, entry) == [
        "r1.csv: sha256 differs from manifest.json (changed or corrupt)"
    ]
    unsized = entry.model_copy(update={"bytes": None})  # the digest still decides
    assert _lines(tmp_path, unsized) == _lines(tmp_path, entry)


@pytest.mark.parametrize("path", ["/etc/passwd", "", "models/../../x.pt"])
def test_a_path_not_inside_the_folder_is_refused_before_it_is_opened(
    tmp_path: Path, path: str
) -> None:
    entry = {"kind": "model", "path": path, "sha256": "0", "bytes": 1}
    assert _lines(tmp_path, entry) == [
        f"manifest.json: run r1: {path!r} is not a path inside the folder"
    ]


def test_a_malformed_entry_is_a_manifest_problem(tmp_path: Path) -> None:
    entry: dict[str, object] = {"kind": "model", "sha256": "0"}  # no path
    [line] = _lines(tmp_path, entry)
    assert line.startswith("manifest.json: run r1: malformed file entry {'kind': 'model'")


def _write(out: Path, name: str, data: bytes) -> FileEntry:
    (out / name).write_bytes(data)
    return _entry(out, name, name.split(".")[0])


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("gate.json", b'{"decision": ', "does not load as gate: JSONDecodeError: "),
        ("record.json", b'{"run_id": "r1"}', "does not load as record: ValidationError: "),
        ("plan.yaml", b"a: [1, 2\n", "does not load as plan: "),
        ("REPORT.md", b"caf\xe9\n", "does not load as REPORT: UnicodeDecodeError: "),
        ("effects.png", b"GIF89a not a png", "is not a PNG image (bad signature)"),
        ("timeline.png", PNG_SIGNATURE + b"\x00" * 40, "does not load as timeline: "),
        ("steps.csv", b'"a,b\n1', "does not load as steps: ParserError: "),
    ],
)
def test_a_file_that_does_not_parse_as_its_kind_is_named_with_the_reason(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    entry = _write(tmp_path, name, data)
    [line] = _lines(tmp_path, entry)
    assert line.startswith(f"{name}: {message}"), line
    assert "\n" not in line


def test_a_file_that_parses_as_its_kind_has_no_problem(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (4, 3)).save(tmp_path / "effects.png")
    # a question ending in "?" inside a flow mapping: validate and run read it (libyaml's
    # parser); PyYAML's pure-Python one refused it, failing verify of a finished campaign
    (tmp_path / "plan.yaml").write_text("campaign: {id: x, question: Does it matter?}\n")
    (tmp_path / "REPORT.md").write_text("# café\n", encoding="utf-8")
    (tmp_path / "gate.json").write_text('{"decision": "proceed"}')
    for name, kind in [("effects.png", "plot"), ("plan.yaml", "plan"), ("REPORT.md", "report"),
                       ("gate.json", "gate")]:  # fmt: skip
        assert load_problem(tmp_path / name, kind) is None, name


def test_load_weights_wants_a_state_dict_of_tensors(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2), "b": torch.zeros(1)}, tmp_path / "ok.pt")
    assert sorted(load_weights(tmp_path / "ok.pt")) == ["b", "w"]
    torch.save(torch.ones(2), tmp_path / "tensor.pt")
    torch.save({"w": torch.ones(2), "step": 3}, tmp_path / "mixed.pt")
    for name, holds in (("tensor.pt", "Tensor"), ("mixed.pt", "dict")):
        with pytest.raises(TypeError, match=f"holds a {holds}, not a state_dict of tensors"):
            load_weights(tmp_path / name)
        assert load_problem(tmp_path / name, "model") == (
            f"does not load as model: TypeError: holds a {holds}, not a state_dict of tensors"
        )


def test_folder_files_lists_every_file_sorted_and_no_folder(tmp_path: Path) -> None:
    for relative in ("b.txt", "models/a.pt", "a.txt", "metrics/deep/x.csv"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x")
    found = [p.relative_to(tmp_path).as_posix() for p in folder_files(tmp_path)]
    assert found == ["a.txt", "b.txt", "metrics/deep/x.csv", "models/a.pt"]


def test_scan_credentials_names_file_and_what_and_skips_huge_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-long-secret-value-9")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "log.csv").write_text("step,msg\n1,a-long-secret-value-9\n")
    (tmp_path / "REPORT.md").write_text("store s3://k:v@bucket/x\n")
    (tmp_path / "clean.md").write_text("accuracy 0.97\n")
    assert [str(p) for p in scan_credentials(tmp_path)] == [
        "REPORT.md: holds a credential: a URL with user:password@",
        "metrics/log.csv: holds a credential: the value of $AWS_SECRET_ACCESS_KEY",
    ]
    size = (tmp_path / "REPORT.md").stat().st_size
    monkeypatch.setattr(files, "SCAN_LIMIT_BYTES", size - 1)  # both files are now "large"
    assert scan_credentials(tmp_path) == []


def test_scan_leftovers_wants_a_hidden_tmp_or_part_file(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    for name in (".m.pt.1.tmp", "models/.a.pt.x.part", "plain.tmp", ".lock", ".tmp.keep"):
        (tmp_path / name).write_text("x")
    assert [p.file for p in scan_leftovers(tmp_path)] == [".m.pt.1.tmp", "models/.a.pt.x.part"]


def test_a_problem_line_carries_no_terminal_codes() -> None:
    # torch's unpickling error is bold: "\x1b[1mWeightsUnpickler error: ...\x1b[0m"
    problem = FolderProblem("models/r.pt", "does not load: \x1b[1mWeightsUnpickler error\x1b[0m: x")
    assert str(problem) == "models/r.pt: does not load: WeightsUnpickler error: x"


def test_a_problem_of_several_lines_is_one_line() -> None:
    # SQLAlchemy's error on a ledger that is not a database: the message, the SQL, a link
    message = 'DatabaseError: file is not a database\n[SQL: PRAGMA main.table_info("studies")]\n'
    problem = FolderProblem("ledger.db", message + "(Background on this error at: x)")
    assert "\n" not in str(problem)
    assert str(problem).startswith("ledger.db: DatabaseError: file is not a database [SQL: ")
