"""`ablate serve`'s boundary, through the deployment's parameters (issue 24): a flow run started
from the Prefect API or UI reads and writes only under the served roots, imports only allowed
workload modules, and is refused in one line before anything outside is touched."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ablations.campaign.lock import hold_folder
from ablations.errors import InputError
from ablations.security.entries import entry_allowed
from flows.boundary import ENTRIES_ENV, ROOTS_ENV, STORES_ENV, Boundary, admitted
from tests.flows.conftest import plan_text


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The boundary `ablate serve --root ROOT --allow-entry okpkg` hands its flow runs."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    monkeypatch.delenv(ENTRIES_ENV, raising=False)
    monkeypatch.delenv(STORES_ENV, raising=False)
    Boundary.of([root], ["okpkg"]).install()
    yield root
    for name in (ROOTS_ENV, ENTRIES_ENV, STORES_ENV):
        os.environ.pop(name, None)


def _campaign(**parameters: Any) -> Any:
    from flows.campaign import ablation_campaign

    return ablation_campaign(**parameters)


@pytest.mark.slow  # an end-to-end subprocess or worker start: make test, not make check
def test_an_out_dir_outside_the_roots_is_refused_and_never_created(
    prefect_server: None, served: Path, tmp_path: Path, tiny_plan: dict[str, Any]
) -> None:
    outside = tmp_path / "elsewhere" / "out"
    with pytest.raises(InputError, match=r"out_dir .* is outside the folders this server allows"):
        _campaign(plan_yaml=plan_text(tiny_plan), out_dir=str(outside))
    assert not (tmp_path / "elsewhere").exists()
    link = served / "link"
    link.symlink_to(tmp_path)  # inside by name, outside once resolved
    with pytest.raises(InputError, match="outside the folders"):
        _campaign(plan_yaml=plan_text(tiny_plan), out_dir=str(link / "out"))
    assert not (tmp_path / "out").exists()


def test_a_plan_path_outside_the_roots_is_never_read(
    prefect_server: None, served: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "id_ed25519"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- AAAA\n")
    with pytest.raises(InputError) as refused:
        _campaign(plan_path=str(secret), out_dir=str(served / "out"))
    assert "plan_path" in str(refused.value) and "PRIVATE KEY" not in str(refused.value)
    assert not (served / "out").exists()


def test_served_refusals_quote_no_secret_in_the_state_message_or_the_logs(
    prefect_server: None, served: Path, tiny_plan: dict[str, Any]
) -> None:
    """What `ablate notify` forwards (the state message) and the run's logs: a private note
    under the root is described, never quoted; a signed endpoint query never shown."""
    from tests.flows.test_ui_states import _logs

    note = served / "note.txt"
    note.write_text("Dear diary, the vault password is hunter2-planted.\n")
    tiny_plan["checkpoint"] = {
        "store": "s3://bucket/ablate",
        "endpoint_url": "https://s3.example.com/?X-Amz-Security-Token=FwoGplantedtoken",
    }
    for parameters, named in [
        ({"plan_path": str(note)}, "not a YAML mapping (text, 51 bytes): not a plan"),
        ({"plan_yaml": plan_text(tiny_plan)}, "checkpoint.endpoint_url"),
    ]:
        state = _campaign(**parameters, out_dir=str(served / "out"), return_state=True)
        assert state.is_failed() and named in str(state.message)
        logs = _logs(state.state_details.flow_run_id, at_least=1)
        shown = str(state.message) + "".join(log.message for log in logs)
        assert "hunter2" not in shown and "planted" not in shown


def test_a_workload_not_on_the_allow_list_is_refused_before_import(
    prefect_server: None,
    served: Path,
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    marker = tmp_path / "IMPORTED"
    (tmp_path / "evilpkg.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass W: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tiny_plan["workload"]["entry"] = "evilpkg:W"
    with pytest.raises(InputError, match=r"workload.entry 'evilpkg:W' is not on this server"):
        _campaign(plan_yaml=plan_text(tiny_plan), out_dir=str(served / "out"))
    assert not marker.exists() and "evilpkg" not in sys.modules
    assert not (served / "out").exists()


def test_a_pasted_alias_bomb_is_refused_and_never_becomes_the_run_name(
    prefect_server: None, served: Path
) -> None:
    from prefect.client.orchestration import get_client

    from tests.faults.test_bounds import _bomb

    state = _campaign(plan_yaml=_bomb(), out_dir=str(served / "out"), return_state=True)
    assert state.is_failed() and "aliases expand to more than" in str(state.message)
    with get_client(sync_client=True) as client:
        name = client.read_flow_run(state.state_details.flow_run_id).name
    assert name == "invalid plan"  # the bounded reader refused it: no 24 MB name
    assert not (served / "out").exists()


def test_leftovers_in_a_folder_not_registered_to_the_campaign_are_never_deleted(
    prefect_server: None, served: Path, tiny_plan: dict[str, Any]
) -> None:
    folder = served / "someone-elses"
    folder.mkdir()
    leftover = folder / ".precious.tmp"
    leftover.write_text("not ours")
    with pytest.raises(InputError, match="not empty and holds no registered campaign"):
        _campaign(plan_yaml=plan_text(tiny_plan), out_dir=str(folder))
    assert leftover.read_text() == "not ours"


def test_inside_the_boundary_the_plan_is_admitted(served: Path, tiny_plan: dict[str, Any]) -> None:
    text = plan_text(tiny_plan)  # the built-in digits workload
    assert admitted("", text, str(served / "out")).text == text
    plan = served / "plan.yaml"
    plan.write_text(text)
    assert admitted(str(plan), "", str(served / "out")).text == text


@pytest.mark.parametrize(
    ("checkpoint", "accepted"),
    [
        ({"store": "file://checkpoints"}, True),  # inside the output folder
        ({"store": "memory://x"}, True),
        ({"store": "file://{root}/stores/ckpt"}, True),  # under the root
        ({"store": "file://{outside}/ckpt"}, False),
        ({"store": "file://{root}/link/ckpt"}, False),  # under the root by name, not resolved
        ({"store": "file://{allowed}/ckpt"}, True),  # on --allow-store
        ({"store": "s3://shared/ablate/team"}, True),
        ({"store": "s3://shared/ablate-other"}, False),  # a look-alike prefix
        ({"store": "s3://elsewhere/x"}, False),
        ({"store": "s3://shared/ablate", "endpoint_url": "https://minio.local:9000"}, True),
        ({"store": "s3://shared/ablate", "endpoint_url": "http://169.254.169.254"}, False),
    ],
)
def test_a_served_plans_store_must_lie_inside_what_the_operator_allows(
    tmp_path: Path,
    tiny_plan: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    checkpoint: dict[str, str],
    accepted: bool,
) -> None:
    root, outside, allowed = tmp_path / "root", tmp_path / "outside", tmp_path / "allowed"
    for folder in (root, outside, allowed):
        folder.mkdir()
    (root / "link").symlink_to(outside)
    for name in (ROOTS_ENV, ENTRIES_ENV, STORES_ENV):
        monkeypatch.setenv(name, "")  # undone after the test: install() writes them
    stores = [f"file://{allowed}", "s3://shared/ablate", "https://minio.local:9000"]
    Boundary.of([root], [], stores).install()
    tiny_plan["checkpoint"] = {
        k: v.format(root=root, outside=outside, allowed=allowed) for k, v in checkpoint.items()
    }
    text = plan_text(tiny_plan)
    if accepted:
        assert admitted("", text, str(root / "out")).text == text
        return
    with pytest.raises(InputError, match=r"checkpoint.store .* is outside what this server"):
        admitted("", text, str(root / "out"))
    assert not (outside / "ckpt").exists()


def test_the_allow_list_takes_modules_and_packages_never_lookalikes() -> None:
    assert entry_allowed("ablations.workloads.digits:DigitsWorkload", [])
    assert entry_allowed("okpkg:W", ["okpkg"]) and entry_allowed("okpkg.train:W", ["okpkg"])
    assert not entry_allowed("okpkg_evil:W", ["okpkg"])
    assert not entry_allowed("os:system", ["okpkg"])


def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / ".lock").symlink_to(victim)
    with pytest.raises(InputError, match=r"\.lock is a symbolic link"), hold_folder(folder):
        pass
    assert victim.read_text() == "precious"


def test_serve_refuses_an_allow_entry_that_is_not_a_module_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ablations.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["serve", "--allow-entry", "os;import pty"])
    assert exited.value.code == 2
    assert "not a Python module name: 'os;import pty'" in capsys.readouterr().err
    for bad in ("ftp://x/y", "s3://KEY:SECRET@bucket/p", "s3://b/p?token=x", "s3://a,s3://b"):
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--allow-store", bad])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "argument --allow-store" in err and "SECRET" not in err


@pytest.mark.parametrize(
    ("workload", "refused"),
    [
        ({"command": ["python", "train.py"]}, "ablations.byo.command"),  # any program: opt-in
        ({"lightning": {"module": "evil.model:Net", "data": "okpkg.data:Digits"}}, "evil.model"),
        ({"lightning": {"module": "okpkg.model:Net", "data": "evil.data:Digits"}}, "evil.data"),
        ({"hf_trainer": "evil.train:make_trainer"}, "evil.train"),
    ],
)
def test_every_module_an_adapter_imports_is_on_the_allow_list(
    served: Path, tiny_plan: dict[str, Any], workload: dict[str, Any], refused: str
) -> None:
    tiny_plan["workload"].update(workload)
    with pytest.raises(InputError, match=f"'{refused}"):
        admitted("", plan_text(tiny_plan), str(served / "out"))


def test_a_lightning_plan_of_allowed_modules_is_admitted(
    served: Path, tiny_plan: dict[str, Any]
) -> None:
    tiny_plan["workload"]["lightning"] = {"module": "okpkg.model:Net", "data": "okpkg.data:D"}
    text = plan_text(tiny_plan)
    assert admitted("", text, str(served / "out")).text == text
