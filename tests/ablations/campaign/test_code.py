"""The user's code in the record: what the default hashes (the script's folder, without caches,
virtual environments, output folders, data and weights) and what it refuses to (too much); a
declared `workload.code`; a module's package; nothing for a built-in workload; and the
registration that refuses a rerun whose runs trained with other code."""

from __future__ import annotations

import subprocess
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
    (folder / "notes.md").write_text("what a run wrote, or a note: not code\n")
    return folder


def runs_write_beside_the_script(folder: Path) -> None:
    """What a training script and its tracker write next to it while they run."""
    (folder / "train_log.txt").write_text("step 1 loss 0.5\n")
    (folder / "wandb" / "run-1").mkdir(parents=True)
    (folder / "wandb" / "run-1" / "run.json").write_text('{"id": 1}\n')
    (folder / "wandb" / "run-1" / "train.py").write_text("print('a copy of the code')\n")
    (folder / "metrics.json").write_text('{"loss": 0.5}\n')
    (folder / "lightning_logs" / "version_0").mkdir(parents=True)
    (folder / "lightning_logs" / "version_0" / "hparams.yaml").write_text("lr: 0.1\n")


def test_the_default_is_the_scripts_folder_without_what_is_not_code(
    tmp_path: Path, project: Path, demo_data: dict[str, Any]
) -> None:
    plan = plan_of(command_plan(demo_data))
    code = workload_code(plan, tmp_path)
    assert code is not None and code.paths == ["proj"] and not code.declared
    assert code.files == 2  # train.py and lib/model.py
    assert sorted(code.digests) == ["proj/lib/model.py", "proj/train.py"]
    before = code.sha256
    for ignored in ("__pycache__/x.pyc", ".git/ORIG_HEAD", "venv/more.py", "out/more.txt"):
        (project / ignored).write_text("changed")
    (project / "data.csv").write_text("y\n" * 600_000)
    (project / "notes.md").write_text("edited\n")
    runs_write_beside_the_script(project)
    code = workload_code(plan, tmp_path)
    assert code is not None and code.sha256 == before
    (project / "lib" / "model.py").write_text("WIDTH = 32\n")
    code = workload_code(plan, tmp_path)
    assert code is not None and code.sha256 != before
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    project.rename(moved / "proj")  # a moved checkout hashes the same
    assert workload_code(plan, moved) == code


def test_the_default_takes_scripts_by_their_line_and_whatever_git_tracks(
    tmp_path: Path, project: Path, demo_data: dict[str, Any]
) -> None:
    """Source by extension, a `#!` script without one, the command's own script whatever its
    name, and a config file once git tracks it; what git does not track and is no source,
    not."""
    (project / "prepare").write_text("#!/bin/sh\necho data\n")
    (project / "train.job").write_text("print('the script the command names')\n")
    (project / "config.yaml").write_text("width: 16\n")
    plan = plan_of(command_plan(demo_data))
    plan.workload.command[1] = "proj/train.job"
    code = workload_code(plan, tmp_path)
    assert code is not None
    assert sorted(code.digests) == [
        "proj/lib/model.py", "proj/prepare", "proj/train.job", "proj/train.py"
    ]  # fmt: skip
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".git" / "HEAD").unlink()  # the fixture's stand-in: a real repository now
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(["git", "-C", str(project), "add", "config.yaml", "notes.md"], check=True)
    tracked = workload_code(plan, tmp_path)
    assert tracked is not None
    assert {"proj/config.yaml", "proj/notes.md"} == set(tracked.digests) - set(code.digests)
    runs_write_beside_the_script(project)
    assert workload_code(plan, tmp_path) == tracked


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
    assert ": changed proj/train.py)" in message


def test_a_run_killed_and_resumed_is_not_refused_for_what_it_wrote_beside_its_script(
    tmp_path: Path, project: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main recovery path (#44): kill -9, rerun. The script's log and its tracker's
    files are no code; a refusal names the files changed, added and removed."""
    monkeypatch.chdir(tmp_path)
    (project / "lib" / "old.py").write_text("OLD = 1\n")
    text = yaml.safe_dump(command_plan(demo_data))
    out = tmp_path / "campaign"
    first = register(text, out)
    save_record(out, RunRecord(
        run_id="r", variant="control", seed=0, category="essential", phase="pilot",
        status="accepted",
    ))  # fmt: skip
    runs_write_beside_the_script(project)
    assert register(text, out).code == first.code  # resumed
    (project / "lib" / "model.py").write_text("WIDTH = 64\n")
    (project / "lib" / "util.py").write_text("def helper(): ...\n")
    (project / "lib" / "old.py").unlink()
    with pytest.raises(CampaignConflictError) as refused:
        register(text, out)
    named = "changed proj/lib/model.py; added proj/lib/util.py; removed proj/lib/old.py"
    assert first.code is not None
    assert f"(proj (3 files, sha256 {first.code.sha256[:12]}); now proj (3 files" in str(
        refused.value
    )
    assert f": {named}): a rerun would mix" in str(refused.value)


def test_a_folder_an_earlier_release_registered_is_compared_by_its_rule(
    tmp_path: Path, project: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its registration hashed every small text file of the folder and kept no per-file
    digests: the same code resumes, other code is refused."""
    monkeypatch.chdir(tmp_path)
    text = yaml.safe_dump(command_plan(demo_data))
    out = tmp_path / "campaign"
    register(text, out)
    folder = CampaignFolder(out)
    registered = folder.registration()
    assert registered is not None
    earlier = workload_code(plan_of(command_plan(demo_data)), tmp_path, rule="text")
    assert earlier is not None and earlier.files == 3  # notes.md too
    earlier = earlier.model_copy(update={"digests": {}})
    folder.write_registration(registered.model_copy(update={"code": earlier}))
    save_record(out, RunRecord(
        run_id="r", variant="control", seed=0, category="essential", phase="pilot",
        status="accepted",
    ))  # fmt: skip
    resumed = register(text, out)
    assert resumed.code is not None and resumed.code.files == 2  # recorded by this release now
    folder.write_registration(registered.model_copy(update={"code": earlier}))
    (project / "notes.md").write_text("edited: other code by the earlier rule\n")
    with pytest.raises(CampaignConflictError, match="whose runs trained with other code"):
        register(text, out)


def test_a_module_imported_from_outside_the_hashed_code_is_named(
    tmp_path: Path, project: Path, demo_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper on PYTHONPATH (a sibling checkout, an editable install) is code the hash does
    not cover: validate names it. Installed libraries, the standard library, the script's own
    folder and ablate's helper are not named."""
    shared = tmp_path / "shared"
    (shared / "helperlib").mkdir(parents=True)
    (shared / "helperlib" / "__init__.py").write_text("")
    (shared / "loose.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(shared))
    (project / "train.py").write_text(
        "import json, yaml\nimport ablate_report\nfrom lib import model\nimport helperlib\n"
    )
    plan = plan_of(command_plan(demo_data))
    assert code_module.unhashed_imports(plan, tmp_path) == ["helperlib (shared/helperlib)"]
    (project / "lib" / "model.py").write_text("from loose import X\n")
    assert code_module.unhashed_imports(plan, tmp_path) == [
        "helperlib (shared/helperlib)", "loose (shared)"
    ]  # fmt: skip
    declared = plan_of(command_plan(demo_data, code=["proj", "shared"]))
    assert code_module.unhashed_imports(declared, tmp_path) == []
