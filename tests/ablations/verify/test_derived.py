"""`ablate verify` builds every derived file again from the records and the registered plan
(`ablations.verify.derived`): a derived file edited with the manifest's hash made to match,
or a derived field of the manifest changed, is named in one line with what differs; the
folder as the results step wrote it passes. A damaged ledger is one line naming it.

The campaign is the in-process one of tests/ablations/campaign/test_campaign.py (made-up
accuracies, every step of the campaign's own code): one per module, each test on a copy.
A real campaign's folder through `ablate verify` is tests/flows/test_output_folder.py's."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml

from ablations.campaign.campaign import Campaign
from ablations.campaign.looks import decide_look, look_runs
from ablations.campaign.manifest import read_manifest
from ablations.campaign.opening import register
from ablations.campaign.steps import (
    execute_run,
    project_campaign,
    recommend_gate,
    record_gate_decision,
    run_preflight,
)
from ablations.errors import LedgerDamaged
from ablations.plan.model import plan_hash
from ablations.results.ledger import damage, open_ledger
from ablations.results.write import write_results
from ablations.verify.derived import check_derived
from ablations.verify.reload import check_ledger
from tests.ablations.campaign.test_campaign import InProcess, sequential_plan


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign run through every step, its results written: width=16 worse, width=128
    equivalent, the control kept."""
    out = tmp_path_factory.mktemp("derived") / "out"
    register(yaml.safe_dump(sequential_plan(), sort_keys=False), out)
    campaign, executor = Campaign.load(out), InProcess()
    project_campaign(campaign, 1)
    run_preflight(campaign, executor)
    for run in campaign.phase("pilot"):
        execute_run(campaign, run.run_id, executor)
    record_gate_decision(campaign, recommend_gate(campaign, 1))
    for look in range(3):
        for run in look_runs(campaign, look):
            execute_run(campaign, run.run_id, executor)
        if not decide_look(campaign, look, 1).still_open:
            break
    write_results(campaign)
    return out


@pytest.fixture
def folder(written: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "out"
    shutil.copytree(written, copy)
    return copy


def _problems(out: Path) -> list[str]:
    plan = Campaign.load(out).plan
    return [str(p) for p in check_derived(out, plan, plan_hash(plan), read_manifest(out))]


def _edit_json(out: Path, name: str, change: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads((out / name).read_text())
    change(data)
    (out / name).write_text(json.dumps(data, indent=2))


def _rehash(out: Path, name: str) -> None:
    """The forger's last step: the manifest's entry for `name` made to match the file."""
    data = (out / name).read_bytes()

    def update(manifest: dict[str, Any]) -> None:
        entry = next(e for e in manifest["files"] if e["path"] == name)
        entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))

    _edit_json(out, "manifest.json", update)


def _report(out: Path) -> str:
    path = out / "REPORT.md"
    text = path.read_text()
    start = text.index("**Decision reached.** ") + len("**Decision reached.** ")
    path.write_text(text[:start] + "Adopt width=128." + text[text.index("\n", start) :])
    _rehash(out, "REPORT.md")
    return "REPORT.md: line 7 is '...Decision reached.** Adopt width=128.', built again from"


def _html(out: Path) -> str:
    path = out / "REPORT.html"
    path.write_text(path.read_text().replace("Keep the control", "Adopt width=128", 1))
    _rehash(out, "REPORT.html")
    return "REPORT.html: line "


def _decision(out: Path) -> str:
    _edit_json(out, "manifest.json", lambda m: m.update(decision_reached="Adopt width=128."))
    return "manifest.json: decision_reached is 'Adopt width=128.', the records give 'Keep the"


def _runs_csv(out: Path) -> str:
    path = out / "runs.csv"
    rows = list(csv.reader(io.StringIO(path.read_text())))
    column = rows[0].index("metric")
    rows[1][column] = str(float(rows[1][column]) + 0.05)
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    path.write_text(text.getvalue())
    _rehash(out, "runs.csv")
    return f"runs.csv: run {rows[1][0]}: metric is '{rows[1][column]}', its record gives"


def _gate(out: Path) -> str:
    for name in ("gate.json", "manifest.json"):
        _edit_json(out, name, lambda g: (g.get("gate") or g).update(decision="trim"))
    _rehash(out, "gate.json")
    return "gate.json: decision is 'trim', but the policy decides 'continue' from the pilot's"


