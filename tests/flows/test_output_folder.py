"""The output folder of a real campaign (S3 checkpoints on loopback): contract, RELOAD.md,
`ablate verify` in a fresh process, tampering named, and no planted credential anywhere.

One campaign runs per module (`ablate run` in a subprocess, ephemeral Prefect, like a user);
every test reads it or a copy of it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ablations.campaign.manifest import read_manifest
from ablations.verify.folder import verify_folder
from tests.ablations.results.test_ledger import assert_ledger_matches_manifest
from tests.conftest import ROOT
from tests.flows.conftest import TINY_PLAN, plan_text
from tests.s3_server import BUCKET

pytestmark = pytest.mark.slow

PLANTED = {
    "AWS_ACCESS_KEY_ID": "AKIAPLANTEDKEY000001",
    "AWS_SECRET_ACCESS_KEY": "planted-secret-ablate-0f9e8d7c6b5a",
    "AWS_SESSION_TOKEN": "planted-session-token-ablate-1a2b3c4d",
}
"""Dummy S3 credentials the campaign runs with (moto accepts any): none may appear anywhere."""


@dataclass(frozen=True)
class Campaign:
    out: Path
    log: str
    prefect_home: Path


def _env(prefect_home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)  # ephemeral mode, as a user runs it
    env["PREFECT_HOME"] = str(prefect_home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _verify_cli(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ablations.cli", "verify", str(folder)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Campaign:
    root = tmp_path_factory.mktemp("output-folder")
    data: dict[str, Any] = json.loads(json.dumps(TINY_PLAN))
    data["checkpoint"] = {
        "store": f"s3://{BUCKET}/folder-{uuid.uuid4().hex[:8]}",
        "endpoint_url": s3_endpoint,
        "interval": {"steps": 15},  # not a divisor of 40: the last checkpoint is not final
    }
    plan = root / "plan.yaml"
    plan.write_text(plan_text(data))
    out = root / "out"
    home = root / "prefect-home"
    command = [sys.executable, "-m", "ablations.cli", "run", str(plan), "--out", str(out)]
    result = subprocess.run(
        command, cwd=ROOT, env=_env(home, **PLANTED), capture_output=True, text=True, timeout=400
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    return Campaign(out=out, log=log, prefect_home=home)


def test_verify_passes_in_a_fresh_process(campaign: Campaign) -> None:
    result = _verify_cli(campaign.out, _env(campaign.prefect_home))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "final models re-evaluated on the cpu within 1e-06" in result.stdout


def test_manifest_holds_the_contract(campaign: Campaign) -> None:
    out = campaign.out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["campaign_id"] == "tiny" and len(manifest["plan_hash"]) == 64
    assert manifest["code_version"]["package"] and manifest["code_version"]["git_commit"]
    env = manifest["environment"]
    assert {"python", "torch", "prefect", "cuda", "devices"} <= env.keys()
    assert manifest["ledger_url"] == "sqlite:///ledger.db" and manifest["gate"]["decision"]
    assert manifest["budget"]
    # The decision the report reaches is what `ablate run` ends with, word for word.
    report = (out / "REPORT.md").read_text()
    assert f"**Decision reached.** {manifest['decision_reached']}" in report
    assert f"decision: {manifest['decision_reached']}\n" in campaign.log
    assert f"gate: {manifest['gate']['decision']}: " in campaign.log
    assert manifest["checkpoint_store"]["url"].startswith(f"s3://{BUCKET}/")
    text = (out / "manifest.json").read_text()
    assert str(out) not in text and "/tmp/tmp" not in text  # relocatable, nothing temporary
    runs = manifest["runs"]
    assert {r["status"] for r in runs} >= {"accepted", "stopped"}
    for row in runs:
        for key in ("run_id", "variant", "seed", "category", "phase", "status", "stop"):
            assert key in row, key
        record = json.loads((out / "records" / f"{row['run_id']}.json").read_text())
        assert record["status"] == row["status"]  # a finished run is known from its record
        for entry in row["artifacts"]:
            data = (out / entry["path"]).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (
                entry["bytes"],
                entry["sha256"],
            )
        if row["status"] == "accepted":
            model = next(a["path"] for a in row["artifacts"] if a["kind"] == "model")
            weights = torch.load(out / model, weights_only=True)
            assert weights and all(isinstance(v, torch.Tensor) for v in weights.values())
            uri = row["checkpoint"]["uri"]
            owner = row.get("continues") or row["run_id"]  # a pilot saves as its main run
            assert re.fullmatch(rf"s3://{BUCKET}/folder-\w+/tiny/{owner}/step-\d{{8}}", uri)
    listed = {f["path"] for f in manifest["files"]}
    assert {"plan.yaml", "runs.csv", "REPORT.md", "RELOAD.md", "timeline.png"} <= listed
    assert {"REPORT.html", "curves.png"} <= listed
    frame = pd.read_csv(out / "runs.csv")
    assert set(frame["run_id"]) == {r["run_id"] for r in runs}
    assert_ledger_matches_manifest(out)


def test_the_manifest_validates_and_is_written_again_byte_for_byte(campaign: Campaign) -> None:
    text = (campaign.out / "manifest.json").read_text()
    manifest = read_manifest(campaign.out)
    assert manifest.to_json() == text  # the typed model loses and adds nothing
    accepted = [r for r in manifest.runs if r.status == "accepted"]
    assert accepted and all(r.run_file("model") and r.checkpoint.uri for r in accepted)


def test_no_planted_credential_in_the_folder_or_the_logs(campaign: Campaign) -> None:
    secrets = [value.encode() for value in PLANTED.values()]
    places = [*campaign.out.rglob("*"), *campaign.prefect_home.rglob("*")]
    files = [p for p in places if p.is_file()]
    assert any(p.name == "ledger.db" for p in files) and any(p.suffix == ".pt" for p in files)
    for path in files:
        data = path.read_bytes()
        assert not [s for s in secrets if s in data], path
    assert not [s for s in PLANTED.values() if s in campaign.log]


def _sh_blocks(markdown: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", markdown, flags=re.DOTALL)


def test_reload_commands_work_as_written_in_a_moved_folder(
    campaign: Campaign, tmp_path: Path
) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(campaign.out, moved)
    blocks = _sh_blocks((moved / "RELOAD.md").read_text())
    joined = "\n".join(blocks)
    for needle in (
        "runs.csv",
        "manifest.json",
        "load_study",
        "models/",
        "state.pt",
        "predictions/",
    ):
        assert needle in joined, needle
    for block in blocks:
        result = subprocess.run(
            ["bash", "-c", block],
            cwd=moved,
            env=_env(campaign.prefect_home),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"
    assert "re-evaluated" in joined


# -- tampering: each change alone makes verify fail, naming the file ----------------------


def _manifest(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "manifest.json").read_text()))


def _save(folder: Path, manifest: dict[str, Any]) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))


def _accepted(folder: Path, kind: str, index: int = 0) -> tuple[str, str]:
    rows = [r for r in _manifest(folder)["runs"] if r["status"] == "accepted"]
    row = rows[index]
    return row["run_id"], next(a["path"] for a in row["artifacts"] if a["kind"] == kind)


def _flip_byte(folder: Path) -> str:
    _, path = _accepted(folder, "predictions")
    data = bytearray((folder / path).read_bytes())
    data[-2] ^= 1  # a predicted label changes by one bit; the CSV still parses
    (folder / path).write_bytes(bytes(data))
    return f"{path}: sha256 differs"


def _delete(folder: Path) -> str:
    _, path = _accepted(folder, "steps")
    (folder / path).unlink()
    return f"{path}: missing"


def _empty(folder: Path) -> str:
    _, path = _accepted(folder, "model")
    (folder / path).write_bytes(b"")
    return f"{path}: is empty"


def _point_uri_elsewhere(folder: Path) -> str:
    manifest = _manifest(folder)
    rows = [r for r in manifest["runs"] if r["checkpoint"]["uri"]]
    rows[0]["checkpoint"]["uri"] = rows[1]["checkpoint"]["uri"]  # another run's checkpoint
    _save(folder, manifest)
    return f"manifest.json: checkpoint URI of run {rows[0]['run_id']} points elsewhere"


def _point_uri_at_a_missing_step(folder: Path) -> str:
    manifest = _manifest(folder)
    # a main run's: a pilot's checkpoint is its main run's, which may have pruned it since
    row = next(r for r in manifest["runs"] if r["checkpoint"]["uri"] and r["phase"] == "main")
    uri = re.sub(r"step-\d{8}$", "step-99999999", row["checkpoint"]["uri"])
    row["checkpoint"]["uri"] = uri
    _save(folder, manifest)
    return f"{uri}: RefusedCheckpoint"  # the store is opened: no commit record there


def _drop_a_run(folder: Path) -> str:
    manifest = _manifest(folder)
    row = next(r for r in manifest["runs"] if r["status"] == "accepted" and r["phase"] == "main")
    manifest["runs"].remove(row)
    _save(folder, manifest)
    for entry in row["artifacts"]:
        (folder / entry["path"]).unlink()
    return f"manifest.json: registered run {row['run_id']} has no row"


def _retrained_weights(folder: Path) -> str:
    """Weights that load but are not the run's: only the re-evaluation can tell."""
    run_id, path = _accepted(folder, "model")
    weights = torch.load(folder / path, weights_only=True)
    torch.save({k: torch.zeros_like(v) for k, v in weights.items()}, folder / path)
    manifest = _manifest(folder)
    row = next(r for r in manifest["runs"] if r["run_id"] == run_id)
    entry = next(a for a in row["artifacts"] if a["kind"] == "model")
    data = (folder / path).read_bytes()
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    _save(folder, manifest)
    return f"{path}: re-evaluates to accuracy"


