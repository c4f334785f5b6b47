"""The user's code in the record: what the default hashes (the script's folder, without caches,
virtual environments, output folders, data and weights) and what it refuses to (too much); a
declared `workload.code`; a module's package; nothing for a built-in workload; and the
registration that refuses a rerun whose runs trained with other code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.campaign import code as code_module
from ablations.campaign.code import workload_code
from ablations.campaign.folder import CampaignFolder
from ablations.campaign.opening import register
from ablations.campaign.state import save_record
from ablations.errors import CampaignConflictError, InputError
from ablations.plan.model import Plan, parse_plan
from ablations.run.records import RunRecord


def command_plan(demo_data: dict[str, Any], **workload: Any) -> dict[str, Any]:
    demo_data["workload"] = {
        "command": ["python", "proj/train.py", "--lr", "{lr}"],
        "params": {"lr": 0.1},
        **workload,
    }
    demo_data["control"] = {"params": {}}
    demo_data["factors"] = {"lr": {"category": "essential", "levels": [0.2]}}
    return demo_data


def plan_of(data: dict[str, Any]) -> Plan:
    return parse_plan(data)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A script's folder as a user's checkout holds it, things not to hash included."""
    folder = tmp_path / "proj"
    (folder / "lib").mkdir(parents=True)
    (folder / "train.py").write_text("print('train')\n")
    (folder / "lib" / "model.py").write_text("WIDTH = 16\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0cache")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "venv").mkdir()
    (folder / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (folder / "venv" / "site.py").write_text("x = 1\n")
    (folder / "out").mkdir()
    (folder / "out" / "registration.json").write_text("{}")
    (folder / "out" / "notes.txt").write_text("a campaign's folder\n")
    (folder / "weights.pt").write_bytes(b"\0\1\2" * 10)
    (folder / "data.csv").write_text("x\n" * 600_000)  # 1.2 MB: data, not code
    return folder


def test_the_default_is_the_scripts_folder_without_what_is_not_code(
    tmp_path: Path, project: Path, demo_data: dict[str, Any]
) -> None:
    plan = plan_of(command_plan(demo_data))
    code = workload_code(plan, tmp_path)
    assert code is not None and code.paths == ["proj"] and not code.declared
    assert code.files == 2  # train.py and lib/model.py
    before = code.sha256
    for ignored in ("__pycache__/x.pyc", ".git/ORIG_HEAD", "venv/more.py", "out/more.txt"):
        (project / ignored).write_text("changed")
    (project / "data.csv").write_text("y\n" * 600_000)
    code = workload_code(plan, tmp_path)
    assert code is not None and code.sha256 == before
    (project / "lib" / "model.py").write_text("WIDTH = 32\n")
    code = workload_code(plan, tmp_path)
    assert code is not None and code.sha256 != before
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    project.rename(moved / "proj")  # a moved checkout hashes the same
    assert workload_code(plan, moved) == code


def test_a_default_folder_too_big_to_be_code_is_refused_naming_the_field(
    tmp_path: Path, project: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(code_module, "MAX_FILES", 1)
    with pytest.raises(InputError, match=r"holds more than 1 files .*name your code's files"):
        workload_code(plan_of(command_plan(demo_data)), tmp_path)


def test_declared_code_is_hashed_as_named_and_a_missing_path_is_named(
    tmp_path: Path, project: Path, demo_data: dict[str, Any]
) -> None:
    plan = plan_of(command_plan(demo_data, code=["proj/train.py", "proj/weights.pt"]))
    code = workload_code(plan, tmp_path)
    assert code is not None and code.declared and code.files == 2  # the weights too
    assert code.paths == ["proj/train.py", "proj/weights.pt"]
    missing = plan_of(command_plan(demo_data, code=["proj/train.py", "proj/gone.py"]))
    with pytest.raises(InputError, match=r"workload.code\[1\]: no such file or folder: .*gone"):
        workload_code(missing, tmp_path)


def test_a_module_entry_hashes_its_package_and_a_built_in_workload_nothing(
    tmp_path: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert workload_code(plan_of(demo_data), tmp_path) is None  # the package's own workload
    package = tmp_path / "site" / "mypkg"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / "net.py").write_text("class Net: ...\n")
    (package / "data.py").write_text("class Data: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    demo_data["workload"] = {
        "lightning": {"module": "mypkg.models.net:Net", "data": "mypkg.data:Data"}
    }
    code = workload_code(plan_of(demo_data), tmp_path)
    assert code is not None and code.paths == ["site/mypkg"] and code.files == 4


def test_a_rerun_with_other_code_is_refused_once_a_run_trained(
    tmp_path: Path, project: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = yaml.safe_dump(command_plan(demo_data))
    out = tmp_path / "campaign"
    first = register(text, out)
    assert first.code is not None and first.code.paths == ["proj"]
    # Changed before any run trained (a preflight's fix): the registration takes the new code.
    (project / "train.py").write_text("print('fixed')\n")
    second = register(text, out)
    assert second.code is not None and second.code.sha256 != first.code.sha256
    registered = CampaignFolder(out).registration()
    assert registered is not None and registered.code == second.code
    record = RunRecord(
        run_id="r", variant="control", seed=0, category="essential", phase="pilot",
        status="accepted",
    )  # fmt: skip
    save_record(out, record)
    assert register(text, out).code == second.code  # the same code: resumed
    (project / "train.py").write_text("print('changed again')\n")
    with pytest.raises(CampaignConflictError) as refused:
        register(text, out)
    message = str(refused.value)
    assert "\n" not in message and "whose runs trained with other code (proj (2 files" in message
    assert f"sha256 {second.code.sha256[:12]}" in message and "new campaign" in message