def _gate_drop(out: Path) -> str:
    main = [r for r in read_manifest(out).runs if r.planned.phase == "main"]
    victim = next(r.planned.run_id for r in main if r.planned.variant != "control")
    _edit_json(out, "gate.json", lambda g: g.update(drop=[victim]))
    _rehash(out, "gate.json")
    return f"gate.json: drop is ['{victim}'], but the policy decides [] from the pilot's"


def _gate_answered(out: Path) -> str:
    def answered(gate: dict[str, Any]) -> None:
        gate.update(source="ui", reason="answered in the UI: continue")
        gate["numbers"]["recommended"] = "reframe"

    _edit_json(out, "gate.json", answered)
    _rehash(out, "gate.json")
    return "gate.json: recommended is 'reframe', but the policy decides 'continue'"


def _preflight(out: Path) -> str:
    for name in ("preflight.json", "manifest.json"):
        _edit_json(out, name, lambda p: (p.get("preflight") or p).update(passed=False))
    _rehash(out, "preflight.json")
    return "preflight.json: passed is False, but its checks record no defect"


def _budget(out: Path) -> str:
    _edit_json(out, "manifest.json", lambda m: m["budget"].update(markdown="| cheap | 0 $ |"))
    return "manifest.json: budget.markdown is '| cheap | 0 $ |', the records give"


def _row(out: Path) -> str:
    def later(manifest: dict[str, Any]) -> None:
        manifest["runs"][0]["ended_at"] += 3600.0

    _edit_json(out, "manifest.json", later)
    run_id = read_manifest(out).runs[0].planned.run_id
    return f"manifest.json: run {run_id}: ended_at is "


TAMPERS = [_report, _html, _decision, _runs_csv, _gate, _gate_drop, _gate_answered]
TAMPERS += [_preflight, _budget, _row]


def test_the_folder_as_written_derives_again_exactly(written: Path) -> None:
    assert _problems(written) == []


@pytest.mark.parametrize("tamper", TAMPERS, ids=[t.__name__.strip("_") for t in TAMPERS])
def test_a_derived_file_edited_and_rehashed_is_named_in_one_line(
    folder: Path, tamper: Callable[[Path], str]
) -> None:
    expected = tamper(folder)
    lines = _problems(folder)
    assert any(line.startswith(expected) for line in lines), lines
    assert all("\n" not in line and len(line) < 400 for line in lines), lines


DAMAGE = b"\xff" * 100
"""The issue's damage: 100 bytes of the ledger overwritten with 0xFF."""


def _rows(path: Path) -> list[Any]:
    with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        db.text_factory = bytes
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return [sorted(db.execute(f'SELECT * FROM "{t.decode()}"'), key=repr) for t in tables]


def test_a_damaged_ledger_is_one_line_naming_it(folder: Path) -> None:
    ledger = folder / "ledger.db"
    data = bytearray(ledger.read_bytes())
    data[4096 : 4096 + len(DAMAGE)] = DAMAGE  # the second page's header: a b-tree page
    ledger.write_bytes(bytes(data))
    [line] = [str(p) for p in check_ledger(folder, read_manifest(folder), "ledger.db")]
    assert line.startswith("ledger.db: is damaged (") and "rerun `ablate run`" in line, line
    with pytest.raises(LedgerDamaged, match=r"the ledger .*ledger\.db is damaged \("):
        open_ledger(folder, "c")  # the results step of a rerun: one line, exit 1


def test_any_damage_is_named_or_changes_no_row(written: Path, tmp_path: Path) -> None:
    """100 bytes of 0xFF at every 512th byte: SQLite names the damage, or the bytes were
    free space and every row reads back as it was (a changed value never passes)."""
    source = written / "ledger.db"
    before, data = _rows(source), source.read_bytes()
    named = 0
    for offset in range(0, len(data), 512):
        copy = tmp_path / f"{offset}.db"
        copy.write_bytes(data[:offset] + DAMAGE + data[offset + len(DAMAGE) :])
        if damage(copy) is not None:
            named += 1
        else:
            assert _rows(copy) == before, offset
    assert named >= len(data) // 4096 - 1  # at least each used page's header
