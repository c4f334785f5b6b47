"""Opening a campaign: the plan admitted into its output folder, then registered and loaded,
from one parse.

    admission = admit(text, source, out_dir)   # parsed, checked, the folder and the code checked
    campaign = open_campaign(admission)        # holding the folder's lock: registered, loaded

`admit` is everything a person can get wrong, checked before anything starts (`ablate run`
before Prefect's server, a flow from the UI in its own body, so that bad input ends it with one
line, `one_line`, not a traceback from a task): the plan parsed once, its pilot problems, the
caller's checks (the workload's modules, a served campaign's boundary), the user's code hashed
once, the folder's registration compared. `open_campaign` then registers a new campaign
(plan.yaml is the admitted text byte for byte, then registration.json) and builds the
`Campaign` from the admitted plan: plan.yaml is never parsed back in this process. Under the
lock it reads registration.json again (small JSON, not the plan): another run may have
registered the folder between the admission and the lock.

A process that did not admit the plan (the results worker) loads the campaign from its folder
(`Campaign.load`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ablations.campaign.campaign import Campaign
from ablations.campaign.code import WorkloadCode, changes, workload_code
from ablations.campaign.folder import CampaignFolder, Registration
from ablations.campaign.state import refuse_planted_links, remove_leftover_temporaries
from ablations.errors import (
    AblationError,
    CampaignConflictError,
    InfrastructureError,
    InputError,
    PlanError,
)
from ablations.files.names import LOCK, PLAN, RECORDS, REGISTRATION
from ablations.plan.io import (
    WorkloadCheck,
    parse_yaml,
    plan_from_text,
    read_plan_text,
    workload_problems,
)
from ablations.plan.io import plan_text_of as bounded_text
from ablations.plan.model import Plan, plan_hash
from ablations.plan.runs import planned_runs
from ablations.process.crash_points import AFTER_PLAN, crash_point
from ablations.security.credentials import redact

NO_PLAN = "no plan given: fill in plan_path (a YAML file on the serving machine) or plan_yaml"


@dataclass(frozen=True)
class Admission:
    """A plan admitted into an output folder: parsed once, its text kept as given (what
    plan.yaml will hold byte for byte), the folder checked once, the user's code hashed once."""

    plan: Plan
    text: str
    source: str
    """Where the text came from (a path, `plan_yaml`): named in every error about it."""
    out_dir: Path
    """The output folder, resolved."""
    plan_hash: str
    code: WorkloadCode | None
    """The user's code, hashed (`ablations.campaign.code`); None for a built-in workload."""
    known: Registration | None
    """The folder's registration when it holds this campaign already (a rerun)."""


def admit(
    text: str,
    source: str,
    out_dir: Path | None = None,
    *,
    workload: WorkloadCheck = "skip",
    vet: Callable[[Plan], None] | None = None,
) -> Admission:
    """The plan parsed from `text` and admitted into `out_dir` (None: `runs/<campaign id>`,
    what `ablate run` defaults to), in this order: `vet` (the caller's own refusal, e.g. a
    served campaign's boundary: before any of the user's files is read), the pilot's problems
    with the workload's modules (`workload`: `import` or `find` them, or `skip`), as one
    `PlanError`; then the user's code hashed and the folder checked (`existing_registration`,
    and no link planted where it writes: `state.refuse_planted_links`). Writes nothing."""
    plan = plan_from_text(text, source)
    if vet is not None:
        vet(plan)
    problems = plan.pilot_problems()
    if workload != "skip":
        named = plan.workload.named_imports
        problems += workload_problems(named, import_them=workload == "import")
    if problems:
        raise PlanError(problems, source)
    out_dir = (out_dir or Path("runs") / plan.campaign.id).resolve()
    digest = plan_hash(plan)
    code = workload_code(plan)
    known = existing_registration(plan, out_dir, code, digest=digest)
    refuse_planted_links(out_dir, plan.checkpoint.store, plan.campaign.id)  # again when opened
    return Admission(plan, text, source, out_dir, digest, code, known)