def _record_disagrees(folder: Path) -> str:
    run_id, _ = _accepted(folder, "model")
    path = folder / "records" / f"{run_id}.json"
    record = json.loads(path.read_text())
    record["status"] = "rejected"
    path.write_text(json.dumps(record))
    return f"records/{run_id}.json: status is 'rejected', manifest.json says 'accepted'"


def _plant_a_credential(folder: Path) -> str:
    with (folder / "REPORT.md").open("a") as handle:
        handle.write(f"\nendpoint https://{PLANTED['AWS_ACCESS_KEY_ID']}@example.com\n")
    return "REPORT.md: holds a credential: an AWS access key id"


def _damage_a_report_figure(folder: Path) -> str:
    """A figure inside REPORT.html that no longer decodes, the manifest's hash made to match:
    only decoding the page's figures can tell."""
    from tests.ablations.report.test_html import damaged_figure

    path = folder / "REPORT.html"
    path.write_text(damaged_figure(path.read_text()))
    manifest = _manifest(folder)
    entry = next(f for f in manifest["files"] if f["path"] == "REPORT.html")
    data = path.read_bytes()
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    _save(folder, manifest)
    return "REPORT.html: figure 1 does not decode as a PNG"


def _flip_a_verdict_in_the_manifest(folder: Path) -> str:
    """A verdict changed in the manifest alone: no file hash covers the manifest itself."""
    manifest = _manifest(folder)
    judgement = manifest["looks"][0]["judgements"][0]
    judgement["verdict"] = "better" if judgement["verdict"] != "better" else "worse"
    _save(folder, manifest)
    return f"manifest.json: look 1, {judgement['variant']}: verdict is"


