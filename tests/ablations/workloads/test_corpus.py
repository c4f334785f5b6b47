"""The built-in corpus is the same bytes on every machine, and other bytes are refused.

charlm and the LoRA recipe read the host's standard library before: on the card's Python 3.12,
`corpus_bytes=300000` selected 13 training and no held-out file. Two fake hosts here have
different standard libraries (what `sysconfig` says, and what lies there); the workload's
training and held-out bytes are identical on both, and are the shipped corpus's."""

from __future__ import annotations

import hashlib
import io
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from ablations.errors import DataError, PlanError
from ablations.plan.io import load_plan
from ablations.plan.model import parse_plan, plan_hash
from ablations.preflight.data_check import check_data
from ablations.run.records import RunSpec
from ablations.training.driver import execute, seed_everything
from ablations.workloads import corpus
from ablations.workloads.charlm import CharLMWorkload
from tests.conftest import ROOT
from tests.specs import bare_spec

TINY: dict[str, Any] = {"n_layer": 1, "n_embd": 16, "n_head": 2, "block_size": 16,
                        "batch_size": 4, "corpus_bytes": 300_000, "eval_bytes": 1024}  # fmt: skip
CHARLM = "ablations.workloads.charlm:CharLMWorkload"


@pytest.fixture(autouse=True)
def fresh_corpus() -> Iterator[None]:
    """Each test reads the corpus as a new process would (and leaves no altered copy cached)."""
    corpus.corpus_files.cache_clear()
    corpus.load_corpus.cache_clear()
    yield
    corpus.corpus_files.cache_clear()
    corpus.load_corpus.cache_clear()


def fake_host(root: Path, files: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine whose standard library is `files` under `root` (sysconfig points there)."""
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    paths = {**sysconfig.get_paths(), "stdlib": str(root), "platstdlib": str(root)}
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)


def bytes_seen(params: dict[str, Any]) -> tuple[bytes, bytes, str]:
    """The training stream, the held-out stream and the digest a charlm run reads."""
    seed_everything(0)
    workload = CharLMWorkload.build(params, seed=0, device=torch.device("cpu"), steps=2)
    return (
        workload.train_data.numpy().tobytes(),
        workload.held_data.numpy().tobytes(),
        workload.data_sha256(),
    )


def test_two_hosts_train_and_evaluate_on_identical_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_host(
        tmp_path / "a" / "lib" / "python3.12",
        {"__future__.py": b"x = 1\n" * 50_000, "abc.py": b"class A: pass\n" * 9_000},
        monkeypatch,
    )
    on_a = bytes_seen(TINY)
    corpus.corpus_files.cache_clear()
    corpus.load_corpus.cache_clear()
    fake_host(
        tmp_path / "b" / "lib" / "python3.13",
        {"zz/only.py": b"print('b')\n" * 40_000, "__init__.py": b""},
        monkeypatch,
    )
    on_b = bytes_seen(TINY)
    assert on_a == on_b
    train, heldout, digest = on_a
    selected = corpus.load_corpus(300_000)
    assert train == b"\0".join(data for _, data in selected.train)  # the shipped files
    assert heldout == b"\0".join(data for _, data in selected.heldout)[: 1024 + 1]
    assert len(heldout) == 1025 and digest == selected.sha256
    assert b"print('b')" not in train + heldout and b"class A: pass" not in train + heldout


def test_the_corpus_is_the_declared_file_and_every_selection_splits() -> None:
    files = corpus.corpus_files()
    assert [name for name, _ in files] == sorted(name for name, _ in files)
    assert sum(len(data) for _, data in files) == 1_992_725 and len(files) == 149
    for cap in (120_000, 300_000, 400_000, corpus.CORPUS_BYTES):  # the tests' and recipes'
        selected = corpus.load_corpus(cap)
        assert selected.train and selected.heldout, cap


def test_the_recipes_registered_digest_is_what_their_runs_read() -> None:
    plan = load_plan(ROOT / "ablations" / "recipes" / "charlm.yaml")
    cap = int(plan.workload.params["corpus_bytes"])
    assert plan.workload.data_sha256 == corpus.load_corpus(cap).sha256


def test_a_damaged_corpus_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = (ROOT / "ablations" / "workloads" / "data" / corpus.CORPUS_FILE).read_bytes()
    altered = bytearray(shipped)
    altered[len(altered) // 2] ^= 1
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / corpus.CORPUS_FILE).write_bytes(bytes(altered))
    monkeypatch.setattr(corpus.resources, "files", lambda package: tmp_path)
    with pytest.raises(DataError) as raised:
        corpus.load_corpus(300_000)
    message = str(raised.value)
    assert "\n" not in message
    assert hashlib.sha256(bytes(altered)).hexdigest() in message
    assert corpus.CORPUS_SHA256 in message and "reinstall" in message


def spec(**fields: Any) -> RunSpec:
    base: dict[str, Any] = dict(
        run_id="corpus-s0", campaign_id="c", plan_hash="0" * 64, variant="control",
        category="essential", phase="main", seed=0, params=TINY, steps=2, eval_every=2,
        entry=CHARLM, metric="val_loss", direction="minimize", threshold=100.0,
    )  # fmt: skip
    return bare_spec(**{**base, **fields})


def test_the_data_check_and_every_run_refuse_another_digest() -> None:
    seed_everything(0)
    workload = CharLMWorkload.build(TINY, seed=0, device=torch.device("cpu"), steps=2)
    found = workload.data_sha256()
    assert check_data(workload, None, found) == []
    problems = [str(p) for p in check_data(workload, None, "0" * 64)]
    assert len(problems) == 1 and "\n" not in problems[0]
    assert problems[0].startswith("data_sha256: ") and found in problems[0]
    refused = execute(spec(data_sha256="0" * 64))
    assert refused.status == "failed" and refused.steps_done == 0
    assert refused.error is not None and refused.error.type == "DataError"
    assert found in refused.error.message
    assert execute(spec(data_sha256=found)).status == "accepted"


def test_the_plan_registers_a_digest_and_keeps_older_hashes(demo_data: dict[str, Any]) -> None:
    before = plan_hash(parse_plan(demo_data))
    assert "data_sha256" not in parse_plan(demo_data).model_dump()["workload"]
    registered = parse_plan({**demo_data, "workload": {**demo_data["workload"],
                                                       "data_sha256": "a" * 64}})  # fmt: skip
    assert plan_hash(registered) != before
    for bad, why in (("A" * 64, "64 lowercase hexadecimal"), ("abc", "64 lowercase")):
        with pytest.raises(PlanError, match=why):
            parse_plan({**demo_data, "workload": {**demo_data["workload"], "data_sha256": bad}})
    hf = {"hf_trainer": "ablations.workloads.lora:make_trainer", "data_sha256": "a" * 64}
    with pytest.raises(PlanError, match="reads its own data"):
        parse_plan({**demo_data, "workload": hf})


def test_the_schema_documents_the_digest() -> None:
    from ablations.plan.model import Plan

    schema = yaml.safe_dump(Plan.model_json_schema())
    assert "The sha256 of the data every run must read" in schema
    assert io.StringIO(schema)  # readable as YAML text: `ablate schema` prints it
