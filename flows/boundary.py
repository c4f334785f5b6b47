"""What a flow run launched through the Prefect API or UI may reach: `ablate serve`'s boundary.

Whoever reaches the Prefect API can start the deployment with any parameters, and the run
executes as the user of `ablate serve`. `ablate serve --root DIR --allow-entry MODULE`
narrows that: `plan_path` and `out_dir` must lie under a root (resolved, symbolic links
included), the plan's `workload.entry` must be on the allow-list, and its checkpoint store
must be inside the output folder, under a root or on `--allow-store` (an S3 store, its
endpoint: `ablations.security.entries`); anything else is refused, in one line, before a file
outside the roots is read or written, a store opened or the workload imported. The pasted plan is
read through the same bounded reader as a file.

The served flow runs are child processes of `ablate serve`: the boundary reaches them through
its environment (`ABLATE_SERVE_ROOTS`, `ABLATE_ALLOW_ENTRY`, `ABLATE_ALLOW_STORE`), written and
read only here. A
campaign started from the terminal (`ablate run`) has no boundary: its user is the operator.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ablations.campaign.opening import Admission, admit, plan_text_of
from ablations.errors import InputError, short_repr
from ablations.plan.model import Plan
from ablations.security.entries import require_allowed_entry, require_allowed_store

ROOTS_ENV = "ABLATE_SERVE_ROOTS"
ENTRIES_ENV = "ABLATE_ALLOW_ENTRY"
STORES_ENV = "ABLATE_ALLOW_STORE"


@dataclass(frozen=True)
class Boundary:
    """The folders a served campaign may read its plan from and write its folder into, the
    workload modules it may import besides the built-in ones, and the store URLs it may use
    besides its own folder and the roots."""

    roots: tuple[Path, ...]
    entries: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()

    @classmethod
    def of(cls, roots: list[Path], entries: list[str], stores: list[str] | None = None) -> Boundary:
        return cls(tuple(r.resolve() for r in roots), tuple(entries), tuple(stores or ()))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Boundary | None:
        """The boundary `ablate serve` set for its flow runs; None outside a served run."""
        env = os.environ if environ is None else environ
        if ROOTS_ENV not in env:
            return None
        roots = tuple(Path(r) for r in env[ROOTS_ENV].split(os.pathsep) if r)
        entries = tuple(e for e in env.get(ENTRIES_ENV, "").split(",") if e)
        stores = tuple(s for s in env.get(STORES_ENV, "").split(",") if s)
        return cls(roots, entries, stores)

    def install(self) -> None:
        """Hand the boundary to this process's flow runs (`ablate serve` only)."""
        os.environ[ROOTS_ENV] = os.pathsep.join(str(r) for r in self.roots)
        os.environ[ENTRIES_ENV] = ",".join(self.entries)
        os.environ[STORES_ENV] = ",".join(self.stores)

    def contains(self, value: str) -> bool:
        """Whether `value` resolves (symbolic links followed) under one of the roots."""
        target = Path(value).resolve()
        return any(target == root or root in target.parents for root in self.roots)

    def require_inside(self, parameter: str, value: str) -> None:
        """`InputError` unless `value` resolves under one of the roots."""
        if not self.contains(value):
            roots = ", ".join(str(r) for r in self.roots) or "none"
            raise InputError(
                f"{parameter} {short_repr(value)} is outside the folders this server allows "
                f"({roots}); its operator sets them with `ablate serve --root DIR`"
            )

    def vet(self, plan: Plan) -> None:
        """`InputError` unless the plan's workload modules are allowed and its checkpoint
        store is inside the output folder, a root or allowed (`admit` calls it right after
        the parse, before any of the user's files is read)."""
        for entry in plan.workload.imported:
            require_allowed_entry(entry, self.entries)
        checkpoint = plan.checkpoint
        require_allowed_store(checkpoint.store, checkpoint.endpoint_url, self.roots, self.stores)


def admitted_plan_text(plan_path: str, plan_yaml: str, out_dir: str) -> tuple[str, str]:
    """(text, source): the plan's text for a campaign flow run, once its paths are inside the
    boundary (when served); bounded whether pasted or read."""
    boundary = Boundary.from_env()
    if boundary is not None:
        boundary.require_inside("out_dir", out_dir)
        if plan_path and not plan_yaml:
            boundary.require_inside("plan_path", plan_path)
    return plan_text_of(plan_yaml, plan_path)  # bounded; names a missing plan


def admitted(plan_path: str, plan_yaml: str, out_dir: str) -> Admission:
    """A campaign flow run's plan admitted into `out_dir` (`ablations.campaign.opening.admit`):
    when served, its paths inside the roots before anything is read, then its modules and store
    vetted right after the one parse, before any of the user's files is read."""
    boundary = Boundary.from_env()
    text, source = admitted_plan_text(plan_path, plan_yaml, out_dir)
    return admit(text, source, Path(out_dir), vet=boundary.vet if boundary else None)