def _change_a_look_everywhere(folder: Path) -> str:
    """Alpha x10 and an interval narrowed to +/-1e-4, in looks.json and the manifest alike
    (looks.json's hash made to match): only judging the look again from the records tells."""
    looks = json.loads((folder / "looks.json").read_text())
    manifest = _manifest(folder)
    for recorded in (looks["looks"], manifest["looks"]):
        recorded[0]["alpha"] *= 10
        judgement = recorded[0]["judgements"][0]
        middle = judgement["mean_diff"] or 0.0  # a variant decided by its runs has none
        judgement["ci_low"], judgement["ci_high"] = middle - 1e-4, middle + 1e-4
    (folder / "looks.json").write_text(json.dumps(looks))
    data = (folder / "looks.json").read_bytes()
    entry = next(f for f in manifest["files"] if f["path"] == "looks.json")
    entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    _save(folder, manifest)
    return f"looks.json: look 1, {judgement['variant']}: ci_low is"


def _edit_the_threshold_in_plan_yaml(folder: Path) -> str:
    """The registered plan edited (was an internal KeyError: its runs have other ids)."""
    path = folder / "plan.yaml"
    path.write_text(re.sub(r"threshold: [0-9.]+", "threshold: 0.1", path.read_text()))
    return "plan.yaml: hashes to"


