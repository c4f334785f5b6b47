"""`ablate verify`: every derived file built again from what it derives from, and compared.

A hash in manifest.json catches a file edited alone; a forger who edits a derived file and
rehashes the manifest passes every hash. What cannot be forged that way is the derivation:
the campaign's own code builds each derived file again from the folder's sources and the
result must be the file, naming the file and the first difference in one line.

The sources: the completion records (`records/`, themselves checked against the manifest
and the re-evaluated models), the registered plan, registration.json, projection.json,
looks.json (judged again from the records by `ablations.verify.looks`), preflight.json's
checks, and gate.json where a person decided it. Derived, and compared here:

- manifest.json: every field the results step derives (each row beyond what the record checks
  compare, preflight, gate, budget, planned vs realized, `decision_reached`), not the
  writing machine's (`code_version` but its workload, `environment`) nor `files` (hashes);
- runs.csv, REPORT.md and REPORT.html, built again in memory (the plots as drawn);
- preflight.json: `passed` is what its own checks say;
- gate.json: the registered policy's decision from the pilot's records and preflight (the
  same elapsed time and slots), for a decision the policy took (`auto`, `timeout`); for a
  person's answer, the recommendation it names; the trimmed runs' records are its `drop`.
"""

from __future__ import annotations

import csv
import io
import re
from itertools import zip_longest
from pathlib import Path
from typing import Any

from ablations.campaign.campaign import Campaign
from ablations.campaign.gate import GateDecision, auto_decision
from ablations.campaign.manifest import Manifest
from ablations.errors import AblationError, short_repr
from ablations.files.names import (
    GATE,
    MANIFEST,
    PLOTS,
    PREFLIGHT,
    REGISTRATION,
    REPORT,
    REPORT_HTML,
    RUNS_CSV,
)
from ablations.plan.model import Plan
from ablations.plan.variants import CONTROL
from ablations.run.records import PreflightReport, RunRecord
from ablations.verify.files import FolderProblem
from ablations.verify.looks import reopened, same

DERIVED_FIELDS = (
    *("ledger_url", "ledger_study", "ledger_file", "question", "checkpoint_store"),
    *("preflight", "gate", "budget", "planned_vs_realized", "planned_vs_realized_markdown"),
)
"""Top-level manifest fields built from the sources (the looks are judged by `verify.looks`)."""
ROW_CHECKED_ELSEWHERE = frozenset(
    {
        *("variant", "seed", "category", "phase", "steps", "start_step", "params"),  # the plan
        *("status", "stop", "error", "steps_done", "metrics", "device", "started_at"),  # record
        *("export_sha256", "checkpoint", "artifacts"),  # record, URI and file checks
    }
)
"""Row fields `verify.folder` compares already: one problem per difference, not two."""
SHOWN = 60
"""Characters of a differing line shown, from a little before where it differs."""
MOST_CELLS = 5
"""Differing runs.csv cells named one per line; the rest counted."""
NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def check_derived(
    out_dir: Path, plan: Plan, plan_hash: str, manifest: Manifest
) -> list[FolderProblem]:
    """Each derived file and manifest field against the same built again from the sources."""
    from ablations.results.write import derive_manifest

    try:
        campaign = reopened(out_dir, plan, plan_hash)
        if campaign is None:
            return []  # the plan check names the missing registration
        records = campaign.records()
        expected = derive_manifest(campaign, records, campaign.looks())
    except (AblationError, OSError, ValueError) as exc:  # an unreadable record or state file
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [FolderProblem(MANIFEST, f"cannot be derived again from the records: {first}")]
    problems = _preflight(expected.preflight)
    if expected.gate is not None:
        problems += _gate(campaign, records, expected.gate)
    problems += _manifest(manifest, expected, campaign.registration)
    problems += _files(out_dir, plan, manifest, expected)
    return problems


def _preflight(report: PreflightReport | None) -> list[FolderProblem]:
    """`passed` is what the report's own checks say (a data problem, a restart, a crash)."""
    if report is None:
        return []
    clean = not report.data_problems and report.restart is None and report.error is None
    if report.passed == clean:
        return []
    found = "no defect" if clean else "a defect"
    return [FolderProblem(PREFLIGHT, f"passed is {report.passed}, but its checks record {found}")]