def open_campaign(admission: Admission) -> Campaign:
    """The admitted campaign, registered in its folder and loaded: call it holding the
    folder's lock (`campaign/lock.hold_folder`). A new campaign writes plan.yaml (the admitted
    text), then registration.json; a known one whose code changed before any run trained
    takes the new code. Leftover temporaries of an interrupted run are removed."""
    plan, out_dir, code = admission.plan, admission.out_dir, admission.code
    folder = CampaignFolder(out_dir)
    # Again, under the lock: another run may have registered the folder since the admission.
    on_disk = folder.registration()
    known = _checked(on_disk, plan, out_dir, code, admission.plan_hash)
    refuse_planted_links(out_dir, plan.checkpoint.store, plan.campaign.id)
    try:
        if known is None:
            out_dir.mkdir(parents=True, exist_ok=True)
            registration = Registration(
                campaign_id=plan.campaign.id,
                plan_hash=admission.plan_hash,
                out_dir=str(out_dir),
                registered_at=time.time(),
                code=code,
            )
            remove_leftover_temporaries(out_dir, plan.checkpoint.store)  # a killed registration's
            # The plan first: registration.json marks a complete registration, and a plan.yaml
            # without one (killed in between) is recognized by its hash on the next attempt.
            folder.write_plan(admission.text)
            crash_point(AFTER_PLAN)
            folder.write_registration(registration)
        else:
            registration = known
            if on_disk is not None and on_disk.code != code:
                # no run trained with the old code (else refused), or a folder from before the
                # code was recorded: the registration takes this code from now on
                folder.write_registration(on_disk.model_copy(update={"code": code}))
            # Only now, in a folder registered to this campaign: an interrupted run's, never
            # trusted.
            remove_leftover_temporaries(out_dir, plan.checkpoint.store)
    except OSError as exc:
        raise InfrastructureError(f"cannot write the output folder {out_dir}: {exc}") from exc
    return Campaign(folder, plan, registration, planned_runs(plan, admission.plan_hash))


def register(plan_text: str, out_dir: Path, source: str = "plan") -> Registration:
    """Admit and open in one call, for a caller holding only the text (tests, benches): the
    registration. `ablate run` and the flow admit first and open under the folder's lock."""
    return open_campaign(admit(plan_text, source, out_dir)).registration


# -- the folder's registration ------------------------------------------------------------------


def existing_registration(
    plan: Plan,
    out_dir: Path,
    code: WorkloadCode | Literal["hash"] | None = "hash",
    *,
    digest: str | None = None,
) -> Registration | None:
    """The folder's registration when it matches `plan` and the user's `code` (hashed here by
    default: `workload_code`); refuses any mismatch, and a folder that cannot take a new
    campaign. Writes nothing; the registration given back holds `code` (a changed code that
    no run trained with yet replaces the old: see `changed_code`)."""
    out_dir = out_dir.resolve()
    if code == "hash":
        code = workload_code(plan)
    known = CampaignFolder(out_dir).registration()
    return _checked(known, plan, out_dir, code, digest or plan_hash(plan))


def _checked(
    known: Registration | None,
    plan: Plan,
    out_dir: Path,
    code: WorkloadCode | None,
    digest: str,
) -> Registration | None:
    """`existing_registration` given what the folder holds (`known`)."""
    if known is not None:
        if known.plan_hash != digest or known.campaign_id != plan.campaign.id:
            if known.campaign_id == plan.campaign.id and _rehashes_to(out_dir, digest):
                raise CampaignConflictError(
                    f"{out_dir} holds campaign {known.campaign_id!r} as registered by another "
                    f"release of ablate: its plan.yaml is this plan, but this release reads "
                    f"it with other defaults (plan hash {digest}, registered as "
                    f"{known.plan_hash}), so its looks could be judged otherwise. Finish it "
                    "with the release that registered it, or run the plan into a new output "
                    "folder."
                )
            raise CampaignConflictError(
                f"{out_dir} already holds campaign {known.campaign_id!r} with plan hash "
                f"{known.plan_hash}; this plan ({plan.campaign.id!r}) hashes to {digest}. "
                "A corrected plan is a new campaign: use a new campaign id and output folder."
            )
        if changed_code(known, code, plan) and _trained(out_dir):
            before, now = known.code, code
            assert before is not None
            named = changes(before, now)
            raise CampaignConflictError(
                f"{out_dir} holds campaign {known.campaign_id!r}, whose runs trained with other "
                f"code ({before.line()}; now {now.line() if now else 'none found'}"
                f"{': ' + named if named else ''}): a rerun would mix two versions of it. "
                "Changed code is a new campaign: use a new campaign id and output folder (or "
                "restore the code)."
            )
        return known.model_copy(update={"out_dir": str(out_dir), "code": code})
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} exists and is not a folder; choose another --out")
    _check_creatable(out_dir)
    if out_dir.exists() and any(not _registering(p) for p in out_dir.iterdir()):
        raise InputError(
            f"{out_dir} is not empty and holds no registered campaign; choose another --out"
        )
    _check_unregistered_plan(out_dir, plan, digest)
    return None