def _hashed_by_another_release(folder: Path) -> str:
    """The folder as another release wrote it: plan.yaml unchanged, but the hashes recorded are
    that release's (a new default in its plan model hashes every plan otherwise). Verify
    still fails (the hash is all it can check) and says which release to verify with."""
    manifest = _manifest(folder)
    digest, manifest["plan_hash"] = manifest["plan_hash"], "0" * 64
    manifest["code_version"]["git_commit"] = "f" * 40
    _save(folder, manifest)
    return (
        f"plan.yaml: hashes to {digest[:12]}, manifest.json says {'0' * 64} (written by "
        f"ablate {manifest['code_version']['package']} at commit ffffffffffff, another release"
    )


def _failed_everywhere(folder: Path, error: dict[str, str]) -> str:
    """One accepted run made a failure with `error`, in its record and its row alike."""
    run_id, _ = _accepted(folder, "model")
    path = folder / "records" / f"{run_id}.json"
    record = json.loads(path.read_text())
    record.update(status="failed", error=error)
    path.write_text(json.dumps(record))
    manifest = _manifest(folder)
    for row in manifest["runs"]:
        if row["run_id"] == run_id:
            row.update(status="failed", error=error)
    _save(folder, manifest)
    return f"records/{run_id}.json: failed for the infrastructure's cause"


def _decided_on_a_lost_run(folder: Path) -> str:
    """A campaign decided on a run its store failed (the issue's 90 s outage)."""
    lost = {"type": "StoreError", "message": "checkpoint store s3://b is not usable",
            "cause": "infrastructure"}  # fmt: skip
    return _failed_everywhere(folder, lost) + " (the checkpoint store was unreachable)"


def _decided_on_a_full_disk_by_an_older_release(folder: Path) -> str:
    """An older release recorded a full disk as the workload's failure."""
    full = {"type": "OSError", "message": "[Errno 28] No space left on device: 'metrics/x.csv'",
            "cause": "workload"}  # fmt: skip
    return _failed_everywhere(folder, full) + " (the disk was full)"


def _forge_the_decision_and_rehash(folder: Path) -> str:
    """REPORT.md's decision rewritten and its hash in the manifest made to match: only the
    report built again from the records can tell (`ablations.verify.derived`)."""
    path = folder / "REPORT.md"
    text = re.sub(
        r"\*\*Decision reached\.\*\* .*", "**Decision reached.** Adopt width=8.", path.read_text()
    )
    path.write_text(text)
    manifest = _manifest(folder)
    entry = next(f for f in manifest["files"] if f["path"] == "REPORT.md")
    entry.update(sha256=hashlib.sha256(text.encode()).hexdigest(), bytes=len(text.encode()))
    _save(folder, manifest)
    return "REPORT.md: line 7 is '...Decision reached.** Adopt width=8.', built again from"


def _damage_the_ledger(folder: Path) -> str:
    """100 bytes of ledger.db overwritten with 0xFF (was `internal error: StorageInternalError`)."""
    path = folder / "ledger.db"
    data = bytearray(path.read_bytes())
    data[4096:4196] = b"\xff" * 100
    path.write_bytes(bytes(data))
    return "ledger.db: is damaged ("


TAMPERS: list[Callable[[Path], str]] = [
    _flip_byte,
    _delete,
    _empty,
    _point_uri_elsewhere,
    _point_uri_at_a_missing_step,
    _drop_a_run,
    _retrained_weights,
    _record_disagrees,
    _plant_a_credential,
    _damage_a_report_figure,
    _flip_a_verdict_in_the_manifest,
    _change_a_look_everywhere,
    _edit_the_threshold_in_plan_yaml,
    _hashed_by_another_release,
    _decided_on_a_lost_run,
    _decided_on_a_full_disk_by_an_older_release,
    _forge_the_decision_and_rehash,
    _damage_the_ledger,
]