def _gate(
    campaign: Campaign, records: dict[str, RunRecord], gate: GateDecision
) -> list[FolderProblem]:
    """The policy's decision again, with the slots and elapsed time it recorded; the trimmed
    records are the gate's drop list."""
    pilot = [records[r.run_id] for r in campaign.phase("pilot") if r.run_id in records]
    main = campaign.phase("main")
    numbers = gate.numbers
    slots, elapsed = numbers.get("slots", 1), numbers.get("elapsed_hours", 0.0)
    policy = auto_decision(
        campaign.plan,
        pilot,
        campaign.preflight() or PreflightReport(passed=False),
        main,
        slots=int(slots) if isinstance(slots, int | float) else 1,
        elapsed_hours=float(elapsed) if isinstance(elapsed, int | float) else 0.0,
    )
    problems = []
    if gate.source == "ui":
        problems += _answered(gate, policy, main)
    else:
        by = "the policy" if gate.source == "auto" else "the policy after the UI's timeout"
        reason = gate.reason
        if gate.source == "timeout":
            reason = reason.partition("applied the policy: ")[2]
        for key, mine, theirs in (
            ("decision", gate.decision, policy.decision),
            ("drop", sorted(gate.drop), sorted(policy.drop)),
            # its numbers depend on the clock (rounded in `numbers`): compared as words
            ("reason", NUMBERS.sub("#", reason), NUMBERS.sub("#", policy.reason)),
        ):
            if mine != theirs:
                shown = (gate.reason, policy.reason) if key == "reason" else (mine, theirs)
                problems.append(
                    FolderProblem(
                        GATE,
                        f"{key} is {short_repr(shown[0])}, but {by} decides "
                        f"{short_repr(shown[1])} from the pilot's records",
                    )
                )
                break
    trimmed = sorted(run_id for run_id, r in records.items() if r.status == "trimmed")
    if trimmed != sorted(gate.drop):
        problems.append(
            FolderProblem(GATE, f"drops {sorted(gate.drop)}, but the records trim {trimmed}")
        )
    return problems


def _answered(gate: GateDecision, policy: GateDecision, main: list[Any]) -> list[FolderProblem]:
    """A person's answer: what it says it was shown is the policy's, and it only drops
    registered main runs of variants (none when it continues)."""
    problems = []
    recommended = gate.numbers.get("recommended")
    if recommended is not None and recommended != policy.decision:
        problems.append(
            FolderProblem(
                GATE,
                f"recommended is {recommended!r}, but the policy decides {policy.decision!r} "
                "from the pilot's records",
            )
        )
    if not gate.reason.startswith(f"answered in the UI: {gate.decision}"):
        problems.append(
            FolderProblem(GATE, f"decision is {gate.decision!r}, but its reason answers otherwise")
        )
    droppable = {r.run_id for r in main if r.variant != CONTROL}
    if gate.decision == "continue" and gate.drop:
        problems.append(FolderProblem(GATE, f"continues, but drops {sorted(gate.drop)}"))
    elif set(gate.drop) - droppable:
        problems.append(
            FolderProblem(GATE, f"drops {sorted(set(gate.drop) - droppable)}, runs no one may drop")
        )
    return problems


def _manifest(manifest: Manifest, expected: Manifest, registration: Any) -> list[FolderProblem]:
    """The manifest's derived fields and rows against the ones built again."""
    problems = []
    given, built = manifest.model_dump(mode="json"), expected.model_dump(mode="json")
    sources = {"preflight": PREFLIGHT, "gate": GATE}
    for key in DERIVED_FIELDS:
        found = _difference(given.get(key), built.get(key), key)
        if found is not None:
            where, mine, theirs = found
            source = f"{sources[key]} says" if key in sources else "the records give"
            problems.append(_differs(MANIFEST, where, mine, theirs, source))
    workload = manifest.code_version.workload if manifest.code_version else None
    if workload != registration.code:
        problems.append(
            FolderProblem(
                MANIFEST,
                f"code_version.workload is not the code {REGISTRATION} registered "
                f"({short_repr(workload.line() if workload else None)})",
            )
        )
    rows = {row.planned.run_id: row for row in manifest.runs}
    for row in expected.runs:
        mine = rows.get(row.planned.run_id)
        if mine is None:
            continue  # a missing row is the registered runs' check
        theirs = row.model_dump(mode="json")
        ours = mine.model_dump(mode="json")
        for key in sorted((theirs.keys() | ours.keys()) - ROW_CHECKED_ELSEWHERE):
            found = _difference(ours.get(key), theirs.get(key), key)
            if found is not None:
                where, a, b = found
                problems.append(
                    _differs(
                        MANIFEST, f"run {row.planned.run_id}: {where}", a, b, "its record gives"
                    )
                )
    return problems


def _files(
    out_dir: Path, plan: Plan, manifest: Manifest, expected: Manifest
) -> list[FolderProblem]:
    """runs.csv, REPORT.md, REPORT.html and `decision_reached` as the results step builds them."""
    from ablations.report.decision import decision_reached
    from ablations.report.from_folder import manifest_inputs
    from ablations.report.html_page import render_html
    from ablations.report.markdown import render_report
    from ablations.results.write import runs_csv

    problems = []
    text = _text(out_dir / RUNS_CSV)
    if text is not None:
        problems += _csv_differences(text, runs_csv(expected.runs, plan.metric.name))
    # the report names the code that wrote the folder: the writer's release, not this one
    built = expected.model_copy(update={"code_version": manifest.code_version})
    gate = built.gate
    try:
        inputs = manifest_inputs(out_dir, plan, built, gate_source=gate.source if gate else None)
        decision = decision_reached(inputs)
    except Exception as exc:  # a run file the report reads is damaged (pandas raises many
        # kinds): the file checks name it; the report cannot be built again to compare
        first = str(exc).splitlines()[0] if str(exc) else ""
        why = f"{type(exc).__name__}: {first}"
        return [*problems, FolderProblem(REPORT, f"cannot be built again from the folder: {why}")]
    if manifest.decision_reached != decision:
        problems.append(
            _differs(
                MANIFEST,
                "decision_reached",
                manifest.decision_reached,
                decision,
                "the records give",
            )
        )
    drawn = [name for name in PLOTS if (out_dir / name).is_file()]
    markdown = render_report(inputs, drawn)
    for name, rebuilt in (
        (REPORT, lambda: markdown),
        (REPORT_HTML, lambda: render_html(markdown, inputs, out_dir)),
    ):
        text = _text(out_dir / name)
        if text is not None:
            problem = _text_difference(name, text, rebuilt())
            if problem is not None:
                problems.append(problem)
    return problems


