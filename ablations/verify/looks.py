"""`ablate verify`: every recorded look judged again from the run records, by the campaign's own
code (`ablations.campaign.looks.rejudged_looks`, which calls the `judge_at` that decided it),
and compared with looks.json and the manifest.

A hash catches looks.json edited alone; only judging again catches a verdict, an interval, an
alpha or a look changed consistently in looks.json and the manifest, since the records that
decide them are in the folder (and are checked against the manifest themselves). What
depended on the clock, not on the records (`decided_at`, the variants the budget ended), is
taken as recorded, except that the budget can only end a variant still open.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ablations.analysis.looks import LookRecord
from ablations.campaign.campaign import Campaign
from ablations.campaign.folder import CampaignFolder
from ablations.campaign.looks import rejudged_looks
from ablations.campaign.manifest import Manifest
from ablations.errors import AblationError
from ablations.files.names import LOOKS, MANIFEST
from ablations.plan.model import Plan
from ablations.plan.runs import planned_runs
from ablations.verify.files import FolderProblem

UNJUDGED = ("decided_at", "budget_ended")
"""A look's fields the records do not decide."""
REL_TOLERANCE = 1e-9
"""A number judged again may differ in its last bits on another machine's scipy, never more."""


def reopened(out_dir: Path, plan: Plan, plan_hash: str) -> Campaign | None:
    """The folder's campaign as its registration opened it, for judging it again; None
    without a registration."""
    folder = CampaignFolder(out_dir)
    registration = folder.registration()
    if registration is None:
        return None
    return Campaign(folder, plan, registration, planned_runs(plan, plan_hash))


def check_looks(
    out_dir: Path, plan: Plan, plan_hash: str, manifest: Manifest
) -> list[FolderProblem]:
    """Each look of looks.json and of the manifest against the same look judged again."""
    try:
        campaign = reopened(out_dir, plan, plan_hash)
        if campaign is None:
            return []  # the plan check names the missing registration
        recorded = campaign.looks().looks
        again = rejudged_looks(campaign)
    except (AblationError, OSError, ValueError) as exc:  # an unreadable looks.json or record
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [FolderProblem(LOOKS, f"cannot be judged again from the records: {first}")]
    problems: list[FolderProblem] = []
    for source, looks in ((LOOKS, recorded), (MANIFEST, manifest.looks)):
        if len(looks) != len(again):
            problems.append(
                FolderProblem(source, f"holds {len(looks)} looks, the campaign {len(again)}")
            )
        for mine, judged in zip(looks, again, strict=False):
            problems += _differences(source, mine, judged)
    if again:
        last = again[-1]
        if last.still_open and last.look + 1 < last.looks:
            problems.append(
                FolderProblem(
                    LOOKS,
                    f"ends at look {last.look + 1} of {last.looks} with "
                    f"{', '.join(last.still_open)} still open",
                )
            )
    return problems


def _differences(source: str, mine: LookRecord, judged: LookRecord) -> list[FolderProblem]:
    """Where a recorded look differs from the look judged again (one line per field)."""
    shown = f"look {mine.look + 1}"
    out: list[FolderProblem] = []
    for key in type(mine).model_fields:
        if key in UNJUDGED or key == "judgements":
            continue
        if not same(getattr(mine, key), getattr(judged, key)):
            out.append(
                FolderProblem(
                    source,
                    f"{shown}: {key} is {getattr(mine, key)!r}, the records judge "
                    f"{getattr(judged, key)!r}",
                )
            )
    theirs = {j.variant: j for j in judged.judgements}
    ours = {j.variant: j for j in mine.judgements}
    for variant in sorted(ours.keys() ^ theirs.keys()):
        side = "judges" if variant in ours else "leaves out"
        out.append(FolderProblem(source, f"{shown} {side} {variant}, the records do not"))
    for variant in sorted(ours.keys() & theirs.keys()):
        given, expected = ours[variant].model_dump(), theirs[variant].model_dump()
        for key, value in given.items():
            if not same(value, expected.get(key)):
                out.append(
                    FolderProblem(
                        source,
                        f"{shown}, {variant}: {key} is {value!r}, the records judge "
                        f"{expected.get(key)!r}",
                    )
                )
    decided = {j.variant for j in judged.judgements if j.decided}
    for variant in sorted(set(mine.budget_ended) & decided):
        out.append(
            FolderProblem(source, f"{shown}: the budget ended {variant}, which the look decided")
        )
    return out


def same(given: Any, expected: Any) -> bool:
    if isinstance(given, float) and isinstance(expected, float):
        return math.isclose(given, expected, rel_tol=REL_TOLERANCE, abs_tol=1e-15) or (
            math.isnan(given) and math.isnan(expected)
        )
    if isinstance(given, list) and isinstance(expected, list):
        return len(given) == len(expected) and all(map(same, given, expected))
    return bool(given == expected) and type(given) is type(expected)