@pytest.mark.parametrize("tamper", TAMPERS, ids=[t.__name__.strip("_") for t in TAMPERS])
def test_each_tampering_fails_verify_naming_it(
    campaign: Campaign, tmp_path: Path, tamper: Callable[[Path], str]
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(campaign.out, folder)
    expected = tamper(folder)
    lines = [str(p) for p in verify_folder(folder).problems]
    assert any(line.startswith(expected) for line in lines), "\n".join(lines)


def test_the_cli_exits_2_with_one_line_per_problem(
    campaign: Campaign, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ablations.cli import main

    folder = tmp_path / "copy"
    shutil.copytree(campaign.out, folder)
    expected = [_flip_byte(folder), _delete(folder)]
    assert main(["verify", str(folder)]) == 2  # the fresh-process run is the passing test's
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 2, lines
    assert all(any(line.startswith(e) for line in lines) for e in expected), lines
    assert "2 problem(s)" in captured.err


def _edited_json(data: bytes, draw: st.DataObject) -> bytes:
    """One leaf of a JSON document changed (a number, a string, a flag, null, a list)."""
    document = json.loads(data)
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        for key, value in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(value, dict | list) and value:
                walk(value)
            else:
                paths.append((node, key))

    walk(document)
    if not paths:
        return data + b" "
    parent, key = draw.draw(st.sampled_from(paths), label="leaf")
    parent[key] = draw.draw(
        st.one_of(
            st.integers(-3, 10**6), st.floats(allow_nan=False), st.text(max_size=12), st.none(),
            st.booleans(), st.just([]),
        ),
        label="value",
    )  # fmt: skip
    return json.dumps(document).encode()


def _edited_yaml(data: bytes, draw: st.DataObject) -> bytes:
    """One line of plan.yaml (or a YAML text) changed: a value rewritten, or the line dropped."""
    lines = data.decode(errors="replace").splitlines()
    index = draw.draw(st.integers(0, max(0, len(lines) - 1)), label="line")
    if lines and draw.draw(st.booleans(), label="drop"):
        del lines[index]
    elif lines:
        head, sep, _ = lines[index].partition(": ")
        new = draw.draw(st.sampled_from(["0", "-1", "0.8", "[]", "{}", "x", "1e12", "''"]))
        lines[index] = f"{head}{sep or ': '}{new}"
    return ("\n".join(lines) + "\n").encode()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(draw=st.data())
def test_any_edit_of_any_file_verifies_or_is_named_never_an_internal_error(
    campaign: Campaign, draw: st.DataObject
) -> None:
    """Every file of a real output folder, edited as a careless user or a forger would:
    `ablate verify` exits 0, or 2 with each problem on a line `<file>: ...` and the edited
    file among them (or, for manifest.json, the refusal of it); never an internal error."""
    from ablations.cli import main

    files = sorted(p.relative_to(campaign.out).as_posix() for p in campaign.out.rglob("*"))
    files = [f for f in files if (campaign.out / f).is_file()]
    name = draw.draw(st.sampled_from(files), label="file")
    edit = draw.draw(
        st.sampled_from(["truncate", "append", "replace", "flip", "delete", "empty", "structured"]),
        label="edit",
    )
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "copy"
        shutil.copytree(campaign.out, folder)
        path = folder / name
        data = path.read_bytes()
        if edit == "delete":
            path.unlink()
        elif edit == "empty":
            path.write_bytes(b"")
        elif edit == "truncate":
            path.write_bytes(data[: draw.draw(st.integers(0, max(0, len(data) - 1)))])
        elif edit == "append":
            path.write_bytes(data + draw.draw(st.binary(min_size=1, max_size=64)))
        elif edit == "replace":
            path.write_bytes(draw.draw(st.binary(max_size=256)))
        elif edit == "flip":
            at = draw.draw(st.integers(0, max(0, len(data) - 1)))
            path.write_bytes(
                data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :] if data else b"x"
            )
        elif name.endswith(".json"):
            path.write_bytes(_edited_json(data, draw))
        elif name.endswith((".yaml", ".md", ".csv")):
            path.write_bytes(_edited_yaml(data, draw))
        else:
            path.write_bytes(data[::-1])
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["verify", str(folder), "--skip-store"])
    shown = out.getvalue() + err.getvalue()
    assert "internal error" not in shown and "Traceback" not in shown, shown
    assert code in (0, 2), shown
    if code == 0:
        return
    lines = out.getvalue().splitlines()
    if lines:  # the problems: each names its file first
        assert all(re.match(r"^[\w./=-]+(\.\w+)?: \S", line) for line in lines), shown
        assert name in shown or Path(name).name in shown, shown
    else:  # refused whole: a manifest that cannot be read, named
        assert err.getvalue().startswith("error: ") and "manifest.json" in shown, shown
