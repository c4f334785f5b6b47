"""RELOAD.md from a manifest and a plan: the run it picks, the sections it holds, and that its
commands work as written in a tiny folder built here (a real digits model, a `file://`
checkpoint, an Optuna ledger).

tests/flows/test_output_folder.py runs every block of a real campaign's RELOAD.md (an S3
store); these run the Python of each block in this process (fast) for the other stores.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch

from ablations.campaign.manifest import FileEntry, Manifest, ManifestRun
from ablations.plan.model import Plan, parse_plan
from ablations.results.ledger import LEDGER_URL
from ablations.results.reload_doc import reload_markdown
from ablations.results.write import RUN_COLUMNS, _flat
from ablations.run.workload import load_workload
from ablations.training.driver import seed_everything
from ablations.verify.folder import DEFAULT_TOLERANCE
from tests.flows.conftest import TINY_PLAN


def _plan(store: str, endpoint_url: str | None = None) -> Plan:
    data: dict[str, Any] = copy.deepcopy(TINY_PLAN)
    data["checkpoint"] = {"store": store, "interval": {"steps": 20}}
    if endpoint_url:
        data["checkpoint"]["endpoint_url"] = endpoint_url
    return parse_plan(data)


def _row(run_id: str, **fields: Any) -> ManifestRun:
    base: dict[str, Any] = {
        **{"run_id": run_id, "variant": "control", "factor": None, "level": None, "seed": 0},
        **{"category": "essential", "phase": "main", "steps": 20, "status": "accepted"},
        "params": {"width": 8, "depth": 1, "dropout": 0.0, "lr": 0.01, "keep_pixels": 64},
    }
    return ManifestRun.model_validate({**base, **fields})


def _manifest(runs: list[ManifestRun]) -> Manifest:
    return Manifest(
        campaign_id="tiny", plan_hash="0123456789abcdef", runs=runs,
        ledger_url=LEDGER_URL, ledger_study="tiny", ledger_file="ledger.db",
    )  # fmt: skip


def _blocks(markdown: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", markdown, flags=re.DOTALL)


def _python_of(block: str) -> str:
    """The Python a block runs: `python -c "..."` or `python - <<'EOF' ... EOF`."""
    heredoc = re.fullmatch(r"python - <<'EOF'\n(.*)\nEOF", block, flags=re.DOTALL)
    if heredoc:
        return heredoc.group(1)
    words = shlex.split(block)
    assert words[:2] == ["python", "-c"] and len(words) == 3, block
    return words[2]


def _entry(out: Path, kind: str, relative: str) -> FileEntry:
    data = (out / relative).read_bytes()
    return FileEntry(
        kind=kind, path=relative, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data)
    )


def _folder(out: Path, plan: Plan) -> Manifest:
    """A tiny output folder whose one accepted run has a real model, metrics and checkpoint."""
    import optuna

    run_id = "width-8-s0"
    params = {"width": 8, "depth": 1, "dropout": 0.0, "lr": 0.01, "keep_pixels": 64}
    seed_everything(0)
    workload = load_workload(plan.workload.entry).build(
        params, seed=0, device=torch.device("cpu"), steps=20
    )
    metric = workload.evaluate().metrics[plan.metric.name]
    for folder in ("models", "metrics", "predictions"):
        (out / folder).mkdir(parents=True)
    torch.save(workload.model.state_dict(), out / "models" / f"{run_id}.pt")
    pd.DataFrame({"step": [1, 2], "loss": [2.3, 2.2]}).to_csv(
        out / "metrics" / f"{run_id}.steps.csv", index=False
    )
    pd.DataFrame({"step": [20], plan.metric.name: [metric]}).to_csv(
        out / "metrics" / f"{run_id}.evals.csv", index=False
    )
    pd.DataFrame({"input_id": [0], "label": [3], "predicted": [3]}).to_csv(
        out / "predictions" / f"{run_id}.csv", index=False
    )
    step = out / "ckpt" / "tiny" / run_id / "step-00000020"
    step.mkdir(parents=True)
    torch.save(workload.model.state_dict(), step / "model.pt")
    torch.save({"step": 20, "rng": torch.zeros(3)}, step / "state.pt")
    artifacts = [
        _entry(out, "model", f"models/{run_id}.pt"),
        _entry(out, "steps", f"metrics/{run_id}.steps.csv"),
        _entry(out, "evals", f"metrics/{run_id}.evals.csv"),
        _entry(out, "predictions", f"predictions/{run_id}.csv"),
    ]
    row = _row(
        run_id,
        params=params,
        metrics={plan.metric.name: metric},
        checkpoint={"uri": f"file://ckpt/tiny/{run_id}/step-00000020"},
        artifacts=artifacts,
    )
    manifest = _manifest([_row("pilot-s0", phase="pilot"), row])
    (out / "manifest.json").write_text(manifest.model_dump_json(indent=2))
    data = [_flat(r.model_dump(mode="json"), plan.metric.name) for r in manifest.runs]
    pd.DataFrame(data, columns=RUN_COLUMNS).to_csv(out / "runs.csv", index=False)
    study = optuna.create_study(study_name="tiny", storage=f"sqlite:///{out / 'ledger.db'}")
    study.add_trial(optuna.trial.create_trial(value=metric, user_attrs={"run_id": run_id}))
    return manifest


def test_every_command_works_in_a_folder_with_a_relative_file_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan("file://./ckpt")
    manifest = _folder(tmp_path, plan)
    markdown = reload_markdown(manifest, plan)
    blocks = _blocks(markdown)
    assert len(blocks) == 6  # runs.csv, manifest, ledger, per-run files, model, checkpoint
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(_python_of(block), "<RELOAD.md>", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "width-8-s0: accuracy" in out and "re-evaluated" in out
    assert "tensors; step 20 of the run's training state" in out
    assert "tiny 0123456789ab None 2 runs" in out  # the manifest's one-liner


def test_the_example_is_an_accepted_main_run_and_every_file_it_names_exists(
    tmp_path: Path,
) -> None:
    plan = _plan("file://./ckpt")
    manifest = _folder(tmp_path, plan)
    markdown = reload_markdown(manifest, plan)
    assert "use run `width-8-s0` (control, seed 0)" in markdown  # not the pilot listed first
    named = set(re.findall(r"'((?:models|metrics|predictions)/[^']+)'", markdown))
    named |= set(re.findall(r'"((?:models|metrics|predictions)/[^"]+)"', markdown))
    assert named == {e.path for e in manifest.runs[1].run_file_entries}
    assert all((tmp_path / path).is_file() for path in named)
    assert f"within {DEFAULT_TOLERANCE:g}" in markdown


def test_a_pilot_is_the_example_only_when_no_main_run_was_accepted() -> None:
    plan = _plan("memory://x")
    runs = [
        _row("main-s0", status="rejected"),
        _row("pilot-s0", phase="pilot"),
        _row("main-s1", status="pending"),
    ]
    assert "use run `pilot-s0`" in reload_markdown(_manifest(runs), plan)


def test_no_accepted_run_leaves_only_the_tables() -> None:
    plan = _plan("memory://x")
    runs = [_row("main-s0", status="rejected"), _row("main-s1", status="failed")]
    markdown = reload_markdown(_manifest(runs), plan)
    assert "No run was accepted: there is no final model to re-evaluate." in markdown
    assert len(_blocks(markdown)) == 3 and "torch.load" not in markdown


def test_sections_follow_what_the_run_has() -> None:
    """No artifacts and no checkpoint: no per-run, model or checkpoint section."""
    markdown = reload_markdown(_manifest([_row("main-s0")]), _plan("memory://x"))
    assert "use run `main-s0`" in markdown
    for heading in ("## Per-run", "## A run's final model", "## A run's checkpoint"):
        assert heading not in markdown
    assert len(_blocks(markdown)) == 3


def test_a_memory_store_says_it_cannot_be_reloaded() -> None:
    row = _row("main-s0", checkpoint={"uri": "memory://x/tiny/main-s0/step-00000020"})
    markdown = reload_markdown(_manifest([row]), _plan("memory://x"))
    assert "cannot be reloaded from another one" in markdown
    assert "fsspec" not in markdown and len(_blocks(markdown)) == 3


def test_an_s3_store_names_its_endpoint_and_credentials() -> None:
    endpoint = "http://127.0.0.1:9000"
    uri = "s3://bucket/p/tiny/main-s0/step-00000020"
    row = _row("main-s0", checkpoint={"uri": uri})
    markdown = reload_markdown(_manifest([row]), _plan("s3://bucket/p", endpoint))
    assert "Credentials come from the environment" in markdown
    script = _python_of(_blocks(markdown)[-1])
    compile(script, "<RELOAD.md>", "exec")
    assert f"URI = {json.dumps(uri)}" in script
    assert script.count(f', endpoint_url="{endpoint}")') == 2  # model.pt and state.pt
    plain = reload_markdown(_manifest([row]), _plan("s3://bucket/p"))
    assert "endpoint_url" not in _python_of(_blocks(plain)[-1])


def test_every_pasted_path_is_quoted_for_the_shell_and_for_python(tmp_path: Path) -> None:
    plan = _plan("file://./ckpt")
    hostile = "x'; touch PWNED; echo '$(touch PWNED2)`touch PWNED3`\"\n"
    run = _row(
        "width-8-s0",
        metrics={"accuracy": 0.9},
        checkpoint={"uri": f"file://ckpt/{hostile}"},
        artifacts=[
            FileEntry(kind=kind, path=f"metrics/{hostile}.csv", sha256="0" * 64, bytes=1)
            for kind in ("steps", "evals", "model")
        ],
    )
    manifest = _manifest([run]).model_copy(update={"ledger_url": f"sqlite:///{hostile}"})
    for block in _blocks(reload_markdown(manifest, plan)):
        code = _python_of(block)  # one shell word, or a quoted heredoc: nothing expands
        compile(code, "<RELOAD.md>", "exec")  # and the path is a literal, not code
        if block.startswith("python -c"):
            assert shlex.split(block)[2] == code
        for value in (f"metrics/{hostile}.csv", f"sqlite:///{hostile}"):
            assert hostile not in code or repr(value) in code or json.dumps(value) in code