def _text(path: Path) -> str | None:
    """The file's text; None when it is missing, empty or not UTF-8 (the file checks say so)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def _difference(given: Any, expected: Any, where: str) -> tuple[str, Any, Any] | None:
    """The first place two JSON values differ: (its path, the given value, the expected)."""
    if isinstance(given, dict) and isinstance(expected, dict):
        for key in sorted(given.keys() | expected.keys(), key=str):
            found = _difference(given.get(key), expected.get(key), f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(given, list) and isinstance(expected, list) and len(given) == len(expected):
        for index, (mine, theirs) in enumerate(zip(given, expected, strict=True)):
            found = _difference(mine, theirs, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    return None if same(given, expected) else (where, given, expected)


def _differs(file: str, where: str, given: Any, expected: Any, source: str) -> FolderProblem:
    if isinstance(given, str) and isinstance(expected, str):
        mine, theirs = _parted(given, expected)
    else:
        mine, theirs = short_repr(given), short_repr(expected)
    return FolderProblem(file, f"{where} is {mine}, {source} {theirs}")


def _parted(given: str | None, expected: str | None) -> tuple[str, str]:
    """Both texts shown from a little before the column where they part (None: absent)."""
    column = 0
    if given is not None and expected is not None:
        while column < min(len(given), len(expected)) and given[column] == expected[column]:
            column += 1
    start = max(0, column - SHOWN // 3)

    def shown(text: str | None) -> str:
        if text is None:
            return "absent"
        cut = text[start : start + SHOWN]
        return repr(("..." if start else "") + cut + ("..." if len(text) > start + SHOWN else ""))

    return shown(given), shown(expected)


def _text_difference(name: str, given: str, expected: str) -> FolderProblem | None:
    """The first line where `given` parts from `expected`, and how many lines differ."""
    if given == expected:
        return None
    pairs = list(zip_longest(given.splitlines(), expected.splitlines()))
    number, (mine, theirs) = next((n, p) for n, p in enumerate(pairs, 1) if p[0] != p[1])
    differing = sum(1 for a, b in pairs if a != b)
    shown = _parted(mine, theirs)
    return FolderProblem(
        name,
        f"line {number} is {shown[0]}, built again from the records it is {shown[1]} "
        f"({differing} of {len(pairs)} lines differ)",
    )


def _csv_differences(given: str, expected: str) -> list[FolderProblem]:
    """runs.csv against the rows built again: by run id and column, the first few cells."""
    mine, theirs = _table(given), _table(expected)
    if mine is None:
        return [FolderProblem(RUNS_CSV, "does not parse as CSV")]
    assert theirs is not None  # the results step's own output
    (columns, rows), (want, built) = mine, theirs
    if columns != want:
        return [
            FolderProblem(
                RUNS_CSV,
                f"columns are {short_repr(columns)}, the results step writes {short_repr(want)}",
            )
        ]
    problems = []
    for run_id in sorted(built.keys() - rows.keys()):
        problems.append(FolderProblem(RUNS_CSV, f"has no row for run {run_id}"))
    for run_id in sorted(rows.keys() - built.keys()):
        problems.append(
            FolderProblem(RUNS_CSV, f"has run {run_id}, which the plan does not register")
        )
    cells = [
        (run_id, column, rows[run_id][column], built[run_id][column])
        for run_id in sorted(rows.keys() & built.keys())
        for column in want
        if rows[run_id][column] != built[run_id][column]
    ]
    for run_id, column, a, b in cells[:MOST_CELLS]:
        problems.append(_differs(RUNS_CSV, f"run {run_id}: {column}", a, b, "its record gives"))
    if len(cells) > MOST_CELLS:
        problems.append(
            FolderProblem(
                RUNS_CSV, f"and {len(cells) - MOST_CELLS} more cells differ from the records"
            )
        )
    return problems


def _table(text: str) -> tuple[list[str], dict[str, dict[str, str]]] | None:
    """(columns, row by run id) of a CSV text, every cell a string; None if it is no table."""
    try:
        lines = list(csv.reader(io.StringIO(text)))
    except csv.Error:
        return None
    if not lines or "run_id" not in lines[0]:
        return None
    columns = lines[0]
    key = columns.index("run_id")
    rows: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        if len(line) == len(columns):
            rows[line[key]] = dict(zip(columns, line, strict=True))
    return columns, rows