def _rehashes_to(out_dir: Path, digest: str) -> bool:
    """Whether the folder's registered plan.yaml, read by this release, hashes to `digest`:
    the plan is unchanged and only the release that hashed it differs (a new field's default
    is part of every plan's hash)."""
    try:
        return plan_hash(CampaignFolder(out_dir).plan()) == digest
    except (AblationError, OSError, ValueError):
        return False  # an unreadable or edited plan.yaml: the plain refusal says enough


def changed_code(known: Registration, code: WorkloadCode | None, plan: Plan) -> bool:
    """Whether `code` differs from the registered code. A folder registered before the code
    was recorded (no `code`) takes any; one whose default folder an earlier release hashed
    (every small text file, no per-file digests) is compared by that rule."""
    before = known.code
    if before is None:
        return False
    if code is not None and code.sha256 == before.sha256:
        return False
    if not before.digests and not before.declared:
        earlier = workload_code(plan, rule="text")
        return earlier is None or earlier.sha256 != before.sha256
    return True


def _trained(out_dir: Path) -> bool:
    """Whether any run of the folder has a completion record (before one, changed code mixes
    nothing: a preflight's `fix` is corrected in the code and rerun in the same folder)."""
    records = out_dir / RECORDS
    return records.is_dir() and any(p.suffix == ".json" for p in records.iterdir())


def _registering(path: Path) -> bool:
    """What a registration killed half way leaves (or the lock of the run about to start):
    the plan's copy, the temporaries of it and of registration.json."""
    name = path.name
    temporary = name.startswith((f".{PLAN}.", f".{REGISTRATION}.")) and name.endswith(".tmp")
    return name in (LOCK, PLAN) or temporary


def _check_unregistered_plan(out_dir: Path, plan: Plan, digest: str) -> None:
    """A plan.yaml without registration.json is a registration killed between its two writes:
    this campaign's (same hash) registers again over it, any other plan is refused."""
    path = out_dir / PLAN
    if not path.is_file():
        return
    try:
        text = path.read_text(encoding="utf-8")
        found = plan_hash(plan_from_text(text, str(path)))
    except (OSError, UnicodeDecodeError, InputError):
        found = "unreadable"
    if found != digest:
        raise CampaignConflictError(
            f"{out_dir} holds an unregistered plan.yaml hashing to {found}; this plan "
            f"({plan.campaign.id!r}) hashes to {digest}. Choose another --out."
        )


def _check_creatable(out_dir: Path) -> None:
    """Refuse a folder that cannot be created or written, before anything starts."""
    ancestor = out_dir
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(
            f"cannot create the output folder {out_dir}: {ancestor} is a file, not a folder"
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"cannot create the output folder {out_dir}: {ancestor} is not writable")


# -- a flow run's form ----------------------------------------------------------------------------


def plan_text_of(plan_yaml: str, plan_path: str) -> tuple[str, str]:
    """(text, source): the pasted plan, else the file's; InputError when neither is given."""
    if plan_yaml.strip():
        # the same bounded reader as a file: a pasted plan never exceeds the size cap
        return bounded_text(plan_yaml, "plan_yaml"), "plan_yaml"
    if not plan_path.strip():
        raise InputError(NO_PLAN)
    return read_plan_text(Path(plan_path)), plan_path


def one_line(error: InputError) -> str:
    """The error as one line, a plan's problems joined by `;`, with nothing secret in it: it
    becomes the flow run's state message, which `ablate notify` forwards."""
    if isinstance(error, PlanError):
        head = f"{error.source}: " if error.source else ""
        problems = "; ".join(str(p) for p in error.problems)
        return redact(f"{head}invalid plan: {problems}")
    return redact(" ".join(str(error).split()))


MAX_NAME_CHARS = 64
"""A campaign id is at most 64 characters: a run's name is never longer than one."""


def run_name(plan_yaml: str, plan_path: str) -> str:
    """A served flow run's name: the campaign id, or a name that says the input is invalid
    (`ablate run` names its run after the admitted plan instead: no parse for a name)."""
    return _run_name(plan_yaml, plan_path)[: MAX_NAME_CHARS + len("invalid plan: ")]


def _run_name(plan_yaml: str, plan_path: str) -> str:
    try:
        text, source = plan_text_of(plan_yaml, plan_path)
    except InputError:
        given = plan_yaml.strip() or plan_path.strip()
        return "invalid: unreadable plan_path" if given else "invalid: no plan"
    try:
        return plan_from_text(text, source).campaign.id
    except InputError:
        pass
    try:  # name it after the campaign it meant to be, when that much can be read
        campaign_id = parse_yaml(text, source)["campaign"]["id"]
        return f"invalid plan: {str(campaign_id)[:MAX_NAME_CHARS]}"
    except (InputError, KeyError, TypeError):
        return "invalid plan"
